"""Weight-space ensembling with the start model: final = (1 - w) * trained + w * start (``merge.start_model_weight``).

Fine-tuning forgets what the start model knew about inputs unlike the training data; averaging the trained weights
with the start weights keeps most of both (WiSE-FT, Wortsman et al. 2022). Applied after the checkpoint merge, as a
plain average of state dicts: tensors that training never changed (frozen layers) stay bit-identical, so a delta
against the start model stores only what training touched. By default only the backbone (module 0) is averaged: a
fresh head's start values hold nothing worth keeping (``merge.start_model_merge_head``).
"""

from __future__ import annotations

import logging

import torch

from .merge import average_state_dicts

logger = logging.getLogger(__name__)


def blend_with_start(model, start_model, weight: float, merge_head: bool = False):
    """``model`` (a SentenceTransformer) with its weights replaced, in place, by ``(1 - weight) * model + weight *
    start_model`` (backbone only unless ``merge_head``); returns ``model``. Both must have the same modules."""
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"weight must be in [0, 1), got {weight}")
    if weight == 0:
        return model
    modules = range(len(model)) if merge_head else [0]
    changed = 0
    for index in modules:
        trained, start = model[index].state_dict(), start_model[index].state_dict()
        try:
            averaged = average_state_dicts([trained, start], [1.0 - weight, weight])
        except ValueError as error:
            raise ValueError(f"module {index}: the start model does not match the trained one: {error}") from None
        with torch.no_grad():
            for name, tensor in trained.items():
                # Untouched tensors (frozen layers, integer buffers) stay bit-identical: the delta export skips them.
                if tensor.is_floating_point() and not torch.equal(tensor, start[name].to(tensor.device)):
                    tensor.copy_(averaged[name])
                    changed += 1
    logger.info("averaged %d tensors with the start model (start weight %g)", changed, weight)
    return model
