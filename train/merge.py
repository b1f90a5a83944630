"""Final model = weighted average of N training checkpoints (the paper merges 4 taken at different steps).

- ``select_checkpoints``: the complete checkpoints to merge (explicit steps, or the last N).
- ``load_checkpoint``: one checkpoint as a plain SentenceTransformer: its LoRA adapters loaded onto the start model
  with peft's ``PeftModel.from_pretrained`` and folded in by ``merge_and_unload`` (which also unwraps the PMA head
  that was trained in full and saved with the adapter); a full fine-tuning checkpoint is loaded as it is.
- ``average_state_dicts``: sum_i w_i * state_i with the weights normalised to sum to 1, one state dict at a time.
- ``merge_checkpoints``: the two together; holds one model and one float32 running sum, never N models.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import torch

from .args import ConfigError, MergeArguments, ModelArguments
from .checkpoints import complete_checkpoints
from .model import load_sentence_transformer

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


def load_checkpoint(checkpoint: Path, start_folder: Path, model_args: ModelArguments):
    """``checkpoint`` as a plain SentenceTransformer with its adapters folded into the weights.

    Adapters are put on ``start_folder`` rather than on the base path recorded in the checkpoint, so a run
    folder can be moved or copied before merging.
    """
    if not (checkpoint / "adapter_config.json").is_file():  # full fine-tuning: the checkpoint is the model
        return load_sentence_transformer(checkpoint, model_args, device="cpu")
    from peft import PeftModel

    model = load_sentence_transformer(start_folder, model_args, device="cpu")
    # merge_and_unload folds the adapters into the very backbone object the SentenceTransformer holds, in place.
    PeftModel.from_pretrained(model.transformers_model, str(checkpoint)).merge_and_unload()
    return model


def normalised_weights(weights: Sequence[float], count: int) -> list[float]:
    """``weights`` scaled to sum to 1; an error unless there are ``count`` non-negative ones with a positive sum."""
    weights = [float(weight) for weight in weights]
    if len(weights) != count:
        raise ValueError(f"{len(weights)} merge weights for {count} models.")
    if min(weights) < 0 or sum(weights) <= 0:
        raise ValueError(f"merge weights must be non-negative with a positive sum, got {weights}.")
    return [weight / sum(weights) for weight in weights]


def average_state_dicts(
    state_dicts: Iterable[Mapping[str, torch.Tensor]], weights: Sequence[float] | None = None
) -> dict[str, torch.Tensor]:
    """sum_i w_i * state_i over ``state_dicts``, w normalised to sum to 1 (equal weights when None).

    ``state_dicts`` is consumed one at a time, so a generator that loads each model only when asked keeps a single
    model in memory beside the running sum. Floating-point tensors are summed in float32 and cast back to their own
    dtype; any other tensor (integer buffers) must be equal in every state dict and is kept. Every state dict must
    have the keys and shapes of the first.
    """
    if weights is not None:
        weights = normalised_weights(weights, len(weights))
    total: dict[str, torch.Tensor] = {}
    dtypes: dict[str, torch.dtype] = {}
    seen = 0
    for index, state in enumerate(state_dicts):
        if weights is not None and index >= len(weights):
            raise ValueError(f"more state dicts than the {len(weights)} merge weights.")
        if index == 0:
            dtypes = {key: tensor.dtype for key, tensor in state.items()}
        elif state.keys() != dtypes.keys():
            missing, extra = sorted(dtypes.keys() - state.keys()), sorted(state.keys() - dtypes.keys())
            raise ValueError(
                f"state dict {index} does not have the keys of the first: missing {missing[:5]}, extra {extra[:5]}."
            )
        weight = 1.0 if weights is None else weights[index]
        for key, tensor in state.items():
            if index == 0:
                total[key] = tensor.float() * weight if tensor.is_floating_point() else tensor.clone()
            elif tensor.shape != total[key].shape:
                raise ValueError(
                    f"state dict {index}: {key} has shape {tuple(tensor.shape)}, "
                    f"the first has {tuple(total[key].shape)}."
                )
            elif tensor.is_floating_point():
                total[key].add_(tensor.float(), alpha=weight)
            elif not torch.equal(tensor, total[key]):
                raise ValueError(
                    f"state dict {index}: {key} is not a floating-point tensor and differs from the first."
                )
        seen = index + 1
        del state  # the producer may free this model before it loads the next one
    if seen == 0:
        raise ValueError("no state dicts to average.")
    if weights is not None and seen != len(weights):
        raise ValueError(f"{len(weights)} merge weights for {seen} state dicts.")
    for key, tensor in total.items():
        if dtypes[key].is_floating_point:
            total[key] = (tensor if weights is not None else tensor.div_(seen)).to(dtypes[key])
    return total


def merge_checkpoints(checkpoints: list[Path], start_folder: Path, args: MergeArguments, model_args: ModelArguments):
    """Average ``checkpoints`` with ``args.weights`` (equal when None) into one SentenceTransformer.

    Each checkpoint is loaded (adapters folded in) only when the average reaches it; the last one loaded receives the
    averaged weights, so memory holds one model and a float32 copy of its weights.
    """
    weights = normalised_weights(args.weights or [1.0] * len(checkpoints), len(checkpoints))
    logger.info("merging %s with weights %s", [path.name for path in checkpoints], weights)
    loaded = []

    def states():
        for path in checkpoints:
            loaded.clear()  # the previous model goes before the next one is loaded
            loaded.append(load_checkpoint(path, start_folder, model_args))
            yield loaded[0].state_dict()

    averaged = average_state_dicts(states(), weights)
    model = loaded[0]
    model.load_state_dict(averaged)
    return model
