"""Two-process DDP (gloo, CPU) run of the recipe for a few steps: the multi-GPU code path without GPUs.

It starts two Python processes that each import torch, build the model and load data, so it costs about a
minute on 2 cores: it is in the slow tier (CI runs it; `pytest -m "not slow"` leaves it out).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def test_two_process_gloo_run_trains_merges_and_exports(tmp_path):
    output_dir = tmp_path / "ddp"
    overrides = [
        "training.max_steps=4", "training.save_steps=2", "training.logging_steps=1", "training.report_to=[none]",
        "data.eval_fraction=0", "data.datasets=[{name: python_docstrings, modules: [json, email, logging]}]",
    ]  # fmt: skip
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29533",
        "-m", "train.train", "train/configs/cpu-smoke.yaml", "--output-dir", str(output_dir),
    ] + [item for override in overrides for item in ("--set", override)]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    completed = subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert completed.returncode == 0, completed.stderr[-6000:]
    state = json.loads((output_dir / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["global_step"] == 4
    assert state["train_batch_size"] == 16
    assert "training on 2 process(es), 16 rows per device, global batch 32 rows" in completed.stderr
    assert (output_dir / "final" / "model.safetensors").is_file()
