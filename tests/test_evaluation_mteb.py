"""`python -m evaluation.mteb_code` offline: mteb's mock task, local BEIR folders as mteb tasks, the
results layout mteb's results repository expects, ModelMeta, and the paper-ordered summary table."""

import json
import math

import pytest

from evaluation import mteb_code
from c2llm_data.packaged_minilm import MINILM_HUB_ID, packaged_minilm_folder
from evaluation.model_meta import model_meta_from_folder
from c2llm_data.tasks import MTEB_CODE_COLUMNS, UnknownNameError


@pytest.mark.slow  # reads every mteb task's metadata (about 20 CPU-seconds); test_evaluation_data.py checks the
# suggestions of the same unknown_name_error on the 12 MTEB-Code names
def test_unknown_task_lists_close_matches(capsys):
    with pytest.raises(UnknownNameError, match="Did you mean: .*CosQA"):
        mteb_code.select_tasks(["CosQa"])
    with pytest.raises(SystemExit):
        mteb_code.main(["--model", "minilm", "--tasks", "StackOverflowQ"])
    assert "StackOverflowQA" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--max-seq-length", "--batch-size"])
def test_a_zero_length_or_batch_is_refused_before_loading(option, capsys):
    """--max-seq-length 0 used to be ignored silently (the model's own length was used)."""
    with pytest.raises(SystemExit) as exited:
        mteb_code.main(["--model", "minilm", "--mock", option, "0"])
    assert exited.value.code == 2 and f"{option} must be at least 1" in capsys.readouterr().err


@pytest.mark.slow  # builds the benchmark's twelve mteb tasks
def test_benchmark_has_the_papers_twelve_tasks():
    names = {task.metadata.name for task in mteb_code.select_tasks(None)}
    assert names == {task for task, _ in MTEB_CODE_COLUMNS}


@pytest.mark.slow
def test_cached_results_of_other_weights_under_the_same_name_and_revision_are_refused(tiny_model_dir, tmp_path,
                                                                                      capsys):
    """mteb's cache keys results by (name, revision): other weights under the same pair used to get the first
    model's results printed and submitted. The weights' digest is recorded beside the results and checked."""
    from tests.make_tiny_model import make_tiny_model

    other = make_tiny_model(tmp_path / "other", hidden_size=64, pma_dim=32, pma_heads=4, seed=1)
    run = lambda folder, *extra: mteb_code.main(
        ["--model", str(folder), "--model-name", "test-org/tiny", "--revision", "0" * 40, "--mock",
         "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--dtype", "float32", *extra])
    assert run(tiny_model_dir) == 0
    assert run(tiny_model_dir) == 0  # the same weights reuse their results
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        run(other)
    assert exited.value.code == 2
    assert "holds results of weights with sha256" in capsys.readouterr().err
    assert run(other, "--overwrite") == 0
    folder = next((tmp_path / "cache" / mteb_code.OFFLINE_CACHE_FOLDER / "results" / "test-org__tiny").iterdir())
    assert (folder / mteb_code.WEIGHTS_DIGEST_FILE).read_text().strip() == mteb_code.weights_digest(other)
    assert json.loads((folder / "model_meta.json").read_text())["embed_dim"] == 32


@pytest.mark.slow
def test_mock_task_run_fills_the_result_cache_layout(tmp_path, capsys):
    import mteb

    cache_dir = tmp_path / "mteb-cache"
    assert mteb_code.main(["--model", "minilm", "--mock", "--cache-dir", str(cache_dir), "--no-progress"]) == 0
    assert not (cache_dir / "results").exists()  # offline checks stay out of the real runs' cache
    cache_dir = cache_dir / mteb_code.OFFLINE_CACHE_FOLDER
    revision_folder = next((cache_dir / "results" / MINILM_HUB_ID.replace("/", "__")).iterdir())
    assert (revision_folder / "MockRetrievalTask.json").is_file()
    saved_meta = json.loads((revision_folder / "model_meta.json").read_text())
    assert saved_meta["name"] == MINILM_HUB_ID and saved_meta["embed_dim"] == 384
    # The same layout ResultCache reads back and submit_results copies into mteb's results repository.
    cache = mteb.ResultCache(cache_dir)
    assert cache.load_task_result("MockRetrievalTask", MINILM_HUB_ID, revision_folder.name) is not None
    assert "| MockRetrievalTask |" in capsys.readouterr().out


def test_summary_table_uses_the_papers_column_order():
    scores = {task: float(i) for i, (task, _) in enumerate(MTEB_CODE_COLUMNS)}
    header, _, row = mteb_code.summary_table(scores).splitlines()
    assert header.strip("| ").split(" | ") == [h for _, h in MTEB_CODE_COLUMNS] + ["Avg"]
    assert row.endswith("| 5.50 |")  # mean of 0..11
    partial = mteb_code.summary_table({"CosQA": 40.0})
    assert "| - |" in partial and "40.00 (1/12 tasks)" in partial


def test_model_meta_of_the_packaged_minilm_matches_the_model():
    from safetensors import safe_open

    folder = packaged_minilm_folder()
    meta = model_meta_from_folder(folder, name=MINILM_HUB_ID, revision="test")
    # the weights file's floating-point tensors (every parameter; BERT's int64 position_ids is a buffer), counted from
    # its header without loading the model
    with safe_open(folder / "model.safetensors", "pt") as weights:
        tensors = [weights.get_slice(name) for name in weights.keys()]
        stored = sum(math.prod(tensor.get_shape()) for tensor in tensors if tensor.get_dtype().startswith(("F", "BF")))
    assert meta.n_parameters == stored
    assert meta.embed_dim == json.loads((folder / "config.json").read_text())["hidden_size"] == 384
    # mteb's convention: what the model can take (BERT's 512 positions), not the 256 it is used with
    assert meta.max_tokens == json.loads((folder / "config.json").read_text())["max_position_embeddings"] == 512
    assert (meta.license, meta.languages, meta.similarity_fn_name.value) == ("apache-2.0", ["eng-Latn"], "cosine")
    assert "MSMARCO" in meta.training_datasets  # from the card's ms_marco
    assert meta.memory_usage_mb == round(meta.n_parameters * 4 / 1024**2)  # float32 weights
    compile(meta.to_python(), "model_meta", "eval")  # valid Python for the mteb PR


def test_every_flag_has_help():
    for action in mteb_code.build_parser()._actions:
        assert action.help, action.option_strings
