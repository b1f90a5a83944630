"""Run-folder files a kill cannot corrupt: only complete-marked checkpoints are resumed from, merged or counted;
atomic JSON writes; leftovers of interrupted writes and cut-short embedding caches are removed.

The real kills (SIGKILL during a step, a save and the export of the CPU recipe) are in test_train_recipe.py.
"""

import json
import logging
import os

import pytest

from train.args import ConfigError, MergeArguments
from train.checkpoints import (
    COMPLETE_MARKER,
    complete_checkpoints,
    incomplete_reason,
    keep_newest,
    latest_complete_checkpoint,
    mark_complete,
    write_json_atomic,
)
from train.merge import select_checkpoints


def saved_checkpoint(output_dir, step, complete=True):
    """A checkpoint folder as the trainer writes it; `complete` marks it as the completion callback does."""
    folder = output_dir / f"checkpoint-{step}"
    (folder / "pooling").mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(os.urandom(256))
    (folder / "optimizer.pt").write_bytes(os.urandom(512))
    (folder / "pooling" / "config.json").write_text("{}")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if complete:
        mark_complete(folder, step)
    return folder


def killed_during_save(output_dir, step):
    """What a kill early in the trainer's save leaves: the code and config files, no weights, no state."""
    folder = output_dir / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    for name in ("modeling_c2llm.py", "configuration_c2llm.py", "config.json", "modules.json"):
        (folder / name).write_text("# partial\n")
    return folder


def test_resume_skips_a_checkpoint_killed_during_its_save(tmp_path, caplog):
    complete = saved_checkpoint(tmp_path, 20)
    killed_during_save(tmp_path, 40)
    with caplog.at_level(logging.INFO, logger="train.checkpoints"):
        assert latest_complete_checkpoint(tmp_path) == complete
    assert f"skipping checkpoint-40: no {COMPLETE_MARKER} (its save did not finish); removed it" in caplog.text
    assert f"newest complete checkpoint: {complete}" in caplog.text
    assert not (tmp_path / "checkpoint-40").exists()  # it would otherwise count towards save_total_limit
    assert incomplete_reason(complete) is None and (complete / "optimizer.pt").is_file()


def test_a_checkpoint_damaged_after_its_save_is_not_complete(tmp_path):
    folder = saved_checkpoint(tmp_path, 10)
    with open(folder / "optimizer.pt", "r+b") as file:
        file.truncate(100)
    assert incomplete_reason(folder) == "optimizer.pt has 100 bytes, 512 were written"
    (folder / "pooling" / "config.json").unlink()
    (folder / COMPLETE_MARKER).write_text('{"files": ')
    assert incomplete_reason(folder).startswith(f"unreadable {COMPLETE_MARKER}")
    assert latest_complete_checkpoint(tmp_path, remove_incomplete=False) is None
    assert folder.exists()


def test_no_checkpoint_means_a_fresh_start(tmp_path):
    assert latest_complete_checkpoint(tmp_path) is None
    assert latest_complete_checkpoint(tmp_path / "not-created-yet") is None


def test_rotation_counts_and_removes_only_complete_checkpoints(tmp_path):
    for step in (10, 20):
        saved_checkpoint(tmp_path, step)
    killed_during_save(tmp_path, 30)
    keep_newest(tmp_path, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-10", "checkpoint-20", "checkpoint-30"]
    saved_checkpoint(tmp_path, 40)
    keep_newest(tmp_path, 2)
    assert list(complete_checkpoints(tmp_path)) == [20, 40]
    keep_newest(tmp_path, None)
    assert list(complete_checkpoints(tmp_path)) == [20, 40]


def test_merge_uses_only_complete_checkpoints(tmp_path):
    saved_checkpoint(tmp_path, 20)
    saved_checkpoint(tmp_path, 40)
    killed_during_save(tmp_path, 60)
    chosen = select_checkpoints(tmp_path, MergeArguments(num_checkpoints=2))
    assert [p.name for p in chosen] == ["checkpoint-20", "checkpoint-40"]
    with pytest.raises(ConfigError, match=r"merge.checkpoint_steps \[60\] have no complete checkpoint"):
        select_checkpoints(tmp_path, MergeArguments(num_checkpoints=1, checkpoint_steps=[40, 60]))
    with pytest.raises(ConfigError, match=r"holds 2 complete checkpoints \(steps \[20, 40\]\)"):
        select_checkpoints(tmp_path, MergeArguments(num_checkpoints=3))


def test_an_interrupted_json_write_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "metrics.json"
    write_json_atomic(path, {"before": 0.1})

    def killed(_):
        raise KeyboardInterrupt  # stands in for the process being stopped between write and rename

    monkeypatch.setattr(os, "fsync", killed)
    with pytest.raises(KeyboardInterrupt):
        write_json_atomic(path, {"before": 0.1, "final": 0.5})
    assert json.loads(path.read_text()) == {"before": 0.1}
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]  # no temporary file left behind


def test_leftovers_of_interrupted_writes_are_removed_and_finished_files_kept(tmp_path):
    from train.checkpoints import remove_interrupted_writes

    (tmp_path / ".final-k2j3").mkdir()
    (tmp_path / ".final-k2j3" / "model.safetensors").write_bytes(b"half")
    (tmp_path / ".metrics.json-x81").write_text('{"fin')
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / ".report.json-a1").write_text("")
    write_json_atomic(tmp_path / "metrics.json", {"before": 0.1})
    (tmp_path / ".keep-me").write_text("not ours")
    remove_interrupted_writes(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".keep-me", "data", "metrics.json"]
    assert list((tmp_path / "data").iterdir()) == []


def test_embeddings_cut_short_by_a_kill_are_removed_before_mining(tmp_path):
    """mine_hard_negatives saves its embedding cache in place; a truncated file must not stop every rerun."""
    import numpy as np

    from train.mining import remove_unreadable_embeddings

    np.save(tmp_path / "corpus_embeddings_ok.npy", np.ones((40, 8), dtype=np.float32))
    np.save(tmp_path / "query_embeddings_cut.npy", np.ones((40, 8), dtype=np.float32))
    with open(tmp_path / "query_embeddings_cut.npy", "r+b") as file:
        file.truncate(300)
    with pytest.raises(ValueError):
        np.load(tmp_path / "query_embeddings_cut.npy")
    remove_unreadable_embeddings(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["corpus_embeddings_ok.npy"]
    remove_unreadable_embeddings(tmp_path / "not-created-yet")
