"""C2LLM configuration: `Qwen2Config` plus the fields of the pooling head, validated with errors that list the
valid values. The published C2LLM configs' names load too: compressed_dim -> pma_dim, pma_ln -> pma_layer_norm,
embedding_method -> pooling; pma_num_heads, pma_norm_mode, padding_side, pma_norm and keep_max_layer keep theirs."""

from transformers import Qwen2Config

try:  # Hub loading: transformers copies this sibling file next to this one inside a package.
    from .pooling_c2llm import PMA_ATTENTION_SCALES, PMA_RESIDUALS
except ImportError:  # Plain import from the repository (tests, scripts).
    from pooling_c2llm import PMA_ATTENTION_SCALES, PMA_RESIDUALS

POOLING_METHODS = ("pma", "last_token", "mean")
# Spellings of `pooling` / `embedding_method` found in other configs, mapped to ours.
POOLING_ALIASES = {"last": "last_token", "eos": "last_token", "eos_token": "last_token", "average": "mean"}
PUBLISHED_FIELD_NAMES = {"compressed_dim": "pma_dim", "pma_ln": "pma_layer_norm", "embedding_method": "pooling"}
# Layouts of CodeFuse's PMA block (`pma_norm_mode`): the released C2LLM configs name "post_normal".
PMA_NORM_MODES = ("post_normal",)


def positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class C2LLMConfig(Qwen2Config):
    r"""A Qwen2 backbone (every `Qwen2Config` argument) and a pooling head:

    pma_num_heads (32, must divide pma_dim); pma_dim (embedding dimension d, published `compressed_dim`; default
    hidden_size); pma_layer_norm (the LayerNorms of the paper's equations (5) and (6)); pma_attention_scale
    ("embedding_dim": scores / sqrt(d), as the released weights were trained, or "head_dim": / sqrt(d / heads));
    pma_residual ("projected_query": the published model and the paper's equation (5), or "query": the learnable
    query itself, CodeFuse-CGE); pma_query_dim (the learnable query's width, default d); pma_norm_mode (only the
    published "post_normal"); pooling ("pma", or "last_token" / "mean" for ablations); padding_side (only "left");
    pack_sequences (with sdpa on transformers >= 4.53, run a padded batch as one row of its real tokens,
    `packing_c2llm`; same results up to float rounding).
    """

    model_type = "c2llm"

    def __init__(self, pma_num_heads: int = 32, pma_dim: int | None = None, pma_layer_norm: bool = True,
                 pma_attention_scale: str = "embedding_dim", pma_residual: str = "projected_query",
                 pma_query_dim: int | None = None, pma_norm_mode: str = "post_normal", pooling: str = "pma",
                 padding_side: str = "left", pack_sequences: bool = True, **kwargs):
        published = {ours: kwargs.pop(theirs) for theirs, ours in PUBLISHED_FIELD_NAMES.items() if theirs in kwargs}
        pma_dim = published.get("pma_dim", pma_dim)
        pma_layer_norm = published.get("pma_layer_norm", pma_layer_norm)
        pooling = published.get("pooling", pooling)
        super().__init__(**kwargs)
        pooling = POOLING_ALIASES.get(pooling, pooling) if isinstance(pooling, str) else pooling
        choices = {"pooling": (pooling, POOLING_METHODS), "pma_residual": (pma_residual, PMA_RESIDUALS),
                   "pma_attention_scale": (pma_attention_scale, PMA_ATTENTION_SCALES),
                   "pma_norm_mode": (pma_norm_mode, PMA_NORM_MODES)}
        for name, (value, valid) in choices.items():
            if not isinstance(value, str) or value not in valid:
                raise ValueError(f"Unknown {name} {value!r}: choose one of {', '.join(valid)} (what this "
                                 "implementation supports).")
        if padding_side != "left":
            raise ValueError(f"padding_side={padding_side!r} is not supported: C2LLM was trained with left padding; "
                             "use 'left'.")
        for name, value in {"pma_layer_norm": pma_layer_norm, "pack_sequences": pack_sequences}.items():
            if not isinstance(value, bool):  # "false" would otherwise count as true
                raise ValueError(f"{name} must be true or false (a JSON boolean), got {value!r}.")
        keep_max_layer = getattr(self, "keep_max_layer", -1)
        if isinstance(keep_max_layer, bool) or keep_max_layer not in (-1, self.num_hidden_layers):
            raise ValueError(f"keep_max_layer={keep_max_layer!r} is not supported: C2LLM pools the last layer's "
                             f"states (-1 or {self.num_hidden_layers}).")
        pma_dim = self.hidden_size if pma_dim is None else pma_dim
        pma_query_dim = pma_dim if pma_query_dim is None else pma_query_dim
        for name, value in {"pma_dim": pma_dim, "pma_query_dim": pma_query_dim}.items():
            if not positive_int(value):
                raise ValueError(f"{name} must be a positive integer (a width), got {value!r}.")
        if pma_residual == "query" and pma_query_dim != pma_dim:
            raise ValueError(f"pma_residual='query' adds the learnable query to the embedding, so pma_query_dim must "
                             f"equal pma_dim={pma_dim}, got {pma_query_dim}; use pma_residual='projected_query'.")
        if not positive_int(pma_num_heads) or pma_dim % pma_num_heads:
            divisors = [heads for heads in range(1, min(pma_dim, 64) + 1) if pma_dim % heads == 0]
            raise ValueError(f"pma_num_heads={pma_num_heads!r} must be a positive integer dividing pma_dim={pma_dim}; "
                             f"valid head counts up to 64: {divisors}.")
        if pooling != "pma" and pma_dim != self.hidden_size:
            raise ValueError(f"pma_dim={pma_dim} differs from hidden_size={self.hidden_size}, but pooling={pooling!r} "
                             "has no projection: only 'pma' can change the embedding dimension.")
        self.pma_num_heads, self.pma_dim, self.pma_query_dim = pma_num_heads, pma_dim, pma_query_dim
        self.pma_layer_norm, self.pma_attention_scale = pma_layer_norm, pma_attention_scale
        self.pma_residual, self.pma_norm_mode, self.pooling = pma_residual, pma_norm_mode, pooling
        self.padding_side, self.pack_sequences = padding_side, pack_sequences

    @property
    def embedding_dim(self) -> int:
        """Size of the sentence embedding the model returns."""
        return self.pma_dim
