"""C2LLM configuration: `Qwen2Config` plus the pooling head's fields, validated with errors that list the valid
values; the published configs' names load too (compressed_dim -> pma_dim, pma_ln, embedding_method -> pooling)."""

import math

from transformers import Qwen2Config

try:  # Hub loading: transformers copies this sibling file next to this one inside a package.
    from .pooling_c2llm import check_pma_options, positive_int
except ImportError:  # Plain import from the repository (tests, scripts).
    from pooling_c2llm import check_pma_options, positive_int

POOLING_METHODS = ("pma", "last_token", "mean")
# Spellings of `pooling` / `embedding_method` found in other configs, mapped to ours.
POOLING_ALIASES = {"last": "last_token", "eos": "last_token", "eos_token": "last_token", "average": "mean"}
# Every number of a config, nested ones too, must be finite (Python's json reads NaN); these in [low, high) as well.
NUMBER_RANGES = {"rms_norm_eps": (0, 1), "attention_dropout": (0, 1), "initializer_range": (0, math.inf)}


def numbers(value, name: str = "") -> list:  # (dotted name, number) of every int or float in nested dicts and lists
    if isinstance(value, (dict, list, tuple)):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        return [found for key, item in items for found in numbers(item, f"{name}.{key}".lstrip("."))]
    return [(name, value)] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


class C2LLMConfig(Qwen2Config):
    r"""A Qwen2 backbone (every `Qwen2Config` argument) and a pooling head: pma_num_heads (32, dividing pma_dim);
    pma_dim (d, default hidden_size); pma_layer_norm (paper eqs. (5), (6)); pma_attention_scale, pma_residual,
    pma_query_dim (`PMAPooling`'s); pma_norm_mode ("post_normal"); pooling ("pma"; "last_token" / "mean" for
    ablations); padding_side ("left"); pack_sequences (`packing_c2llm`); matryoshka_dims (trained truncated widths)."""

    model_type = "c2llm"

    def __init__(self, pma_num_heads: int = 32, pma_dim: int | None = None, pma_layer_norm: bool = True,
                 pma_attention_scale: str = "embedding_dim", pma_residual: str = "projected_query",
                 pma_query_dim: int | None = None, pma_norm_mode: str = "post_normal", pooling: str = "pma",
                 padding_side: str = "left", pack_sequences: bool = True, matryoshka_dims: list[int] | None = None,
                 **kwargs):
        pma_dim = kwargs.pop("compressed_dim", pma_dim)  # the published configs' field names
        pma_layer_norm = kwargs.pop("pma_ln", pma_layer_norm)
        pooling = kwargs.pop("embedding_method", pooling)
        try:  # transformers' own reading of the backbone's fields fails in its own ways (types, mappings)
            super().__init__(**kwargs)
        except Exception as error:  # noqa: BLE001
            raise ValueError(f"config.json: transformers cannot read a field ({error}); fix that field.") from error
        pooling = POOLING_ALIASES.get(pooling, pooling) if isinstance(pooling, str) else pooling
        choices = {"pooling": (pooling, POOLING_METHODS), "pma_norm_mode": (pma_norm_mode, ("post_normal",)),
                   "padding_side": (padding_side, ("left",))}  # the published PMA layout; trained with left padding
        for name, (value, valid) in choices.items():
            if not isinstance(value, str) or value not in valid:
                raise ValueError(f"Unknown {name} {value!r}: choose one of {', '.join(valid)}.")
        for name, value in {"pma_layer_norm": pma_layer_norm, "pack_sequences": pack_sequences}.items():
            if not isinstance(value, bool):  # "false" would otherwise count as true
                raise ValueError(f"{name} must be true or false (a JSON boolean), got {value!r}.")
        keep_max_layer = getattr(self, "keep_max_layer", -1)
        if isinstance(keep_max_layer, bool) or keep_max_layer not in (-1, self.num_hidden_layers):
            raise ValueError(f"keep_max_layer: -1 or {self.num_hidden_layers} (the last layer), got {keep_max_layer!r}")
        pma_dim = self.hidden_size if pma_dim is None else pma_dim
        pma_query_dim = pma_dim if pma_query_dim is None else pma_query_dim
        check_pma_options(pma_dim, pma_num_heads, pma_attention_scale, pma_residual, pma_query_dim, "pma_", "pma_dim")
        if pooling != "pma" and pma_dim != self.hidden_size:
            raise ValueError(f"pma_dim={pma_dim} differs from hidden_size={self.hidden_size}, but pooling={pooling!r} "
                             "has no projection: only 'pma' can change the embedding dimension.")
        if matryoshka_dims is not None:
            listed = isinstance(matryoshka_dims, list)
            wrong = [dim for dim in matryoshka_dims if not positive_int(dim) or dim > pma_dim] if listed else []
            if not listed or wrong or len(set(matryoshka_dims)) < len(matryoshka_dims):
                problem = "not a list" if not listed else f"{wrong} out of range" if wrong else "a width repeated"
                raise ValueError(f"matryoshka_dims={matryoshka_dims!r}: {problem}. List the widths the model was "
                                 f"trained for, each once, in 1..{pma_dim} (the embedding dimension), or null.")
        self.pma_num_heads, self.pma_dim, self.pma_query_dim = pma_num_heads, pma_dim, pma_query_dim
        self.pma_layer_norm, self.pma_attention_scale = pma_layer_norm, pma_attention_scale
        self.pma_residual, self.pma_norm_mode, self.pooling = pma_residual, pma_norm_mode, pooling
        self.padding_side, self.pack_sequences, self.matryoshka_dims = padding_side, pack_sequences, matryoshka_dims
        for name, value in numbers(vars(self)):
            low, high = NUMBER_RANGES.get(name, (-math.inf, math.inf))
            if not (math.isfinite(value) and low <= value < high):
                raise ValueError(f"{name}={value!r}: a config's numbers must be finite, this one in [{low}, {high}).")

    @property
    def embedding_dim(self) -> int:  # size of the sentence embedding the model returns
        return self.pma_dim
