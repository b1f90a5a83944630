"""The pooling ablation trained to the end (experiments/smollm2/run_ablation.sh): the recipe's dev-loss stopping rule
(training.dev_loss_patience / dev_loss_min_steps, train/train.py) and the script's checks of its inputs.

The rule is checked on the callback directly (fast), and once in a real tiny training run (slow): with learning
rates of 0 the dev loss never falls again after the first evaluation, so the run must stop at the minimum step."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import TrainerControl, TrainerState, TrainingArguments

from train.args import ConfigError
from train.recipe import load_recipe
from train.train import dev_loss_stopping_callback

REPO_ROOT = Path(__file__).resolve().parents[1]
ABLATION_SCRIPT = REPO_ROOT / "experiments" / "smollm2" / "run_ablation.sh"
SMOKE_RECIPE = REPO_ROOT / "train" / "configs" / "cpu-smoke.yaml"
RUN_TIMEOUT_SECONDS = 900


def evaluate(callback, step: int, losses: dict[str, float]) -> TrainerControl:
    """One evaluation at ``step`` as the trainer reports it: one on_evaluate call per held-out group."""
    state, control = TrainerState(global_step=step), TrainerControl()
    for group, loss in losses.items():
        control = callback.on_evaluate(TrainingArguments(output_dir="unused"), state, control,
                                       metrics={f"eval_{group}_loss": loss, "epoch": 0.1})
    return control


def test_dev_loss_stops_after_patience_evaluations_without_a_new_minimum():
    callback = dev_loss_stopping_callback(["py"], patience=2, min_steps=0)
    decisions = {step: evaluate(callback, step, {"py": loss}).should_training_stop
                 for step, loss in [(10, 2.0), (20, 1.5), (30, 1.6), (40, 1.4), (50, 1.45), (60, 1.5)]}
    # 30 is one evaluation without a new minimum; 40 is a new minimum (the count starts again); 60 is the second
    assert decisions == {10: False, 20: False, 30: False, 40: False, 50: False, 60: True}


def test_dev_loss_never_stops_before_the_minimum_step():
    callback = dev_loss_stopping_callback(["py"], patience=1, min_steps=40)
    decisions = [evaluate(callback, step, {"py": 1.0}).should_training_stop for step in (10, 20, 30, 40)]
    assert decisions == [False, False, False, True]
    assert evaluate(callback, 50, {"py": 1.0}).should_save  # the step it stops at is the checkpoint exported


def test_dev_loss_is_the_mean_over_groups_judged_once_every_group_is_evaluated():
    callback = dev_loss_stopping_callback(["py", "java"], patience=1, min_steps=0)
    assert not evaluate(callback, 10, {"py": 2.0, "java": 2.0}).should_training_stop
    # py rises but java falls more: the mean (1.9) is a new minimum, so no stop
    assert not evaluate(callback, 20, {"py": 2.2, "java": 1.6}).should_training_stop
    state = TrainerState(global_step=30)
    half = callback.on_evaluate(TrainingArguments(output_dir="unused"), state, TrainerControl(),
                                metrics={"eval_py_loss": 5.0})
    assert not half.should_training_stop  # java not evaluated yet at this step
    assert evaluate(callback, 30, {"java": 5.0}).should_training_stop


def test_dev_loss_stopping_without_held_out_pairs_is_refused_before_any_work():
    with pytest.raises(ConfigError, match=r"set data.eval_fraction above 0"):
        load_recipe(SMOKE_RECIPE, ["data.eval_fraction=0", "training.dev_loss_patience=2"])
    with pytest.raises(ConfigError, match=r"dev_loss_patience"):
        load_recipe(SMOKE_RECIPE, ["training.dev_loss_patience=0"])


@pytest.fixture
def stand_in_shared_data(tmp_path):
    """A SHARED_DATA holding the benchmark folders the script looks for (empty: these runs stop before reading
    them), so the checks run in a clone without ../shared too."""
    folder = tmp_path / "shared-data"
    for name in ("humaneval", "humanevalx_py2cpp"):
        (folder / "benchmarks" / name).mkdir(parents=True)
    return folder


@pytest.mark.parametrize(
    ("environment", "message"),
    [({"STEPS": "sixty"}, "STEPS=sixty: a whole number is needed"),
     ({"PATIENCE": "-1"}, "PATIENCE=-1: a whole number is needed"),
     ({"SHARED_DATA": "/nonexistent"}, "set SHARED_DATA to the folder that holds benchmarks/")],
)  # fmt: skip
def test_ablation_script_refuses_bad_settings_before_training(tmp_path, stand_in_shared_data, environment, message):
    completed = subprocess.run(
        ["bash", str(ABLATION_SCRIPT), str(tmp_path / "runs"), "pma:0"], cwd=REPO_ROOT,
        env={**os.environ, "SHARED_DATA": str(stand_in_shared_data), **environment,
             "PYTHON": "false"},  # training must not start: "false" would fail it
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert completed.returncode == 2 and message in completed.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_run_whose_dev_loss_stops_falling_stops_at_the_minimum_step_and_exports_it(tmp_path):
    output_dir = tmp_path / "run"
    settings = [
        "data.datasets=[{name: python_docstrings, modules: [json, argparse]}]", "data.eval_fraction=0.2",
        "data.max_eval_queries=16", "mining.enabled=false", "training.max_steps=12", "training.eval_steps=2",
        "training.save_steps=2", "training.per_device_train_batch_size=4", "training.learning_rate=0",
        "training.head_learning_rate=0", "training.dev_loss_patience=1", "training.dev_loss_min_steps=6",
        "merge.num_checkpoints=1", "merge.weights=null",
    ]  # fmt: skip
    completed = subprocess.run(
        [sys.executable, "-m", "train.train", str(SMOKE_RECIPE), "--output-dir", str(output_dir),
         *[argument for setting in settings for argument in ("--set", setting)]],
        cwd=REPO_ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}, capture_output=True,
        text=True, timeout=RUN_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-6000:]
    assert "stopping at step 6: the dev loss has not fallen for 1 evaluations" in completed.stderr
    state = json.loads((output_dir / "checkpoint-6" / "trainer_state.json").read_text())
    dev_losses = [entry for entry in state["log_history"] if any(key.endswith("_loss") and key.startswith("eval_")
                                                                 for key in entry)]  # fmt: skip
    assert [entry["step"] for entry in dev_losses] == [2, 4, 6]
    assert not list(output_dir.glob("checkpoint-8")) and (output_dir / "final" / "config.json").is_file()


def test_ablation_script_refuses_a_missing_recipe_before_training(tmp_path, stand_in_shared_data):
    completed = subprocess.run(
        ["bash", str(ABLATION_SCRIPT), str(tmp_path / "runs"), "pma:0"], cwd=REPO_ROOT,
        env={**os.environ, "SHARED_DATA": str(stand_in_shared_data), "RECIPE": "train/configs/x.yaml",
             "PYTHON": "false"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert completed.returncode == 2 and "no recipe file train/configs/x.yaml" in completed.stderr
    assert not (tmp_path / "runs").exists()
