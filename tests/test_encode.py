"""Encoding behaviour: prompts, padding invariance, dimensions, truncation and bad input."""

import importlib.util
import json
import shutil
import warnings

import numpy as np
import pytest
import torch

from c2llm_data.prompts import DOCUMENT_PROMPT, MTEB_CODE_TASKS, TASK_INSTRUCTIONS


def test_prompts_cover_the_twelve_mteb_code_tasks(tiny_sentence_model):
    prompts = tiny_sentence_model.prompts
    assert len(MTEB_CODE_TASKS) == 12
    for task in MTEB_CODE_TASKS:
        assert prompts[f"{task}-query"] == TASK_INSTRUCTIONS[task] + "\n"
        assert prompts[f"{task}-document"] == DOCUMENT_PROMPT
    assert prompts["query"] == TASK_INSTRUCTIONS["CodeSearchNetRetrieval"] + "\n"
    assert prompts["document"] == "Retrieved Answer:"


@pytest.mark.skipif(importlib.util.find_spec("mteb") is None, reason='needs mteb: pip install ".[eval]"')
def test_prompts_equal_the_installed_mteb_c2llm_entry():
    """mteb's C2LLM entry produced the leaderboard numbers: every task prompt must be the one it sends."""
    from mteb.models.model_implementations import codefuse_models

    from c2llm_data.prompts import PAPER_TABLE_1_DIFFERENCES, sentence_transformers_prompts

    ours = sentence_transformers_prompts()
    theirs = {f"{task}-{side}": text for task, by_side in codefuse_models.c2llm_prompts_dict.items()
              for side, text in by_side.items()}
    assert len(theirs) == 24
    assert {name: ours[name] for name in theirs} == theirs
    assert set(PAPER_TABLE_1_DIFFERENCES) <= set(MTEB_CODE_TASKS)  # the paper's texts are kept only as notes


def test_encode_query_and_document_apply_the_prompts(tiny_sentence_model):
    query, code = "reverse a string", "def rev(s):\n    return s[::-1]"
    by_method = tiny_sentence_model.encode_query([query])
    by_hand = tiny_sentence_model.encode([tiny_sentence_model.prompts["query"] + query])
    unprompted = tiny_sentence_model.encode([query])
    np.testing.assert_allclose(by_method, by_hand, atol=1e-6)
    assert not np.allclose(by_method, unprompted, atol=1e-3)
    np.testing.assert_allclose(
        tiny_sentence_model.encode_document([code]), tiny_sentence_model.encode(["Retrieved Answer:" + code]), atol=1e-6
    )
    np.testing.assert_allclose(
        tiny_sentence_model.encode([query], prompt_name="CosQA-query"),
        tiny_sentence_model.encode([TASK_INSTRUCTIONS["CosQA"] + "\n" + query]),
        atol=1e-6,
    )


def test_a_text_embeds_the_same_alone_and_in_a_batch_of_longer_texts(tiny_sentence_model, tiny_model):
    short = "x = 1"
    longer = ["def f(values):\n    return sorted(values, key=len)\n" * 5, "import os\nprint(os.getcwd())" * 3]
    alone = tiny_sentence_model.encode([short])[0]
    batched = tiny_sentence_model.encode([short, *longer], batch_size=3)[0]
    np.testing.assert_allclose(alone, batched, atol=1e-5)
    auto_alone = tiny_model.encode([short])[0]
    auto_batched = tiny_model.encode([*longer, short], batch_size=3)[2]
    torch.testing.assert_close(auto_alone, auto_batched, atol=1e-5, rtol=1e-4)


def test_dimension_is_the_configured_d(tiny_sentence_model, tiny_model):
    assert tiny_model.config.hidden_size == 64 and tiny_model.config.embedding_dim == 32
    assert tiny_sentence_model.encode(["a"]).shape == (1, 32)
    assert tiny_model.encode(["a"]).shape == (1, 32)


def test_over_long_texts_are_truncated_to_the_serving_length(tiny_sentence_model, tiny_model):
    """2,048 tokens, as the published model's encode and mteb's C2LLM entry (training used 1,024)."""
    long_text = "value = compute(value) + 1\n" * 800  # about 6,400 tokens
    assert tiny_sentence_model.max_seq_length == 2048
    features = tiny_sentence_model.tokenize([long_text])
    assert features["input_ids"].shape[1] == 2048
    assert np.isfinite(tiny_sentence_model.encode([long_text])).all()
    tokens_seen = []
    hook = tiny_model.register_forward_pre_hook(
        lambda module, args, kwargs: tokens_seen.append(kwargs["input_ids"].shape[1]), with_kwargs=True)
    try:
        assert tiny_model.encode([long_text]).shape == (1, 32)
    finally:
        hook.remove()  # the session's shared model must stay as it was
    assert tokens_seen == [2048]


