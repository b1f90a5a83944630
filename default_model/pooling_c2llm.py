"""The PMA head of C2LLM: Pooling by Multihead Attention, one learnable query attending over token states.

Its own file so that every model folder carries the head it runs: `modeling_c2llm.C2LLMModel` (Qwen2 backbone) and
`sentence_c2llm.PMAPoolingHead` (any sentence-transformers backbone) both import it. It imports only torch.
"""

import torch
import torch.nn.functional as F
from torch import nn

# What the PMA adds back after attention: "projected_query", the projected seed S W_q (the published C2LLM's PMA_v2
# block, the paper's equation (5)), or "query", the raw seed S (CodeFuse-CGE's PMA block).
PMA_RESIDUALS = ("projected_query", "query")
# What the attention scores are divided by: sqrt(d) ("embedding_dim", the published code) or sqrt(d / heads).
PMA_ATTENTION_SCALES = ("embedding_dim", "head_dim")
# Standard deviation of the learnable query when the head stands alone (inside C2LLMModel, `_init_weights` uses
# the config's initializer_range).
QUERY_INIT_STD = 0.02


class PMAPooling(nn.Module):
    """Pooling by Multihead Attention. With token states H (l, d_LLM), embedding dimension d, the learnable query S
    (1, query_dim; query_dim defaults to d) and the residual R (S W_q for "projected_query", S for "query"):

        Q = S W_q,  K = H W_k,  V = H W_v                        projections to d
        O = concat_heads(softmax(Q K^T / sqrt(s)) V)              over real tokens only, per head
        O~ = LN0(O + R)
        E = LN1(O~ + ReLU(O~ W_o))

    s is d (`attention_scale="embedding_dim"`) or d / heads. The softmax runs over real tokens only, so a vector
    does not depend on the batch it is padded into (the published code re-masks a softmax over every position,
    which agrees wherever no padding enters). A float32 head pools in float32, as the published code does.
    """

    def __init__(self, hidden_size: int, embedding_dim: int, num_heads: int, layer_norm: bool = True,
                 attention_scale: str = "embedding_dim", residual: str = "projected_query",
                 query_dim: int | None = None):
        super().__init__()
        query_dim = embedding_dim if query_dim is None else query_dim
        if embedding_dim % num_heads:
            raise ValueError(f"num_heads={num_heads} must divide embedding_dim={embedding_dim}.")
        for name, value, valid in (("residual", residual, PMA_RESIDUALS),
                                   ("attention scale", attention_scale, PMA_ATTENTION_SCALES)):
            if value not in valid:
                raise ValueError(f"Unknown PMA {name} {value!r}: choose one of {', '.join(valid)}.")
        if residual == "query" and query_dim != embedding_dim:
            raise ValueError(f"residual='query' adds the learnable query to the {embedding_dim}-wide attention output, "
                             f"so query_dim must be {embedding_dim}, got {query_dim}; use residual='projected_query' "
                             "for another query width.")
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
        nn.init.normal_(self.query, std=QUERY_INIT_STD)  # after the layers: the draw order seeded runs rely on

    @classmethod
    def from_config(cls, config) -> "PMAPooling":
        """From a `C2LLMConfig` (its pma_* fields)."""
        return cls(config.hidden_size, config.pma_dim, config.pma_num_heads, config.pma_layer_norm,
                   config.pma_attention_scale, config.pma_residual, config.pma_query_dim)

    def forward(self, token_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """token_states (batch, seq, hidden), attention_mask (batch, seq) with 1 for real tokens -> (batch, d)."""
        if self.query.dtype == torch.float32:  # a float32 head pools in float32 whatever the backbone's dtype
            token_states = token_states.float()
        batch = token_states.shape[0]
        query = self.query.expand(batch, -1, -1)  # (batch, 1, query_dim)
        projected_query = self.q_proj(query)  # (batch, 1, d)

        def split_heads(x: torch.Tensor) -> torch.Tensor:  # (batch, n, d) -> (batch, heads, n, head_dim)
            return x.view(batch, -1, self.num_heads, self.head_dim).transpose(1, 2)

        keep = attention_mask.bool()[:, None, None, :]  # (batch, 1, 1, seq): attend to real tokens only
        attended = F.scaled_dot_product_attention(split_heads(projected_query), split_heads(self.k_proj(token_states)),
                                                  split_heads(self.v_proj(token_states)), attn_mask=keep,
                                                  scale=self.scale)  # (batch, heads, 1, head_dim)
        attended = attended.transpose(1, 2).reshape(batch, 1, self.embedding_dim)  # (batch, 1, d)
        pooled = self.attention_norm(attended + (query if self.residual == "query" else projected_query))
        pooled = self.output_norm(pooled + F.relu(self.o_proj(pooled)))
        return pooled.squeeze(1)  # (batch, d)
