"""The tiny CPU recipe end to end: data -> mining -> training -> merge -> export -> reload elsewhere -> encode.

One run of `python -m train.train train/configs/cpu-smoke.yaml` is shared by the tests of this module. It is
killed with SIGKILL five times (between two hard-negative mining groups, inside a training step before the first
checkpoint and after it, while a checkpoint is written, while the final model is exported) and started again each
time, as after crashes, so the same run also shows that every rerun resumes, that the last one finishes, and
(against one uninterrupted run) that it ends with the same weights, bit for bit. The tests check its outputs, that
training learned (held-out retrieval before vs after, measured again in a fresh process), the output-folder guard
and the Hub upload step. It needs the Java -> C# pairs of ../shared/data (see its README) and takes several minutes
on 2 cores.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
SMOKE_RECIPE = REPO_ROOT / "train" / "configs" / "cpu-smoke.yaml"
JAVA_TO_CSHARP = REPO_ROOT.parent / "shared" / "data" / "train" / "codexglue_java2cs_train.jsonl"
# Held-out retrieval must beat the untrained start model by at least this much (NDCG@10 / MRR@10).
MIN_GAIN = 0.1
RUN_TIMEOUT_SECONDS = 1800
# (where the run is killed, what the rerun must then say about its checkpoints); then a last rerun must finish.
KILLS = [
    # between two mining groups: the rerun reuses the first group's negatives and mines the second
    ("mining:2", "reusing mined negatives"),
    # before the first checkpoint: the rerun trains from the start on the data the killed run mined
    ("step:3", "reusing mined negatives"),
    ("step:25", "resuming from {}/checkpoint-20"),
    ("save:checkpoint-40", "resuming from {}/checkpoint-20"),
    ("export", "training already reached max_steps=40 in {}/checkpoint-40"),  # so it merges and exports again
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not JAVA_TO_CSHARP.is_file(), reason=f"needs {JAVA_TO_CSHARP} (../shared/data, see its README)"
    ),
]


def recipe_command(output_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "train.train", str(SMOKE_RECIPE), "--output-dir", str(output_dir), *extra]


def run_recipe(output_dir: Path, kill_during: str | None = None) -> subprocess.CompletedProcess:
    """The recipe in a new process; with `kill_during`, it SIGKILLs itself at that moment (tests/kill_during.py)."""
    command = recipe_command(output_dir)
    if kill_during:
        command = [sys.executable, str(REPO_ROOT / "tests" / "kill_during.py"), kill_during, "--", *command[3:]]
    return subprocess.run(
        command, cwd=REPO_ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory) -> tuple[Path, list[str]]:
    """(DIR, the log of every run after the first): killed at each of KILLS, then finished."""
    output_dir = tmp_path_factory.mktemp("recipe") / "run"
    logs = []
    for kill_during, _ in KILLS:
        completed = run_recipe(output_dir, kill_during)
        assert completed.returncode == -signal.SIGKILL, completed.stderr[-6000:]
        assert f"kill_during: SIGKILL now ({kill_during})" in completed.stderr
        assert not (output_dir / "final").exists()
        logs.append(completed.stderr)
    completed = run_recipe(output_dir)
    assert completed.returncode == 0, completed.stderr[-6000:]
    return output_dir, logs[1:] + [completed.stderr]


@pytest.fixture(scope="module")
def uninterrupted_run(tmp_path_factory) -> Path:
    """The same recipe run once from start to end, for the bit-exact comparison with `smoke_run`."""
    output_dir = tmp_path_factory.mktemp("recipe") / "uninterrupted"
    completed = run_recipe(output_dir)
    assert completed.returncode == 0, completed.stderr[-6000:]
    return output_dir


def test_killed_and_resumed_run_gives_the_uninterrupted_runs_weights_bit_for_bit(smoke_run, uninterrupted_run):
    """Five kills (between two mining groups, inside a step before any checkpoint and after one, inside a checkpoint
    save, inside the export) and reruns that reuse the mined data end with exactly the weights of a run that was
    never interrupted: resuming reloads the checkpoint in float32 (it came back rounded to bfloat16 on CPUs that
    compute it), the adapter starts from the seed alone (a rerun that skips mining used to start from another
    adapter), and each group's random negatives are drawn from a seed of its own (a rerun that found the first
    group cached used to sample the second group's from another state of Python's global `random`)."""
    from safetensors.torch import load_file

    output_dir, _ = smoke_run
    for relative in ("checkpoint-40/adapter_model.safetensors", "final/model.safetensors"):
        resumed, reference = load_file(output_dir / relative), load_file(uninterrupted_run / relative)
        assert resumed.keys() == reference.keys()
        differing = [name for name in reference if not torch.equal(resumed[name], reference[name])]
        assert not differing, (relative, differing[:5])


def test_recipe_writes_every_stage(smoke_run):
    smoke_run, _ = smoke_run
    report = json.loads((smoke_run / "data" / "report.json").read_text())
    assert set(report["groups"]) == {"codexglue_java2cs__java_csharp", "python_docstrings__python"}
    assert all(group["train_rows"] > 100 for group in report["groups"].values())
    assert list((smoke_run / "data" / "mined").iterdir())
    assert sorted(p.name for p in smoke_run.glob("checkpoint-*")) == ["checkpoint-20", "checkpoint-40"]
    assert list((smoke_run / "runs").rglob("events.out.tfevents.*")), "no tensorboard log"
    final = smoke_run / "final"
    for name in ("config.json", "model.safetensors", "modules.json", "config_sentence_transformers.json",
                 "tokenizer.json", "modeling_c2llm.py", "sentence_c2llm.py", "README.md"):  # fmt: skip
        assert (final / name).is_file(), name
    assert not (final / "adapter_config.json").exists()  # LoRA merged into the weights
    card = (final / "README.md").read_text()
    assert "## Training details" in card and "checkpoint-20, checkpoint-40" in card
    from huggingface_hub import ModelCard

    parsed = ModelCard.load(final / "README.md")  # the run's own card: a random start has no base model
    assert parsed.data.base_model is None and "Qwen2.5-Coder" not in card.split("---")[1]
    assert {result.dataset_type for result in parsed.data.eval_results} == set(report["groups"])
    from train.export import find_local_paths

    assert find_local_paths(final) == []


def test_training_learns(smoke_run):
    """Mean held-out NDCG@10 over the groups, from the recipe's own evaluator (before training vs final model)."""
    metrics = json.loads((smoke_run[0] / "metrics.json").read_text())
    before, after = metrics["before"]["sequential_score"], metrics["final"]["sequential_score"]
    assert after > before + MIN_GAIN, metrics


