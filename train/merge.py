"""Final model = weighted average of N training checkpoints (the paper merges 4 taken at different steps).

Each checkpoint holds LoRA adapters and the PMA head; they are loaded onto the start model and merged into its
weights, and the resulting full models are averaged by ``SentenceTransformer.merge`` (mergekit's linear
method, weights normalised to sum to 1). mergekit refuses models that still carry adapters, hence the order.
All N models are held in memory at once: plan for N times the model size in the merge dtype.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path

from .args import ConfigError, MergeArguments, ModelArguments
from .checkpoints import complete_checkpoints
from .model import load_sentence_transformer, merge_lora

logger = logging.getLogger(__name__)


def select_checkpoints(output_dir: Path, args: MergeArguments) -> list[Path]:
    """The complete checkpoints to merge, oldest first: explicit steps, or the last ``num_checkpoints``."""
    available = complete_checkpoints(output_dir)
    if args.checkpoint_steps:
        missing = [step for step in args.checkpoint_steps if step not in available]
        if missing:
            raise ConfigError(
                f"merge.checkpoint_steps {missing} have no complete checkpoint in {output_dir}; "
                f"found {list(available)}."
            )
        return [available[step] for step in sorted(args.checkpoint_steps)]
    if len(available) < args.num_checkpoints:
        raise ConfigError(
            f"merge.num_checkpoints={args.num_checkpoints} but {output_dir} holds {len(available)} complete "
            f"checkpoints (steps {list(available)}). Save more often (training.save_steps) or merge fewer."
        )
    return list(available.values())[-args.num_checkpoints :]


def load_merged_checkpoint(checkpoint: Path, start_folder: Path, model_args: ModelArguments):
    """A checkpoint as a plain SentenceTransformer: adapters loaded onto the start model, then folded in.

    Adapters are put on ``start_folder`` rather than on the base path recorded in the checkpoint, so a run
    folder can be moved or copied before merging.
    """
    if not (checkpoint / "adapter_config.json").is_file():  # full fine-tuning: the checkpoint is the model
        return load_sentence_transformer(checkpoint, model_args, device="cpu")
    model = load_sentence_transformer(start_folder, model_args, device="cpu")
    model.load_adapter(str(checkpoint))
    merge_lora(model)
    return model


def merge_checkpoints(checkpoints: list[Path], start_folder: Path, args: MergeArguments, model_args: ModelArguments):
    """Average ``checkpoints`` with ``args.weights`` (equal when None) into one SentenceTransformer."""
    from sentence_transformers import SentenceTransformer

    first = load_merged_checkpoint(checkpoints[0], start_folder, model_args)
    models = [first]
    for path in checkpoints[1:]:
        # transformers names remote-code modules after their folder, so models loaded from different folders
        # bring their own (identical) classes, and the merge requires identical module types: reuse the first's.
        twin = copy.deepcopy(first)
        twin.load_state_dict(load_merged_checkpoint(path, start_folder, model_args).state_dict())
        models.append(twin)
    if len(models) == 1:
        return first
    weights = args.weights or [1.0 / len(models)] * len(models)
    logger.info("merging %s with weights %s", [path.name for path in checkpoints], weights)
    return SentenceTransformer.merge(models, method=args.method, parameters={"weight": weights}, dtype=args.dtype)
