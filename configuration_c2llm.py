"""C2LLM configuration: `Qwen2Config` plus the pooling head's fields, validated with errors that list the valid
values; the published configs' names load too (compressed_dim -> pma_dim, pma_ln, embedding_method -> pooling)."""

import math

from transformers import Qwen2Config
from transformers.activations import ACT2FN
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

try:  # Hub loading: transformers copies this sibling file next to this one inside a package.
    from .pooling_c2llm import check_pma_options, positive_int
except ImportError:  # Plain import from the repository (tests, scripts).
    from pooling_c2llm import check_pma_options, positive_int

POOLING_METHODS = ("pma", "last_token", "mean")
# Spellings of `pooling` / `embedding_method` found in other configs, mapped to ours.
POOLING_ALIASES = {"last": "last_token", "eos": "last_token", "eos_token": "last_token", "average": "mean"}
# Every number of a config, nested ones too, must be finite (Python's json reads NaN); these in [low, high) as well.
NUMBER_RANGES = {"rms_norm_eps": (0, 1), "attention_dropout": (0, 1), "initializer_range": (0, math.inf)}
# Backbone sizes that build layers or divide (a zero is a ZeroDivisionError or an empty tensor deep inside torch).
BACKBONE_SIZES = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "max_position_embeddings")
# "default" is computed by the model itself in transformers 5, so that table lists it only in 4.x.
ROPE_TYPES = sorted({"default", *ROPE_INIT_FUNCTIONS})
ROPE_FIELDS = ("rope_parameters", "rope_scaling")  # where rope_type and rope_theta live: transformers 5, 4.x
LISTED_HEAD_COUNTS = 64  # an error lists the valid head counts up to this: the pattern, not a wall of numbers


def check_rope_theta(name: str, value) -> None:
    """The rotary base: angles are position / theta^(2i/d), so 0 or less gives infinite or NaN angles."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name}={value!r}: the rotary base must be a finite number above 0 (Qwen2.5: 1000000.0); "
                         "write the base model's value.")


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
        top_level_theta = kwargs.get("rope_theta")  # read by transformers 4.x; 5.x drops it beside rope_parameters
        if top_level_theta is not None:
            check_rope_theta("rope_theta", top_level_theta)
        try:  # transformers' own reading of the backbone's fields fails in its own ways (types, mappings)
            super().__init__(**kwargs)
        except Exception as error:  # noqa: BLE001
            raise ValueError(f"config.json: transformers cannot read a field ({error}); fix that field.") from error
        self.check_backbone()
        nested_theta = (kwargs.get("rope_parameters") or {}) if isinstance(kwargs.get("rope_parameters"), dict) else {}
        if top_level_theta is not None and nested_theta.get("rope_theta", top_level_theta) != top_level_theta:
            raise ValueError(f"rope_theta={top_level_theta!r} differs from rope_parameters.rope_theta="
                             f"{nested_theta['rope_theta']!r}: transformers 4.x reads the first, 5.x the second; "
                             "write the same value in both.")
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

    def check_backbone(self) -> None:
        """Raise a ValueError naming a Qwen2 field that would break building or running the backbone (a KeyError,
        ZeroDivisionError or AssertionError deep in transformers, NaN rotary angles), with its valid values. Fields
        are read with getattr: transformers 4.x and 5.x name and keep them differently."""
        for name in BACKBONE_SIZES:
            if not positive_int(getattr(self, name, None)):
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name, None)!r}: write the "
                                 "base model's value (config.json of its checkpoint).")
        heads, kv_heads, hidden = self.num_attention_heads, self.num_key_value_heads, self.hidden_size
        head_dim = getattr(self, "head_dim", None)
        if head_dim is not None and not positive_int(head_dim):
            raise ValueError(f"head_dim must be a positive integer or null (hidden_size / heads), got {head_dim!r}.")
        if head_dim is None and hidden % heads:
            divisors = [count for count in range(1, min(hidden, LISTED_HEAD_COUNTS) + 1) if hidden % count == 0]
            raise ValueError(f"num_attention_heads={heads} must divide hidden_size={hidden}; valid head counts up to "
                             f"{LISTED_HEAD_COUNTS}: {divisors}.")
        if (head_dim or hidden // heads) % 2:  # rotary embeddings turn pairs of coordinates
            raise ValueError(f"The attention head width {head_dim or hidden // heads} (head_dim, else hidden_size / "
                             "num_attention_heads) must be even for rotary embeddings: change num_attention_heads.")
        if heads % kv_heads:  # grouped-query attention shares each key/value head among a group of query heads
            raise ValueError(f"num_key_value_heads={kv_heads} must divide num_attention_heads={heads}; valid: "
                             f"{[count for count in range(1, heads + 1) if heads % count == 0]}.")
        hidden_act, pad = getattr(self, "hidden_act", None), getattr(self, "pad_token_id", None)
        if not isinstance(hidden_act, str) or hidden_act not in ACT2FN:
            raise ValueError(f"Unknown hidden_act {hidden_act!r}: choose one of {', '.join(sorted(ACT2FN))} "
                             "(Qwen2: silu).")
        if pad is not None and (isinstance(pad, bool) or not isinstance(pad, int) or not 0 <= pad < self.vocab_size):
            raise ValueError(f"pad_token_id={pad!r} is not a token of the vocabulary: write the tokenizer's pad token "
                             f"id, in 0..{self.vocab_size - 1} (vocab_size={self.vocab_size}), or null.")
        window = getattr(self, "sliding_window", None)
        if getattr(self, "use_sliding_window", False) and window is not None and not positive_int(window):
            raise ValueError(f"sliding_window must be a positive number of tokens or null, got {window!r}.")
        if getattr(self, "rope_theta", None) is not None:  # transformers 4.x
            check_rope_theta("rope_theta", self.rope_theta)
        for field in ROPE_FIELDS:
            rope = getattr(self, field, None)
            if rope is not None and (not isinstance(rope, dict) or any(isinstance(v, dict) for v in rope.values())):
                raise ValueError(f"{field} must be one mapping (rope_type, rope_theta, ...): Qwen2 has one rotary "
                                 f"embedding for every layer; got {rope!r}.")
            rope_type = (rope or {}).get("rope_type", (rope or {}).get("type", "default"))  # "type": 4.x's old name
            if not isinstance(rope_type, str) or rope_type not in ROPE_TYPES:
                raise ValueError(f"Unknown {field}.rope_type {rope_type!r}: choose one of {', '.join(ROPE_TYPES)}.")
            if rope and "rope_theta" in rope:
                check_rope_theta(f"{field}.rope_theta", rope["rope_theta"])

    @property
    def embedding_dim(self) -> int:  # size of the sentence embedding the model returns
        return self.pma_dim
