"""C2LLM configuration: a Qwen2 config plus the settings of the pooling head.

C2LLM (arXiv 2512.21332) keeps a Qwen2.5-Coder backbone as it is (causal attention) and adds a
Pooling-by-Multihead-Attention (PMA) head: one learnable query cross-attends over the last hidden
states. This file adds and validates the head's fields; everything else is `Qwen2Config`.

Field names of the published C2LLM configs are accepted, so their `config.json` loads:

    published name       ours
    compressed_dim   ->  pma_dim
    pma_ln           ->  pma_layer_norm
    embedding_method ->  pooling
    pma_num_heads        (same name)
    pma_norm_mode        (same name; only "post_normal", the published layout, is implemented)
    pma_norm             (same name; kept for round trips: `encode` normalizes on its own argument)
    keep_max_layer       (checked: only the last layer's states are pooled)
    padding_side         (same name; only "left" is supported)
"""

from transformers import Qwen2Config

try:  # Hub loading: transformers copies this sibling file next to this one inside a package.
    from .pooling_c2llm import PMA_ATTENTION_SCALES, PMA_RESIDUALS
except ImportError:  # Plain import from the repository (tests, scripts).
    from pooling_c2llm import PMA_ATTENTION_SCALES, PMA_RESIDUALS

POOLING_METHODS = ("pma", "last_token", "mean")
# Spellings of `pooling` / `embedding_method` found in other configs, mapped to ours.
POOLING_ALIASES = {"last": "last_token", "eos": "last_token", "eos_token": "last_token", "average": "mean"}
PUBLISHED_FIELD_ALIASES = {"compressed_dim": "pma_dim", "pma_ln": "pma_layer_norm", "embedding_method": "pooling"}
# Layouts of CodeFuse's PMA block (`pma_norm_mode`); the released C2LLM configs name "post_normal".
PMA_NORM_MODES = ("post_normal",)


