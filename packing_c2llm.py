"""Sequence packing for C2LLM: a batch as one row of its real tokens (`PackedBatch`) and attention per sequence of
such a row (`packed_sdpa_attention`, transformers >= 4.53). Imports only torch and transformers."""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers.integrations.sdpa_attention import sdpa_attention_forward

# Registered under its own name, so no other model's attention changes; chosen once when the model is built, so
# no forward pass changes the shared config and one model can serve several threads.
PACKED_SDPA = "c2llm_sdpa"


def packed_sdpa_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                          cu_seq_lens_q=None, **kwargs):
    """transformers' sdpa, or for a packed row, query (1, heads, total, head_dim) and key/value (1, kv_heads, total,
    head_dim) cut by cu_seq_lens_q (n + 1,), causal attention per sequence: sum(length^2) work where a
    block-diagonal mask would cost total^2. Returns ((1, total, heads, head_dim), None), as sdpa does."""
    if cu_seq_lens_q is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    bounds = cu_seq_lens_q.tolist()
    per_sequence = [F.scaled_dot_product_attention(query[:, :, start:end], key[:, :, start:end], value[:, :, start:end],
                                                   dropout_p=dropout, is_causal=True, scale=scaling, enable_gqa=True)
                    for start, end in zip(bounds[:-1], bounds[1:])]  # each (1, heads, length, head_dim)
    return torch.cat(per_sequence, dim=2).transpose(1, 2).contiguous(), None


try:  # transformers >= 4.53: attention and mask builders are looked up by name (masking_utils)
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.modeling_utils import AttentionInterface
    AttentionInterface.register(PACKED_SDPA, packed_sdpa_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(PACKED_SDPA, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])  # padded: sdpa's mask
    PACKED_SDPA_AVAILABLE = True
except ImportError:  # older versions: padded batches, plain sdpa
    PACKED_SDPA_AVAILABLE = False


@dataclass(frozen=True)
class PackedBatch:
    """Sequences back to back in one row (1, total). real_tokens (n, width) bool marks where the row's tokens sit,
    in row-major order, in the padded layout: a padded batch's mask (any side), or lengths for a row sent packed."""

    real_tokens: torch.Tensor

    @classmethod
    def of_row(cls, cu_seq_lens: torch.Tensor | None = None, position_ids: torch.Tensor | None = None):
        """A row sent packed, cut by flash-attn's cu_seq_lens (n + 1,) or where its position ids (1, total) restart
        at 0; None when neither says so (one unpadded batch)."""
        if cu_seq_lens is None and position_ids is not None and position_ids.shape[0] == 1:
            starts = torch.nonzero(position_ids[0] == 0).flatten()  # (n,)
            cu_seq_lens = torch.cat([starts, starts.new_tensor([position_ids.shape[1]])])
        if cu_seq_lens is None:
            return None
        lengths = (cu_seq_lens[1:] - cu_seq_lens[:-1]).long()  # (n,)
        positions = torch.arange(int(lengths.max()), device=cu_seq_lens.device)  # (width,)
        return cls(positions[None, :] < lengths[:, None])

    @property
    def cu_seq_lens(self) -> torch.Tensor:
        return F.pad(self.real_tokens.sum(dim=1).cumsum(0), (1, 0)).to(torch.int32)  # (n + 1,) bounds in the row

    def pack(self, padded: torch.Tensor | None) -> torch.Tensor | None:
        """(n, width, ...) -> (1, total, ...): the real tokens only."""
        return None if padded is None else padded[self.real_tokens][None]

    def unpack(self, packed: torch.Tensor) -> torch.Tensor:
        """(1, total, hidden) -> (n, width, hidden), zeros on padding."""
        padded = packed.new_zeros(*self.real_tokens.shape, packed.shape[-1])
        padded[self.real_tokens] = packed[0]
        return padded

    def backbone_inputs(self, layer_types: list[str] | None) -> dict:
        """The row's positions and the sequence bounds that reach every attention call. The mask mapping holds
        None for each layer type (config.layer_types), so no (total x total) mask is built: the bounds are the mask."""
        cu_seq_lens, max_length = self.cu_seq_lens, int(self.real_tokens.sum(dim=1).max())
        rank = self.real_tokens.long().cumsum(dim=1) - 1  # (n, width): index of each token in its sequence
        return {"position_ids": self.pack(rank), "cu_seq_lens_q": cu_seq_lens, "cu_seq_lens_k": cu_seq_lens,
                "attention_mask": {layer_type: None for layer_type in layer_types or ["full_attention"]},
                "max_length_q": max_length, "max_length_k": max_length}