def test_empty_list_gives_an_empty_result(tiny_sentence_model, tiny_model):
    assert len(tiny_sentence_model.encode([])) == 0
    assert tiny_model.encode([]).shape == (0, 32)


def test_empty_string_is_a_clear_error_unless_prompted(tiny_sentence_model, tiny_model):
    with pytest.raises(ValueError, match="no tokens"):
        tiny_sentence_model.encode(["", "x = 1"])
    with pytest.raises(ValueError, match="no tokens"):
        tiny_model.encode([""])
    assert tiny_sentence_model.encode_query([""]).shape == (1, 32)  # the prompt gives it tokens


def test_non_string_items_are_a_clear_error(tiny_model):
    with pytest.raises(TypeError, match=r"sentences\[1\] is int"):
        tiny_model.encode(["ok", 3])
    with pytest.raises(TypeError, match=r"sentences\[0\] is NoneType"):
        tiny_model.encode([None])
    with pytest.raises(TypeError, match="sentences must be a string or a list of strings, got NoneType"):
        tiny_model.encode(None)
    with pytest.raises(ValueError, match=r"sentences\[1\] is not valid Unicode \(surrogates not allowed"):
        tiny_model.encode(["ok", "bad \ud800 text"])
    with pytest.raises(ValueError, match=r"prompt is not valid Unicode \(surrogates not allowed at position 0"):
        tiny_model.encode(["a"], prompt="\ud800")  # tokenizers used to raise a TypeError naming nothing


def test_text_no_tokenizer_can_read_is_named_on_the_sentence_transformers_route(tiny_sentence_model):
    # sentence-transformers reorders texts by length, so the error quotes the text around the bad character
    with pytest.raises(ValueError, match=r"the text around 'bad \\ud800 text' is not valid Unicode \(surrogates"):
        tiny_sentence_model.encode(["ok", "bad \ud800 text"])
    with pytest.raises(ValueError, match=r"\\udfff' is not valid Unicode"):  # 5.x quotes the prompt before it too
        tiny_sentence_model.encode_query(["\udfff"])


TRUNCATE_DIM_RANGE = r"truncate_dim must be an integer in 1\.\.32 \(the embedding dimension\) or None, got "


@pytest.mark.parametrize("arguments, message", [
    (dict(batch_size=-1), "batch_size must be a positive integer, got -1"),
    (dict(batch_size=0), "batch_size must be a positive integer, got 0"),
    (dict(batch_size=2.5), "batch_size must be a positive integer, got 2.5"),
    (dict(max_length=0), "max_length must be a positive integer, got 0"),
    (dict(max_length=-3), "max_length must be a positive integer, got -3"),
    (dict(prompt=3), "prompt must be a string or None, got int"),
    (dict(truncate_dim=0), TRUNCATE_DIM_RANGE + "0"),
    (dict(truncate_dim=-4), TRUNCATE_DIM_RANGE + "-4"),
    (dict(truncate_dim=33), TRUNCATE_DIM_RANGE + "33"),
    (dict(truncate_dim=8.0), TRUNCATE_DIM_RANGE + r"8\.0"),
    (dict(truncate_dim=True), TRUNCATE_DIM_RANGE + "True"),
    (dict(truncate_dim="8"), TRUNCATE_DIM_RANGE + "'8'"),
])
def test_encode_arguments_are_checked_before_any_work(tiny_model, arguments, message):
    with pytest.raises((ValueError, TypeError), match=message):
        tiny_model.encode(["def f(): pass"], **arguments)


def test_published_card_usage_encode_on_the_automodel(tiny_model):
    """The published model card calls `model.encode(sentences)` on the AutoModel, with no tokenizer."""
    embeddings = tiny_model.encode(["def hello():\n    return 1", "print hello"])
    assert embeddings.shape == (2, 32)
    torch.testing.assert_close(embeddings.norm(dim=1), torch.ones(2))


def test_the_encoder_keeps_no_lm_head_and_no_per_layer_states(tiny_model):
    assert not any("lm_head" in name for name, _ in tiny_model.named_parameters())
    with torch.no_grad():
        output = tiny_model(input_ids=torch.tensor([[1, 2, 3]]), attention_mask=torch.ones(1, 3, dtype=torch.long))
    assert output.hidden_states is None and output.attentions is None
    assert output.last_hidden_state.shape == (1, 3, 64) and output.sentence_embedding.shape == (1, 32)


