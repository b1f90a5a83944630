"""Run-folder files that a kill at any moment cannot corrupt: complete-marked checkpoints and atomic writes.

The trainer writes ``checkpoint-N`` file by file (weights, optimizer, scheduler, RNG, trainer state); a kill
during that leaves a folder that looks like a checkpoint but cannot be resumed from. So a checkpoint counts only
once it carries ``COMPLETE_MARKER``: written by ``CheckpointCompletion`` after the trainer reports the save
finished, after every file was flushed to disk, and by rename, so the marker itself is never half-written. It
lists every file with its size, so a checkpoint damaged later (a file removed or truncated) is not complete
either.

- ``latest_complete_checkpoint``: where a rerun resumes; logs what it skipped and why, and removes incomplete
  folders (nothing in them can be used, and left in place they would count towards the checkpoint limit).
- ``complete_checkpoints``: step -> folder of every complete checkpoint (what the merge may use).
- ``CheckpointCompletion``: the trainer callback that marks each save complete, then keeps the newest
  ``keep`` complete checkpoints. The trainer's own rotation is off: it would count an unfinished folder and
  could delete a complete checkpoint before the new one is marked.
- ``write_json_atomic``: JSON through the project's one atomic write (c2llm_plumbing.atomic: a temporary name beside
  the target, flushed to disk, then a rename); ``remove_interrupted_writes`` clears the temporary names a kill left
  behind.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any

from c2llm_plumbing.atomic import write_atomically

logger = logging.getLogger(__name__)

COMPLETE_MARKER = "checkpoint-complete.json"
CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")


def write_json_atomic(path: Path, content: Any) -> None:
    """``content`` as JSON in ``path``, durably (flushed to disk before the rename): a resumed run trusts it."""
    write_atomically(path, json.dumps(content, indent=2) + "\n", durable=True)


# Files and folders of DIR written under a temporary ".<name>-*" name and then renamed (here and by the release
# writer): a kill between the two leaves the temporary one behind.
ATOMICALLY_WRITTEN = ("init", "final", "recipe.json", "metrics.json", "data/report.json")


def remove_interrupted_writes(output_dir: Path) -> None:
    """Delete what writes killed before their rename left in ``output_dir`` (never a finished file)."""
    for name in ATOMICALLY_WRITTEN:
        target = Path(output_dir) / name
        for leftover in target.parent.glob(f".{target.name}-*"):
            logger.info("removing %s: left by an interrupted write", leftover)
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)


def checkpoint_folders(output_dir: Path) -> dict[int, Path]:
    """Global step -> `checkpoint-<step>` folder, complete or not, oldest first."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return {}
    found = {}
    for path in output_dir.iterdir():
        match = CHECKPOINT_PATTERN.match(path.name)
        if match and path.is_dir():
            found[int(match.group(1))] = path
    return dict(sorted(found.items()))


def incomplete_reason(folder: Path) -> str | None:
    """None for a complete checkpoint, else why it is not one."""
    marker = Path(folder) / COMPLETE_MARKER
    if not marker.is_file():
        return f"no {COMPLETE_MARKER} (its save did not finish)"
    try:
        files = json.loads(marker.read_text(encoding="utf-8"))["files"]
    except (ValueError, KeyError, TypeError) as error:
        return f"unreadable {COMPLETE_MARKER} ({error})"
    for name, size in files.items():
        try:
            found = (Path(folder) / name).stat().st_size
        except OSError:
            return f"{name} is missing"
        if found != size:
            return f"{name} has {found} bytes, {size} were written"
    return None


def complete_checkpoints(output_dir: Path) -> dict[int, Path]:
    """Global step -> folder of every complete checkpoint in ``output_dir``, oldest first."""
    return {step: path for step, path in checkpoint_folders(output_dir).items() if incomplete_reason(path) is None}


def latest_complete_checkpoint(output_dir: Path, remove_incomplete: bool = True) -> Path | None:
    """The newest complete checkpoint (None when there is none); logs each folder skipped and why."""
    latest = None
    for step, folder in reversed(checkpoint_folders(output_dir).items()):
        reason = incomplete_reason(folder)
        if reason is None:
            latest = latest or folder
            continue
        if remove_incomplete:
            shutil.rmtree(folder)
        logger.warning("skipping %s: %s%s", folder.name, reason, "; removed it" if remove_incomplete else "")
    if latest is not None:
        logger.info("newest complete checkpoint: %s", latest)
    return latest


def mark_complete(folder: Path, step: int) -> None:
    """Flush every file of ``folder`` to disk, then write the marker that makes it a complete checkpoint."""
    files = {}
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file() and path.name != COMPLETE_MARKER:
            with open(path, "rb") as file:
                os.fsync(file.fileno())
            files[str(path.relative_to(folder))] = path.stat().st_size
    write_json_atomic(Path(folder) / COMPLETE_MARKER, {"global_step": step, "files": files})


def keep_newest(output_dir: Path, keep: int | None) -> None:
    """Delete all but the newest ``keep`` complete checkpoints (None keeps every one)."""
    if keep is None or keep <= 0:
        return
    complete = list(complete_checkpoints(output_dir).values())
    for folder in complete[:-keep]:
        logger.info("removing %s (training.save_total_limit=%d)", folder.name, keep)
        shutil.rmtree(folder)


def checkpoint_completion_callback(keep: int | None):
    """A TrainerCallback: after each save, mark the checkpoint complete, then keep the newest ``keep``."""
    from accelerate import PartialState
    from transformers import TrainerCallback
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    class CheckpointCompletion(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            # Under DDP/DeepSpeed every process writes its part (its RNG state, its shard): wait for all of them.
            PartialState().wait_for_everyone()
            if state.is_world_process_zero:
                folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
                mark_complete(folder, state.global_step)
                keep_newest(Path(args.output_dir), keep)
            PartialState().wait_for_everyone()
            return control

    return CheckpointCompletion()
