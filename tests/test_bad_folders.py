"""Model folders that are wrong in a way that would silently change the vectors must fail loudly instead."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from modeling_c2llm import DTYPE_ARGUMENT


@pytest.fixture
def folder_copy(tiny_model_dir, tmp_path):
    return shutil.copytree(tiny_model_dir, tmp_path / "copy")


def test_a_checkpoint_without_head_weights_is_an_error_not_a_random_head(folder_copy):
    from transformers import AutoModel

    weights = load_file(folder_copy / "model.safetensors")
    save_file({k: v for k, v in weights.items() if not k.startswith("pma.")}, folder_copy / "model.safetensors",
              metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"no weights for the PMA pooling head \(pma\..*new_pooling_head=True"):
        AutoModel.from_pretrained(folder_copy, trust_remote_code=True, **{DTYPE_ARGUMENT: torch.float32})


def load_both_routes(folder):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    yield lambda: AutoModel.from_pretrained(folder, trust_remote_code=True, **{DTYPE_ARGUMENT: torch.float32})
    yield lambda: SentenceTransformer(str(folder), trust_remote_code=True, device="cpu",
                                      model_kwargs={DTYPE_ARGUMENT: torch.float32})


def test_missing_backbone_weights_are_an_error_not_random_layers(folder_copy):
    weights = load_file(folder_copy / "model.safetensors")
    save_file({k: v for k, v in weights.items() if not k.startswith("model.layers.1.")},
              folder_copy / "model.safetensors", metadata={"format": "pt"})
    for load in load_both_routes(folder_copy):
        with pytest.raises(ValueError, match=r"lacks \d+ backbone tensors \(model\.layers\.1\..*download or export"):
            load()


def test_damaged_tensor_bytes_are_an_error_not_nan_embeddings(folder_copy):
    weights = load_file(folder_copy / "model.safetensors")
    weights["pma.attention_norm.bias"].view(torch.uint8).fill_(0xFF)  # what flipped bytes on disk look like
    save_file(weights, folder_copy / "model.safetensors", metadata={"format": "pt"})
    for load in load_both_routes(folder_copy):
        with pytest.raises(ValueError, match=r"NaN or infinite values in pma\.attention_norm\.bias"):
            load()


def test_damaged_bytes_in_a_pma_head_module_are_an_error(tmp_path):
    from sentence_c2llm import PMAPoolingHead

    head = PMAPoolingHead(hidden_size=32, embedding_dimension=32, num_heads=4)
    head.save(str(tmp_path))
    weights = load_file(tmp_path / "model.safetensors")
    weights["pma.o_proj.weight"].view(torch.uint8)[:8].fill_(0xFF)
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"pma\.o_proj\.weight hold NaN or infinite values"):
        PMAPoolingHead.load(str(tmp_path))


def test_a_pooling_config_that_misstates_the_dimension_is_an_error(folder_copy):
    from sentence_transformers import SentenceTransformer

    (folder_copy / "pooling" / "config.json").write_text(json.dumps({"embedding_dimension": 999}))
    model = SentenceTransformer(str(folder_copy), trust_remote_code=True, device="cpu",
                                model_kwargs={DTYPE_ARGUMENT: torch.float32})
    # what sentence-transformers reports comes from the model config, never from the misstated file
    dimension = getattr(model, "get_embedding_dimension", model.get_sentence_embedding_dimension)()
    assert dimension == 32
    with pytest.raises(ValueError, match="embedding_dimension=999, but the model produces 32-dimensional"):
        model.encode(["def f(): pass"])


def test_a_string_where_a_boolean_is_due_is_an_error(folder_copy):
    from transformers import AutoModel

    config = json.loads((folder_copy / "config.json").read_text())
    config["pma_layer_norm"] = "false"
    (folder_copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="pma_layer_norm must be true or false"):
        AutoModel.from_pretrained(folder_copy, trust_remote_code=True)


def test_pickled_weights_are_never_loaded(folder_copy):
    from transformers import AutoModel

    weights = load_file(folder_copy / "model.safetensors")
    (folder_copy / "model.safetensors").unlink()
    torch.save(weights, folder_copy / "pytorch_model.bin")
    with pytest.raises((OSError, EnvironmentError), match="safetensors"):
        AutoModel.from_pretrained(folder_copy, trust_remote_code=True, **{DTYPE_ARGUMENT: torch.float32})


@pytest.mark.parametrize(("field", "value"), [("rms_norm_eps", float("nan")), ("rms_norm_eps", 1e30),
                                              ("initializer_range", float("inf")), ("pma_dim", float("nan"))])
def test_a_non_finite_or_out_of_range_config_number_is_an_error_on_both_routes(folder_copy, field, value):
    config = json.loads((folder_copy / "config.json").read_text())
    config[field] = value
    (folder_copy / "config.json").write_text(json.dumps(config))  # Python's json writes and reads NaN and Infinity
    for load in load_both_routes(folder_copy):
        with pytest.raises(ValueError, match=rf"{field}"):
            load()


@pytest.mark.slow
def test_finite_weights_that_overflow_give_an_error_not_nan_embeddings(folder_copy):
    weights = load_file(folder_copy / "model.safetensors")
    weights["model.norm.weight"].fill_(1e30)
    save_file(weights, folder_copy / "model.safetensors", metadata={"format": "pt"})
    for load in load_both_routes(folder_copy):
        model = load()
        with pytest.raises(ValueError, match="embeddings hold NaN or infinite values"):
            model.encode(["def f(): pass"])


@pytest.mark.parametrize("pooling_config", [{"embedding_dimension": "32"}, {"embedding_dimension": 32, "extra": 1},
                                            {"embedding_dimension": True}])
def test_a_pooling_config_of_the_wrong_form_is_a_clear_error(folder_copy, pooling_config):
    """As sentence-transformers loads the module of modules.json's `pooling` entry."""
    from sentence_c2llm import C2LLMPooling

    (folder_copy / "pooling" / "config.json").write_text(json.dumps(pooling_config))
    with pytest.raises(ValueError, match=r'pooling/config.json must be \{"embedding_dimension": N\}, N a positive'):
        C2LLMPooling.load(str(folder_copy), subfolder="pooling")


