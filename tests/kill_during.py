"""Run the training recipe and SIGKILL it at a chosen moment, as a crash or an out-of-memory kill would.

    python tests/kill_during.py step:25 -- train/configs/cpu-smoke.yaml --output-dir runs/crash
    python -m train.train train/configs/cpu-smoke.yaml --output-dir runs/crash   # the rerun resumes and finishes

WHEN is one of
    mining:N            when hard-negative mining of the N-th (source, language) group starts (groups before it mined
                        and cached)
    step:N              inside optimizer step N (its forward and backward done, the weights not yet updated)
    save:checkpoint-N   while the trainer writes checkpoint-N: its weights are on disk, its optimizer state not
    export              while the final model is written: weights saved in the export's staging folder

The process kills itself with SIGKILL (no cleanup handlers run, exactly as `kill -9`); its exit status is then
-9 / 137. Everything after `--` is passed to `python -m train.train`. Used by tests/test_train_recipe.py.
"""

import os
import runpy
import signal
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def die() -> None:
    sys.stderr.write(f"kill_during: SIGKILL now ({WHEN})\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def kill_inside_optimizer_step(step: int) -> None:
    import torch

    original, calls = torch.optim.AdamW.step, [0]

    def step_then_maybe_die(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == step:
            die()
        return original(self, *args, **kwargs)

    torch.optim.AdamW.step = step_then_maybe_die


def kill_while_saving(checkpoint: str) -> None:
    import torch

    original = torch.save

    def save_or_die(obj, f, *args, **kwargs):
        path = Path(str(f))
        if path.parent.name == checkpoint and path.name == "optimizer.pt":
            die()
        return original(obj, f, *args, **kwargs)

    torch.save = save_or_die


def kill_before_mining_group(group: int) -> None:
    import train.mining

    original, calls = train.mining.mine_group, [0]

    def mine_or_die(*args, **kwargs):
        calls[0] += 1
        if calls[0] == group:
            die()
        return original(*args, **kwargs)

    train.mining.mine_group = mine_or_die  # train.train imports it from train.mining when data preparation starts


def kill_while_exporting() -> None:
    import train.release

    def die_instead(*args, **kwargs):
        die()

    train.release.write_tokenizer_files = die_instead  # called after the weights, before the folder is moved in


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[2] != "--":
        sys.exit(__doc__)
    WHEN, recipe_args = sys.argv[1], sys.argv[3:]
    kind, _, value = WHEN.partition(":")
    sys.path.insert(0, str(REPO_ROOT))
    if kind == "mining" and value.isdigit():
        kill_before_mining_group(int(value))
    elif kind == "step" and value.isdigit():
        kill_inside_optimizer_step(int(value))
    elif kind == "save" and value.startswith("checkpoint-"):
        kill_while_saving(value)
    elif kind == "export":
        kill_while_exporting()
    else:
        sys.exit(f"unknown WHEN {WHEN!r}\n\n{__doc__}")
    sys.argv = ["train.train", *recipe_args]
    runpy.run_module("train.train", run_name="__main__", alter_sys=True)
