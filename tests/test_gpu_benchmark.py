"""python -m benchmarks.gpu: the budget plan and its refusals (fast), and the whole command at tiny sizes on the CPU
(slow: every part runs the code it runs on a lent GPU, and writes its record)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import gpu

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
COMMAND_TIMEOUT_SECONDS = 1800


def test_a_short_budget_drops_the_lowest_priority_parts_first():
    planned = {"encode": 100, "train": 100, "recipe": 200, "serving": 50}
    assert gpu.plan_parts(list(gpu.PARTS), 450, planned) == (list(gpu.PARTS), [])
    # serving (last) goes first, then recipe: the order asked for does not change the priority
    assert gpu.plan_parts(["serving", "recipe", "train", "encode"], 420, planned) == (
        ["encode", "train", "recipe"], ["serving"])
    assert gpu.plan_parts(list(gpu.PARTS), 399, planned) == (["encode", "train"], ["recipe", "serving"])
    assert gpu.plan_parts(["serving"], 50, planned) == (["serving"], [])


def test_a_budget_that_fits_no_part_or_an_unknown_part_is_refused_with_the_fix():
    planned = {"encode": 100, "train": 100, "recipe": 200, "serving": 50}
    with pytest.raises(gpu.BudgetError, match=r"--budget 99 s fits no part: encode.*Give --budget 100 or more"):
        gpu.plan_parts(["encode", "serving"], 99, planned)
    with pytest.raises(gpu.BudgetError, match=r"--parts speed: unknown; choose among encode, train"):
        gpu.plan_parts(["encode", "speed"], 1000, planned)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [(["--tiny", "--budget", "0"], "--budget 0: give a positive number of seconds"),
     (["--tiny", "--budget", "10"], "fits no part"),
     (["--tiny", "--device", "cpu", "--parts", "recipe", "--shared-data", "/nonexistent"],
      "no benchmarks/ folder there"),
     (["--device", "cpu"], "pass --tiny to run the same code at tiny sizes here")],
)  # fmt: skip
def test_bad_settings_stop_before_any_work(tmp_path, capsys, arguments, message):
    with pytest.raises(SystemExit) as stopped:
        gpu.main([*arguments, "--record-dir", str(tmp_path / "records"), "--work-dir", str(tmp_path / "work")])
    assert stopped.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "records").exists() and not (tmp_path / "work").exists()


def test_ndcg_is_read_per_benchmark_from_a_suite_output(tmp_path):
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"humaneval": {"ndcg@10": 0.25, "mrr@10": 0.2}, "note": "x"}))
    assert gpu.ndcg_by_benchmark(suite) == {"humaneval": 0.25}


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_DATA / "benchmarks" / "humaneval").is_dir(),
                    reason=f"needs {SHARED_DATA}/benchmarks/humaneval (../shared/data, see its README)")
def test_the_whole_command_runs_at_tiny_sizes_on_the_cpu_and_records_every_part(tmp_path):
    records = tmp_path / "records"
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu", "--tiny", "--device", "cpu", "--budget", "1500",
         "--record-dir", str(records), "--work-dir", str(tmp_path / "work"), "--shared-data", str(SHARED_DATA)],
        cwd=REPO_ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                            "OMP_NUM_THREADS": "1"},
        capture_output=True, text=True, timeout=COMMAND_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-6000:]
    metrics = {part: json.loads((records / f"gpu_{part}.json").read_text())["metrics"] for part in gpu.PARTS}
    assert not [part for part, figures in metrics.items() if "error" in figures or "skipped" in figures]

    tiny = metrics["encode"]["shapes"]["tiny"]
    assert tiny["attention"]["backends"]["default"]["kernels"]  # the profiler named the kernel that ran
    assert tiny["attention"]["backends"]["math"]["min_cosine_vs_eager"] > 0.999
    assert all(point["ours"]["tokens_per_s"] > 0 and point["published_approach"]["tokens_per_s"] > 0
               for point in tiny["sweep"])
    setups = metrics["train"]["setups"]
    assert len(setups) == len(gpu.TRAIN_SETUPS) and all(0 < setup["mfu"] < 1 for setup in setups)
    steps = metrics["recipe"]["steps"]
    assert [steps[name]["exit_code"] for name in ("recipe_train", "recipe_suite", "ablation")] == [0, 0, 0]
    assert set(metrics["recipe"]["ablation_scores"]) == {"pma-s0", "mean-s0"}
    assert 0 <= metrics["recipe"]["recipe_scores"]["humaneval"] <= 1
    levels = metrics["serving"]["levels"]
    assert [level["concurrency"] for level in levels] == list(gpu.SERVING_CONCURRENCY)
    assert all(level["errors"] == 0 and level["texts_per_s"] > 0 for level in levels)
    assert "- serving:" in completed.stdout and "concurrency 32" in completed.stdout


def test_the_gpu_recipe_reads_every_pair_of_its_sources_from_the_carried_data_folder(tmp_path):
    from train.recipe import load_recipe

    recipe = load_recipe(REPO_ROOT / gpu.SMOLLM2_RECIPE, gpu.gpu_recipe_overrides(tmp_path))
    assert [source.max_rows for source in recipe.data.datasets] == [None] * len(recipe.data.datasets)
    assert [source.path for source in recipe.data.datasets if source.path] == [
        str(tmp_path / "train" / "codexglue_java2cs_train.jsonl")]
    assert recipe.data.decontaminate == [str(tmp_path / "benchmarks")]
    assert (recipe.model.max_seq_length, recipe.mining.num_negatives) == (1024, 7)


def test_the_wheels_the_machine_lacks_are_listed_per_part_at_this_venvs_versions():
    from benchmarks import gpu_wheels

    needs = gpu_wheels.missing_distributions(["serving", "recipe"])
    assert list(needs) == ["recipe", "serving"]  # priority order, each distribution under the first part needing it
    assert "mteb" in needs["recipe"] and "litserve" in needs["serving"]
    assert not set(needs["recipe"]) & set(needs["serving"])
    assert not {"torch", "transformers", "numpy"} & (set(needs["recipe"]) | set(needs["serving"]))  # on the image
    with pytest.raises(gpu_wheels.WheelError, match="unknown part speed"):
        gpu_wheels.missing_distributions(["speed"])


def test_wheels_over_the_call_limit_are_refused_whole_or_cut_into_calls_that_fit(tmp_path, monkeypatch):
    from benchmarks import gpu_wheels

    sizes = {"big": 5 * gpu_wheels.MIB // 2, "small": gpu_wheels.MIB // 4}  # 2.5 and 0.25 MiB
    monkeypatch.setattr(gpu_wheels, "missing_distributions", lambda parts: {"serving": {"big": "1", "small": "1"}})

    def fake_download(name, version, folder):
        wheel = folder / f"{name}-{version}-py3-none-any.whl"
        wheel.write_bytes(bytes(range(256)) * (sizes[name] // 256))
        return wheel

    monkeypatch.setattr(gpu_wheels, "download", fake_download)
    destination = tmp_path / ".whl"
    with pytest.raises(gpu_wheels.WheelError, match=r"over the 1 MiB one call carries.*--split"):
        gpu_wheels.fetch(["serving"], destination, 1, None, tmp_path)
    assert not destination.exists() and not list(tmp_path.glob(".*"))  # nothing half-written
    manifest = gpu_wheels.fetch(["serving"], destination, 1, None, tmp_path, split=True)
    calls = sorted(destination.glob("call-*"))
    assert len(calls) == len(manifest["calls"]) == 3
    for call in calls:
        assert sum(path.stat().st_size for path in call.glob("*.whl*")) <= gpu_wheels.MIB
        assert (call / "stage.sh").is_file() and (call / "MANIFEST.json").is_file()
    pieces = json.loads((calls[0] / "MANIFEST.json").read_text())["pieces"]["big-1-py3-none-any.whl"]
    joined = b"".join(next(destination.glob(f"call-*/{piece}")).read_bytes() for piece in pieces)
    assert joined == bytes(range(256)) * (sizes["big"] // 256)


def test_a_failing_part_records_its_error_and_the_next_part_still_runs(tmp_path, monkeypatch, capsys):
    def broken(settings):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setitem(gpu.RUNNERS, "encode", broken)
    monkeypatch.setitem(gpu.RUNNERS, "train", lambda settings: {"setups": []})
    records = tmp_path / "records"
    assert gpu.main(["--tiny", "--device", "cpu", "--parts", "encode", "train", "--record-dir", str(records),
                     "--work-dir", str(tmp_path / "work")]) == 0
    encode = json.loads((records / "gpu_encode.json").read_text())["metrics"]
    assert encode["error"] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert json.loads((records / "gpu_train.json").read_text())["metrics"]["setups"] == []
    assert "- encode: RuntimeError" in capsys.readouterr().out
