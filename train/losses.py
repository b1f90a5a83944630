"""Contrastive losses for C2LLM: InfoNCE over in-batch and hard negatives, weighted per source.

- ``build_base_loss``: MultipleNegativesRankingLoss (scale 20 = temperature 0.05, gathered across devices so the
  in-batch negatives come from the global batch), or its GradCache twin CachedMultipleNegativesRankingLoss.
- ``WeightedLoss``: multiplies a loss by a constant. sentence-transformers has no per-dataset loss weight, and its
  trainer swaps the (DDP-wrapped) model into losses through ``loss.model``, so the wrapper exposes ``.model``.
- ``build_group_losses``: one loss per (source, language) group, keyed like the training DatasetDict; with
  ``loss.matryoshka_dims``, sentence-transformers' MatryoshkaLoss around the base loss (inside the weight).
- ``check_matryoshka``: the recipe's matryoshka dimensions against the model's embedding dimension d.

Inputs per row are (query, positive, negative_1, ..., negative_K): every row's positive and negatives enter every
query's softmax denominator, i.e. scores has shape (batch, batch * (1 + K)).
"""

from __future__ import annotations

import math

from torch import Tensor, nn

from .args import ConfigError, LossArguments


class WeightedLoss(nn.Module):
    """``weight * loss(features, labels)``, transparent to the trainer (``.model`` is the wrapped loss's model).

    Works with the cached loss too: GradCache scales its stored gradients by the incoming gradient, which
    carries the weight.
    """

    def __init__(self, loss: nn.Module, weight: float) -> None:
        super().__init__()
        self.loss = loss
        self.weight = weight

    @property
    def model(self) -> nn.Module:
        # Read-only on purpose: the trainer replaces the model by recursing into ``self.loss``.
        return self.loss.model

    def forward(self, sentence_features: list[dict[str, Tensor]], labels: Tensor | None) -> Tensor:
        return self.weight * self.loss(sentence_features, labels)

    def get_config_dict(self) -> dict:
        return {"weight": self.weight, **self.loss.get_config_dict()}

    @property
    def citation(self) -> str:
        return self.loss.citation


def build_base_loss(model: nn.Module, args: LossArguments) -> nn.Module:
    from sentence_transformers.sentence_transformer import losses

    if args.cached:
        return losses.CachedMultipleNegativesRankingLoss(
            model,
            scale=args.scale,
            mini_batch_size=args.mini_batch_size,
            gather_across_devices=args.gather_across_devices,
        )
    return losses.MultipleNegativesRankingLoss(
        model, scale=args.scale, gather_across_devices=args.gather_across_devices
    )


def check_matryoshka(args: LossArguments, embedding_dim: int) -> None:
    """Refuse matryoshka dimensions that are not distinct widths in 1..embedding_dim, or weights that do not match."""
    dims, weights = args.matryoshka_dims, args.matryoshka_weights
    if dims is None:
        if weights is not None:
            raise ConfigError("loss.matryoshka_weights needs loss.matryoshka_dims.")
        return
    bad = [dim for dim in dims if not 0 < dim <= embedding_dim]
    if not dims or bad:
        raise ConfigError(f"loss.matryoshka_dims: every dimension must be in 1..{embedding_dim} (the model's embedding "
                          f"dimension), got {bad or dims}.")
    if len(set(dims)) != len(dims):
        raise ConfigError(f"loss.matryoshka_dims lists a dimension twice: {dims}; list each once.")
    if weights is not None and (len(weights) != len(dims) or min(weights) < 0 or sum(weights) <= 0):
        raise ConfigError(f"loss.matryoshka_weights needs one non-negative weight per dimension ({len(dims)}), not all "
                          f"zero; got {weights}.")
    if weights is not None and not math.isfinite(sum(weights)):  # each finite, but the loss sums them
        raise ConfigError(f"loss.matryoshka_weights {weights} sum to {sum(weights)}: the weighted loss would overflow. "
                          "Use weights of the order of 1 (the loss is their weighted sum).")


def build_group_losses(model: nn.Module, group_weights: dict[str, float], args: LossArguments) -> dict[str, nn.Module]:
    """One loss per group; groups share the underlying loss, weights of 1 skip the wrapper."""
    base = build_base_loss(model, args)
    if args.matryoshka_dims:
        from sentence_transformers.sentence_transformer.losses import MatryoshkaLoss

        base = MatryoshkaLoss(model, base, args.matryoshka_dims, args.matryoshka_weights)
    return {group: base if weight == 1 else WeightedLoss(base, weight) for group, weight in group_weights.items()}