@pytest.mark.parametrize(("fields", "message"), [
    ({"hidden_act": "bogus"}, r"Unknown hidden_act 'bogus': choose one of .*silu"),
    ({"num_key_value_heads": 0}, "num_key_value_heads must be a positive integer, got 0"),
    ({"vocab_size": 10}, r"pad_token_id=151643 is not a token of the vocabulary: .* in 0\.\.9 \(vocab_size=10\)"),
    ({"pad_token_id": 10**9}, r"pad_token_id=1000000000 is not a token of the vocabulary"),
    ({"pad_token_id": 1e9}, "pad_token_id"),  # transformers 5 refuses the float itself, 4.x leaves it to us
    ({"rope_parameters": {"rope_type": "default", "rope_theta": 0}},
     r"rope_parameters\.rope_theta=0: the rotary base must be a finite number above 0"),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": -1}}, r"rope_parameters\.rope_theta=-1: the rotary"),
    ({"rope_theta": -1}, r"rope_theta=-1: the rotary base must be a finite number above 0"),
    # top level: what transformers 4.x reads, while 5.x reads rope_parameters and drops it
    ({"rope_theta": float("nan")}, r"rope_theta=nan: the rotary base must be a finite number above 0"),
    ({"rope_theta": 5.0}, r"rope_theta=5\.0 differs from rope_parameters\.rope_theta=.*write the same value in both"),
])
def test_a_config_field_that_breaks_the_backbone_is_named_on_both_routes(folder_copy, fields, message):
    """Not a KeyError, ZeroDivisionError or AssertionError from deep inside transformers, nor a config read silently:
    a ValueError naming the field and its valid values, before any weight is read."""
    config = json.loads((folder_copy / "config.json").read_text())
    config.setdefault("rope_parameters", {"rope_type": "default", "rope_theta": 1_000_000.0})
    (folder_copy / "config.json").write_text(json.dumps({**config, **fields}))
    for load in load_both_routes(folder_copy):
        with pytest.raises(ValueError, match=message):
            load()


def test_a_missing_pooling_config_names_the_file_and_the_fix(folder_copy):
    from sentence_transformers import SentenceTransformer

    (folder_copy / "pooling" / "config.json").unlink()
    with pytest.raises(ValueError, match=r'pooling/config\.json is missing or empty: write \{"embedding_dimension": N'):
        SentenceTransformer(str(folder_copy), trust_remote_code=True, device="cpu",
                            model_kwargs={DTYPE_ARGUMENT: torch.float32})
