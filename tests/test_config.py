"""C2LLMConfig: defaults, validation with helpful errors, published field names, 0.5B fidelity."""

import json

import pytest
import torch

from configuration_c2llm import C2LLMConfig
from modeling_c2llm import C2LLMModel
from tests.conftest import REPO_ROOT

TINY = dict(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
            num_key_value_heads=2)


def test_defaults_follow_the_paper():
    config = C2LLMConfig(**TINY)
    assert (config.pma_num_heads, config.pooling, config.pma_layer_norm) == (32, "pma", True)
    assert config.embedding_dim == config.hidden_size == 64
    assert config.pma_attention_scale == "embedding_dim"


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(pma_num_heads=5), "valid head counts"),
        (dict(pma_num_heads=4, pma_dim=30), "dividing pma_dim=30"),
        (dict(pooling="cls"), "choose one of pma, last_token, mean"),
        (dict(pma_attention_scale="sqrt"), "choose one of embedding_dim, head_dim"),
        (dict(padding_side="right"), "Unknown padding_side 'right': choose one of left"),
        (dict(pma_dim=0), "positive integer"),
        (dict(pooling="mean", pma_dim=32), "only 'pma' can change the embedding dimension"),
        # layouts of the published PMA code that this implementation does not compute
        (dict(pma_norm_mode="pre_normal"), "Unknown pma_norm_mode 'pre_normal': choose one of post_normal"),
        (dict(pma_norm_mode="pre_gptj"), "Unknown pma_norm_mode 'pre_gptj': choose one of post_normal"),
        (dict(pma_residual="seed"), "choose one of projected_query, query"),
        (dict(pma_query_dim=0), "pma_query_dim must be a positive integer"),
        (dict(pma_residual="query", pma_query_dim=64, pma_dim=32), "pma_query_dim must equal pma_dim=32"),
    ],
)
def test_invalid_values_raise_a_clear_error(fields, message):
    with pytest.raises(ValueError, match=message):
        C2LLMConfig(**TINY, **fields)


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(num_attention_heads=3),
         r"num_attention_heads=3 must divide hidden_size=64.* \[1, 2, 4, 8, 16, 32, 64\]"),
        (dict(num_attention_heads=0), "num_attention_heads must be a positive integer, got 0"),
        (dict(num_key_value_heads=3), r"num_key_value_heads=3 must divide num_attention_heads=4.* \[1, 2, 4\]"),
        (dict(num_attention_heads=64, num_key_value_heads=1), "head width 1 .* must be even for rotary embeddings"),
        (dict(head_dim=0), "head_dim must be a positive integer or null"),
        (dict(vocab_size=0), "vocab_size must be a positive integer"),
        (dict(num_hidden_layers=0), "num_hidden_layers must be a positive integer"),
        (dict(intermediate_size=0), "intermediate_size must be a positive integer"),
        (dict(max_position_embeddings=0), "max_position_embeddings must be a positive integer"),
        (dict(use_sliding_window=True, sliding_window=0), "sliding_window must be a positive number of tokens"),
        (dict(rope_parameters={"rope_type": "bogus", "rope_theta": 1e4}),
         "Unknown rope_parameters.rope_type 'bogus': choose one of default, dynamic, linear"),
        (dict(rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e4}}),
         "rope_parameters must be one mapping"),
        (dict(rope_theta=0), "rope_theta=0: the rotary base must be a finite number above 0"),
    ],
)
def test_backbone_fields_that_would_break_the_model_raise_a_clear_error(fields, message):
    with pytest.raises(ValueError, match=message):
        C2LLMConfig(**{**TINY, **fields})


def test_a_field_changed_after_the_config_checks_is_checked_again_when_the_model_is_built():
    """As `from_pretrained(folder, hidden_act=...)` does: transformers sets such fields on the config it built."""
    config = C2LLMConfig(**TINY)
    config.hidden_act = "bogus"
    with pytest.raises(ValueError, match="Unknown hidden_act 'bogus'"):
        C2LLMModel(config)


def test_matryoshka_dims_are_distinct_widths_within_the_embedding_dimension(tmp_path):
    assert C2LLMConfig(**TINY).matryoshka_dims is None
    config = C2LLMConfig(**TINY, pma_dim=32, pma_num_heads=4, matryoshka_dims=[16, 8, 32])
    config.save_pretrained(tmp_path)
    assert C2LLMConfig.from_pretrained(tmp_path).matryoshka_dims == [16, 8, 32]


@pytest.mark.parametrize("dims, message", [
    ([16, 0], r"matryoshka_dims=\[16, 0\]: \[0\] out of range\. .* in 1\.\.32 \(the embedding dimension\)"),
    ([33, 8, -1], r"\[33, -1\] out of range"),
    ([8, 8], "a width repeated. List the widths the model was trained for, each once"),
    ([8.0], r"\[8\.0\] out of range"),
    ([True], r"\[True\] out of range"),
    (16, "matryoshka_dims=16: not a list"),
    ("16", "not a list"),
])
def test_wrong_matryoshka_dims_say_what_is_wrong_and_the_fix(dims, message):
    with pytest.raises(ValueError, match=message):
        C2LLMConfig(**TINY, pma_dim=32, pma_num_heads=4, matryoshka_dims=dims)


def test_published_field_names_are_accepted():
    config = C2LLMConfig(**TINY, compressed_dim=32, pma_num_heads=8, pma_ln=False, embedding_method="pma",
                         padding_side="left",
                         pma_norm_mode="post_normal", pma_norm=True, keep_max_layer=-1)
    assert (config.pma_dim, config.pma_num_heads, config.pma_layer_norm, config.pooling) == (32, 8, False, "pma")
    # the published model's PMA_v2 adds the projected seed; the seed is compressed_dim wide
    assert (config.pma_norm_mode, config.pma_residual, config.pma_query_dim) == ("post_normal", "projected_query", 32)
    assert C2LLMConfig(**TINY, embedding_method="last").pooling == "last_token"


def test_config_round_trips_through_json(tmp_path):
    config = C2LLMConfig(**TINY, pma_dim=32, pma_num_heads=4, pma_attention_scale="head_dim",
                         pma_residual="query")
    config.save_pretrained(tmp_path)
    loaded = C2LLMConfig.from_pretrained(tmp_path)
    for field in ("pma_dim", "pma_num_heads", "pma_layer_norm", "pma_attention_scale", "pma_residual", "pma_query_dim",
                  "pooling", "padding_side"):
        assert getattr(loaded, field) == getattr(config, field)


def test_parameter_count_matches_published_c2llm_05b():
    """mteb records 497,252,096 parameters for C2LLM-0.5B: Qwen2.5-Coder-0.5B's 494,032,768 plus a
    head of four biased 896x896 linears, two LayerNorms and an 896-dim query."""
    root_config = json.loads((REPO_ROOT / "config.json").read_text())
    config = C2LLMConfig(**{k: v for k, v in root_config.items()
                            if k not in ("auto_map", "architectures", "model_type")})
    with torch.device("meta"):
        model = C2LLMModel(config)
    backbone = sum(p.numel() for p in model.model.parameters())
    head = sum(p.numel() for p in model.pma.parameters())
    assert backbone == 494_032_768
    assert head == 4 * (896 * 896 + 896) + 2 * (2 * 896) + 896
    assert backbone + head == 497_252_096
    shape = (config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads)
    assert shape == (896, 24, 14, 2)
    assert (config.pma_num_heads, config.embedding_dim, config.rope_theta if hasattr(config, "rope_theta") else
            config.rope_parameters["rope_theta"]) == (32, 896, 1_000_000.0)