def test_threads_sharing_one_model_get_the_sequential_vectors_through_both_routes(tiny_sentence_model, tiny_model):
    """A serving process shares one model between threads: AutoModel's and sentence-transformers' encode."""
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"def f_{i}(x):\n    return x * {i}\n" * (1 + i % 7) for i in range(18)]
    calls = [(route, texts[start:start + 5]) for start in range(0, len(texts), 3)
             for route in ("auto", "sentence_transformers")]

    def encode(call):
        route, batch = call
        if route == "auto":
            return tiny_model.encode(batch, batch_size=2)
        return tiny_sentence_model.encode(batch, batch_size=2, convert_to_tensor=True).float()

    sequential = [encode(call) for call in calls]
    with ThreadPoolExecutor(max_workers=3) as pool:
        concurrent = list(pool.map(encode, calls))
    for alone, together in zip(sequential, concurrent):
        assert torch.allclose(alone, together, atol=1e-5)


@pytest.fixture(scope="module")
def matryoshka_dir(tiny_model_dir, tmp_path_factory):
    """The tiny release folder (d = 32) with matryoshka_dims [16, 8] in its config, as a matryoshka recipe exports."""
    folder = shutil.copytree(tiny_model_dir, tmp_path_factory.mktemp("matryoshka") / "c2llm-tiny")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "matryoshka_dims": [16, 8]}))
    return folder


@pytest.fixture(scope="module")
def matryoshka_models(matryoshka_dir):
    """(C2LLMModel, SentenceTransformer) of `matryoshka_dir` in float32, loaded once for the truncation tests; the
    C2LLMModel encodes with the SentenceTransformer's tokenizer (the folder's, loaded once: about a CPU-second)."""
    from sentence_transformers import SentenceTransformer

    from modeling_c2llm import DTYPE_ARGUMENT, C2LLMModel

    float32 = {DTYPE_ARGUMENT: torch.float32}
    return (C2LLMModel.from_pretrained(matryoshka_dir, **float32).eval(),
            SentenceTransformer(str(matryoshka_dir), trust_remote_code=True, model_kwargs=float32))


@pytest.mark.parametrize("dim", [8, 13, 32])
def test_truncate_dim_gives_the_vectors_of_sentence_transformers_truncate_dim(matryoshka_models, dim, monkeypatch):
    model, st_model = matryoshka_models
    tokenizer = st_model.tokenizer
    assert model.config.matryoshka_dims == [16, 8]
    monkeypatch.setattr(st_model, "truncate_dim", dim)  # what SentenceTransformer(..., truncate_dim=dim) sets
    texts = ["def add(a, b):\n    return a + b", "sum two numbers", "x"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 13 is untrained: its warning has its own test
        ours = model.encode(texts, tokenizer, truncate_dim=dim)
        unnormalized = model.encode(texts, tokenizer, truncate_dim=dim, normalize=False)
    theirs = st_model.encode(texts, normalize_embeddings=True)
    assert ours.shape == theirs.shape == (3, dim)
    np.testing.assert_allclose(ours.numpy(), theirs, atol=1e-5)
    # the first dim coordinates
    torch.testing.assert_close(unnormalized, model.encode(texts, tokenizer, normalize=False)[:, :dim])


def test_a_truncation_the_model_was_not_trained_for_warns_once_per_call_site(tiny_model, matryoshka_models):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's default: once per call site and message
        for _ in range(3):
            assert tiny_model.encode(["x = 1"], truncate_dim=16).shape == (1, 16)
    assert len(caught) == 1 and caught[0].filename == __file__  # stacklevel: the caller's line
    assert "truncate_dim=16" in str(caught[0].message) and "[32]" in str(caught[0].message)
    assert "unmeasured" in str(caught[0].message)
    matryoshka, tokenizer = matryoshka_models[0], matryoshka_models[1].tokenizer
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        matryoshka.encode(["x = 1"], tokenizer, truncate_dim=12)
    assert "truncate_dim=12" in str(caught[0].message) and "[32, 16, 8]" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # trained widths and the full width are silent
        for dim in (16, 8, 32, None):
            matryoshka.encode(["x = 1"], tokenizer, truncate_dim=dim)
        tiny_model.encode(["x = 1"], truncate_dim=32)