def test_final_model_reloads_in_a_fresh_process_and_retrieves_better(smoke_run, fresh_python):
    """From another directory, without the repository on sys.path: AutoModel and SentenceTransformer agree, the
    stored prompts apply by name, and held-out MRR@10 of the exported model beats the start model's."""
    smoke_run, _ = smoke_run
    code = f"""
import json, torch
from datasets import load_from_disk
from sentence_transformers import SentenceTransformer
from transformers import AutoModel

heldout = load_from_disk({str(smoke_run / "data" / "heldout" / "codexglue_java2cs__java_csharp")!r})
queries, documents = list(dict.fromkeys(heldout["query"])), list(dict.fromkeys(heldout["positive"]))
answer = {{q: documents.index(p) for q, p in zip(heldout["query"], heldout["positive"])}}

def mrr_at_10(folder):
    model = SentenceTransformer(folder, trust_remote_code=True)
    q = model.encode_query(queries, prompt_name="CodeTransOceanDL-query", convert_to_tensor=True)
    d = model.encode_document(documents, prompt_name="CodeTransOceanDL-document", convert_to_tensor=True)
    ranks = (q @ d.T).argsort(dim=1, descending=True)[:, :10].tolist()
    return sum(1 / (r.index(answer[x]) + 1) for x, r in zip(queries, ranks) if answer[x] in r) / len(queries)

final = {str(smoke_run / "final")!r}
st = SentenceTransformer(final, trust_remote_code=True)
auto = AutoModel.from_pretrained(final, trust_remote_code=True)
texts = ["public int Add(int a, int b) {{ return a + b; }}", "def parse(path): return open(path).read()"]
agreement = torch.nn.functional.cosine_similarity(st.encode(texts, convert_to_tensor=True), auto.encode(texts), dim=-1)
before, after = mrr_at_10({str(smoke_run / "init")!r}), mrr_at_10(final)
print(json.dumps({{"agreement": agreement.min().item(), "before": before, "after": after}}))
"""
    result = fresh_python(code)
    assert result["agreement"] > 0.9999
    assert result["after"] > result["before"] + MIN_GAIN, result