class C2LLMConfig(Qwen2Config):
    r"""Configuration of a C2LLM embedding model: a Qwen2 backbone and a pooling head.

    Args:
        pma_num_heads (`int`, defaults to 32): attention heads of the PMA head (the paper uses 32).
            Must divide `pma_dim`.
        pma_dim (`int`, *optional*): output embedding dimension d (published name `compressed_dim`). The
            PMA projects keys and values to d, so d may be smaller than the backbone's hidden size (an
            alternative to Matryoshka training). Defaults to `hidden_size`.
        pma_layer_norm (`bool`, defaults to `True`): apply the two LayerNorms of equations (5) and (6).
        pma_attention_scale (`str`, defaults to `"embedding_dim"`): divide attention scores by
            sqrt(pma_dim) (`"embedding_dim"`, what the released C2LLM weights were trained with) or by
            sqrt(pma_dim / pma_num_heads) (`"head_dim"`, textbook multi-head attention).
        pma_residual (`str`, defaults to `"projected_query"`): what the PMA adds back after attention: the
            projected learnable query (`"projected_query"`, what the published C2LLM model computes and the
            paper's equation (5)) or the learnable query itself (`"query"`, CodeFuse-CGE's PMA block).
        pma_query_dim (`int`, *optional*): width of the learnable query, which `q_proj` maps to `pma_dim`.
            Defaults to `pma_dim`, the published layout; `"query"` needs exactly that.
        pma_norm_mode (`str`, defaults to `"post_normal"`): layout of the PMA block, as in the published
            configs; only `"post_normal"` (LayerNorm after each residual) is implemented.
        pooling (`str`, defaults to `"pma"`): `"pma"` (C2LLM), or `"last_token"` / `"mean"` for
            ablations; the PMA weights exist only when pooling is `"pma"`.
        padding_side (`str`, defaults to `"left"`): recorded for compatibility with published configs.
            Pooling masks padding whatever its side; the tokenizer shipped with the model pads left.
        pack_sequences (`bool`, defaults to `True`): run a padded batch without its padding: with sdpa
            (transformers >= 4.53) all real tokens form one row and attention runs per sequence
            (`modeling_c2llm.packed_sdpa_attention`). Results are the same up to float rounding; eager runs
            the padded batch, flash_attention_2 skips padding by itself.
        kwargs: every `Qwen2Config` argument (hidden_size, num_hidden_layers, ...).

    Example:
        >>> config = C2LLMConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        ...                      num_attention_heads=4, num_key_value_heads=2, pma_num_heads=4)
        >>> config.embedding_dim
        64
    """

    model_type = "c2llm"

    def __init__(
        self,
        pma_num_heads: int = 32,
        pma_dim: int | None = None,
        pma_layer_norm: bool = True,
        pma_attention_scale: str = "embedding_dim",
        pma_residual: str = "projected_query",
        pma_query_dim: int | None = None,
        pma_norm_mode: str = "post_normal",
        pooling: str = "pma",
        padding_side: str = "left",
        pack_sequences: bool = True,
        **kwargs,
    ):
        for published_name, our_name in PUBLISHED_FIELD_ALIASES.items():
            if published_name in kwargs:
                value = kwargs.pop(published_name)
                if our_name == "pma_dim":
                    pma_dim = value
                elif our_name == "pma_layer_norm":
                    pma_layer_norm = value
                else:
                    pooling = value
        super().__init__(**kwargs)
        pooling = POOLING_ALIASES.get(pooling, pooling) if isinstance(pooling, str) else pooling
        choices = {"pooling": (pooling, POOLING_METHODS), "pma_attention_scale": (pma_attention_scale, PMA_ATTENTION_SCALES),
                   "pma_residual": (pma_residual, PMA_RESIDUALS), "pma_norm_mode": (pma_norm_mode, PMA_NORM_MODES)}
        for name, (value, valid) in choices.items():
            if not isinstance(value, str) or value not in valid:
                raise ValueError(f"Unknown {name} {value!r}: choose one of {', '.join(valid)} (what this implementation supports).")
        for name, value in {"pma_layer_norm": pma_layer_norm, "pack_sequences": pack_sequences}.items():
            if not isinstance(value, bool):  # "false" would otherwise count as true
                raise ValueError(f"{name} must be true or false (a JSON boolean), got {value!r}.")
        if padding_side != "left":
            raise ValueError(
                f"padding_side={padding_side!r} is not supported: C2LLM was trained with left padding; use 'left'."
            )
        keep_max_layer = getattr(self, "keep_max_layer", -1)
        if isinstance(keep_max_layer, bool) or keep_max_layer not in (-1, self.num_hidden_layers):
            raise ValueError(
                f"keep_max_layer={keep_max_layer!r} is not supported: C2LLM pools the last layer's states "
                f"(-1 or {self.num_hidden_layers})."
            )
        pma_dim = self.hidden_size if pma_dim is None else pma_dim
        pma_query_dim = pma_dim if pma_query_dim is None else pma_query_dim
        for name, value in {"pma_dim": pma_dim, "pma_query_dim": pma_query_dim}.items():
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer (a width), got {value!r}.")
        if pma_residual == "query" and pma_query_dim != pma_dim:
            raise ValueError(f"pma_residual='query' adds the learnable query to the embedding, so pma_query_dim must "
                             f"equal pma_dim={pma_dim}, got {pma_query_dim}; use pma_residual='projected_query'.")
        if (not isinstance(pma_num_heads, int) or isinstance(pma_num_heads, bool) or pma_num_heads <= 0
                or pma_dim % pma_num_heads):
            divisors = [h for h in range(1, min(pma_dim, 64) + 1) if pma_dim % h == 0]
            raise ValueError(
                f"pma_num_heads={pma_num_heads!r} must be a positive integer dividing pma_dim={pma_dim}; "
                f"valid head counts up to 64: {divisors}."
            )
        if pooling != "pma" and pma_dim != self.hidden_size:
            raise ValueError(
                f"pma_dim={pma_dim} differs from hidden_size={self.hidden_size}, but pooling={pooling!r} has no "
                "projection: only 'pma' can change the embedding dimension."
            )
        self.pma_num_heads = pma_num_heads
        self.pma_dim = pma_dim
        self.pma_layer_norm = pma_layer_norm
        self.pma_attention_scale = pma_attention_scale
        self.pma_residual = pma_residual
        self.pma_query_dim = pma_query_dim
        self.pma_norm_mode = pma_norm_mode
        self.pooling = pooling
        self.padding_side = padding_side
        self.pack_sequences = pack_sequences

    @property
    def embedding_dim(self) -> int:
        """Size of the sentence embedding the model returns."""
        return self.pma_dim
