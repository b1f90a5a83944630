"""The PMA head of C2LLM (torch only), apart so every model folder carries it: C2LLMModel and PMAPoolingHead use it."""

import torch
import torch.nn.functional as F
from torch import nn

# Added back after attention: the projected seed S W_q (published PMA_v2, paper eq. (5)) or S itself (CodeFuse-CGE).
PMA_RESIDUALS = ("projected_query", "query")
PMA_ATTENTION_SCALES = ("embedding_dim", "head_dim")  # scores / sqrt(d), as published, or / sqrt(d / heads)


def positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def check_pma_options(embedding_dim, num_heads, attention_scale, residual, query_dim, prefix="",
                      dim_name="embedding_dim") -> None:
    """Raise a ValueError that names a wrong PMA option (`prefix` + its name; d: `dim_name`) and its valid values."""
    for name, value in {dim_name: embedding_dim, f"{prefix}query_dim": query_dim}.items():
        if not positive_int(value):
            raise ValueError(f"{name} must be a positive integer (a width), got {value!r}.")
    if not positive_int(num_heads) or embedding_dim % num_heads:
        divisors = [heads for heads in range(1, min(embedding_dim, 64) + 1) if embedding_dim % heads == 0]
        raise ValueError(f"{prefix}num_heads={num_heads!r} must be a positive integer dividing {dim_name}="
                         f"{embedding_dim}; valid head counts up to 64: {divisors}.")
    for name, value, valid in (("residual", residual, PMA_RESIDUALS),
                               ("attention_scale", attention_scale, PMA_ATTENTION_SCALES)):
        if not isinstance(value, str) or value not in valid:
            raise ValueError(f"Unknown {prefix}{name} {value!r}: choose one of {', '.join(valid)}.")
    if residual == "query" and query_dim != embedding_dim:
        raise ValueError(f"{prefix}residual='query' adds the learnable query to the embedding: {prefix}query_dim must "
                         f"equal {dim_name}={embedding_dim}, got {query_dim}; use {prefix}residual='projected_query'.")


class PMAPooling(nn.Module):
    """Pooling by Multihead Attention. With token states H (l, d_LLM), embedding dimension d, the learnable query S
    (1, query_dim, default d) and the residual R (S W_q for "projected_query", S for "query"):

        Q = S W_q,  K = H W_k,  V = H W_v                        projections to d
        O = concat_heads(softmax(Q K^T / sqrt(s)) V)              per head; s = d or d / heads (`attention_scale`)
        O~ = LN0(O + R),  E = LN1(O~ + ReLU(O~ W_o))

    The softmax runs over real tokens only, so a vector does not depend on its batch's padding (the published code
    masks after a softmax over every position: the same where no padding enters). A float32 head pools in float32."""

    def __init__(self, hidden_size: int, embedding_dim: int, num_heads: int, layer_norm: bool = True,
                 attention_scale: str = "embedding_dim", residual: str = "projected_query",
                 query_dim: int | None = None):
        super().__init__()
        query_dim = embedding_dim if query_dim is None else query_dim
        check_pma_options(embedding_dim, num_heads, attention_scale, residual, query_dim)
        self.num_heads, self.embedding_dim, self.residual = num_heads, embedding_dim, residual
        self.head_dim = embedding_dim // num_heads
        self.scale = (embedding_dim if attention_scale == "embedding_dim" else self.head_dim) ** -0.5
        self.query = nn.Parameter(torch.empty(1, 1, query_dim))
        self.q_proj = nn.Linear(query_dim, embedding_dim)
        self.k_proj = nn.Linear(hidden_size, embedding_dim)
        self.v_proj = nn.Linear(hidden_size, embedding_dim)
        self.o_proj = nn.Linear(embedding_dim, embedding_dim)
        self.attention_norm = nn.LayerNorm(embedding_dim) if layer_norm else nn.Identity()
        self.output_norm = nn.LayerNorm(embedding_dim) if layer_norm else nn.Identity()
        # After the layers (the draw order seeded runs rely on); inside C2LLMModel, `_init_weights` re-draws it.
        nn.init.normal_(self.query, std=0.02)

    @classmethod
    def from_config(cls, config) -> "PMAPooling":
        return cls(config.hidden_size, config.pma_dim, config.pma_num_heads, config.pma_layer_norm,
                   config.pma_attention_scale, config.pma_residual, config.pma_query_dim)

    def forward(self, token_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """token_states (batch, seq, hidden), attention_mask (batch, seq) with 1 for real tokens -> (batch, d)."""
        if self.query.dtype == torch.float32:  # a float32 head pools in float32 whatever the backbone's dtype
            token_states = token_states.float()
        query = self.query.expand(token_states.shape[0], -1, -1)  # (batch, 1, query_dim)
        projected_query = self.q_proj(query)  # (batch, 1, d)
        keep = attention_mask.bool()[:, None, None, :]  # (batch, 1, 1, seq): attend to real tokens only
        keys = self.split_heads(self.k_proj(token_states))  # (batch, heads, seq, head_dim)
        values = self.split_heads(self.v_proj(token_states))
        attended = F.scaled_dot_product_attention(self.split_heads(projected_query), keys, values, attn_mask=keep,
                                                  scale=self.scale)  # (batch, heads, 1, head_dim)
        attended = attended.transpose(1, 2).flatten(2)  # (batch, 1, d)
        pooled = self.attention_norm(attended + (query if self.residual == "query" else projected_query))
        pooled = self.output_norm(pooled + F.relu(self.o_proj(pooled))).squeeze(1)  # (batch, d)
        if not (self.training or bool(torch.isfinite(pooled).all())):  # finite weights can overflow (1e30 in a norm)
            raise ValueError("The embeddings hold NaN or infinite values: weights damaged or out of range; reload.")
        return pooled

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:  # (batch, n, d) -> (batch, heads, n, head_dim)
        return x.unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)