def test_every_rerun_resumes_from_the_newest_complete_checkpoint(smoke_run):
    output_dir, logs = smoke_run
    for (killed_during, resumption), log in zip(KILLS, logs):
        assert resumption.format(output_dir) in log, killed_during
        assert "reusing mined negatives" in log  # the data step did not mine again
    # the checkpoint killed during its save was skipped, said so, and was replaced by a complete one
    after = {killed_during: log for (killed_during, _), log in zip(KILLS, logs)}
    assert "resuming from" not in after["step:3"]  # no checkpoint yet: training starts again from step 1
    assert ("skipping checkpoint-40: no checkpoint-complete.json (its save did not finish); removed it"
            in after["save:checkpoint-40"])
    assert f"removing {output_dir}/.final-" in after["export"]  # the export's staging folder, left by the kill
    assert not list(output_dir.glob(".final-*"))
    state = json.loads((output_dir / "checkpoint-40" / "trainer_state.json").read_text())
    assert state["global_step"] == 40
    logged = [entry["step"] for entry in state["log_history"] if "loss" in entry]
    assert logged == [1, 5, 10, 15, 20, 25, 30, 35, 40]  # one history across the restarts, no step lost or repeated


def test_output_dir_holding_another_model_is_not_overwritten(smoke_run, tmp_path, capsys):
    from train.recipe import load_recipe
    from train.train import OutputDirError, check_output_dir, main

    smoke_run, _ = smoke_run

    changed = load_recipe(SMOKE_RECIPE, ["lora.r=4"])
    with pytest.raises(OutputDirError, match=r"holds a different model \(changed: lora.r: 8 -> 4\)"):
        check_output_dir(smoke_run, changed, overwrite=False)
    other = tmp_path / "someone-elses-model"
    other.mkdir()
    (other / "config.json").write_text("{}")
    with pytest.raises(OutputDirError, match="holds no recipe.json"):
        check_output_dir(other, changed, overwrite=False)
    with pytest.raises(SystemExit) as stopped:  # the command line says so too, without a traceback
        main([str(SMOKE_RECIPE), "--output-dir", str(other)])
    assert stopped.value.code == 2 and "holds no recipe.json" in capsys.readouterr().err
    assert (other / "config.json").read_text() == "{}"


# The recipe with a loss that is NaN from its first step (every recipe value in range can no longer make one).
NAN_LOSS_RECIPE = ("import runpy, sys; from train import losses; build = losses.build_group_losses; "
                   "losses.build_group_losses = lambda *a, **k: {group: losses.WeightedLoss(loss, float('nan')) "
                   "for group, loss in build(*a, **k).items()}; "
                   "sys.argv[0] = 'train.train'; runpy.run_module('train.train', run_name='__main__')")


def test_a_run_whose_loss_is_nan_stops_with_an_error_and_exports_nothing(tmp_path):
    """The first loss is NaN: the run stops with status 1 and a message, nothing saved or exported."""
    output_dir = tmp_path / "run"
    completed = subprocess.run(
        [sys.executable, "-c", NAN_LOSS_RECIPE, *recipe_command(output_dir)[3:], "--set",
         "data.datasets=[{name: python_docstrings, modules: [json, argparse]}]"],
        cwd=REPO_ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}, capture_output=True,
        text=True, timeout=RUN_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert completed.returncode == 1, completed.stderr[-6000:]
    assert "error: training diverged at step 1: the loss is nan" in completed.stderr
    assert "no checkpoint was saved before it" in completed.stderr and "Traceback" not in completed.stderr
    assert not (output_dir / "final").exists() and not list(output_dir.glob("checkpoint-*"))


class LocalHub:
    """Stands in for huggingface_hub.HfApi: repos are folders under `root`."""

    def __init__(self, root: Path):
        self.root, self.created = root, []

    def create_repo(self, repo_id, repo_type, private, exist_ok):
        self.created.append((repo_id, repo_type, private))
        (self.root / repo_id).mkdir(parents=True, exist_ok=exist_ok)

    def upload_folder(self, folder_path, repo_id, repo_type, commit_message):
        shutil.copytree(folder_path, self.root / repo_id, dirs_exist_ok=True)
        return f"local://{repo_id}"


def test_push_uploads_the_release_folder(smoke_run, tmp_path, fresh_python):
    from train.export import push_to_hub

    smoke_run, _ = smoke_run

    hub = LocalHub(tmp_path / "hub")
    assert push_to_hub(smoke_run / "final", "me/c2llm-tiny", private=True, api=hub) == "local://me/c2llm-tiny"
    assert hub.created == [("me/c2llm-tiny", "model", True)]
    uploaded = hub.root / "me" / "c2llm-tiny"
    result = fresh_python(
        "import json; from sentence_transformers import SentenceTransformer as ST; "
        f"print(json.dumps({{'dim': ST({str(uploaded)!r}, trust_remote_code=True).encode(['x']).shape[1]}}))"
    )
    assert result["dim"] == 64
    # a checkpoint still points at its local base model: pushing it would break for everyone else
    with pytest.raises(ValueError, match="local paths"):
        push_to_hub(smoke_run / "checkpoint-40", "me/checkpoint", api=hub)
