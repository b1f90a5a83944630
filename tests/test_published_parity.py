"""The project computes what the published C2LLM computes: a published-layout checkpoint, converted, gives the
vectors of an independent reference (tests/published_reference.py) through AutoModel, SentenceTransformer,
mteb's own C2LLM loader and the parity tool, for d = hidden and d < hidden."""

import importlib.util
from pathlib import Path

import pytest
import torch

from modeling_c2llm import DEFAULT_MAX_LENGTH, DTYPE_ARGUMENT
from tests.published_reference import PublishedReference, write_published_checkpoint
from tools.convert_published import convert_published_checkpoint
from tools.parity_check import SAMPLE_TEXTS
from tools.prompts import DOCUMENT_PROMPT, TASK_INSTRUCTIONS, query_prompt
from tools.tokenizer import qwen25_tokenizer_dir

HIDDEN = 64
MIN_COSINE = 0.99999
LONG_CODE = "".join(f"def step_{i}(state):\n    state['count'] += {i}\n    return state\n\n" for i in range(110))
QUERIES = ["sort", "read a jsonl file and return its lines", "how many users signed up in May?"]
DOCUMENTS = ["def add(a, b):\n    return a + b", "SELECT COUNT(*) FROM users;", LONG_CODE]  # the last > 2,048 tokens


@pytest.fixture(scope="module", params=[HIDDEN, 32], ids=["d=hidden", "d<hidden"])
def published(request, tmp_path_factory):
    """(published-layout folder, converted folder) for one compressed dimension."""
    root = tmp_path_factory.mktemp(f"published-d{request.param}")
    source = write_published_checkpoint(root / "published", qwen25_tokenizer_dir(), hidden_size=HIDDEN,
                                        compressed_dim=request.param)
    return source, convert_published_checkpoint(source, root / "converted")


def cosines(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(torch.as_tensor(a).float(), torch.as_tensor(b).float(), dim=-1)


def load_sentence_transformer(folder):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu", trust_remote_code=True,
                               model_kwargs={DTYPE_ARGUMENT: torch.float32})


def test_automodel_equals_the_published_computation(published):
    from transformers import AutoModel

    source, converted = published
    reference = PublishedReference(source)
    texts = [query_prompt(TASK_INSTRUCTIONS["CodeSearchNetRetrieval"]) + q for q in QUERIES]
    texts += [DOCUMENT_PROMPT + d for d in DOCUMENTS]
    model = AutoModel.from_pretrained(converted, trust_remote_code=True, **{DTYPE_ARGUMENT: torch.float32}).eval()
    assert reference.tokenizer(texts[-1], add_special_tokens=False, return_length=True)["length"][0] > DEFAULT_MAX_LENGTH
    ours = model.encode(texts)  # default length: 2,048, as the reference
    assert cosines(ours, reference.encode(texts)).min() >= MIN_COSINE


def test_sentence_transformer_with_prompt_names_equals_the_published_computation(published):
    source, converted = published
    reference = PublishedReference(source)
    model = load_sentence_transformer(converted)
    assert model.max_seq_length == DEFAULT_MAX_LENGTH == 2048
    queries = model.encode(QUERIES, prompt_name="CodeSearchNetRetrieval-query")
    documents = model.encode(DOCUMENTS, prompt_name="CodeSearchNetRetrieval-document")
    expected_queries = reference.encode([query_prompt(TASK_INSTRUCTIONS["CodeSearchNetRetrieval"]) + q for q in QUERIES])
    expected_documents = reference.encode([DOCUMENT_PROMPT + d for d in DOCUMENTS])
    assert cosines(queries, expected_queries).min() >= MIN_COSINE
    assert cosines(documents, expected_documents).min() >= MIN_COSINE


def test_the_paper_reading_is_a_different_function(published):
    """The residual is the one thing that separates the two readings: the project must not match the paper's."""
    source, converted = published
    if PublishedReference(source).pma["S"].shape[-1] != HIDDEN:
        pytest.skip("the paper's reading needs a hidden-wide query")
    texts = [DOCUMENT_PROMPT + d for d in DOCUMENTS]
    from transformers import AutoModel

    model = AutoModel.from_pretrained(converted, trust_remote_code=True, **{DTYPE_ARGUMENT: torch.float32}).eval()
    assert cosines(model.encode(texts), PublishedReference(source, residual="projected_query").encode(texts)).min() < 0.999


def test_padding_side_and_batching_change_nothing(published):
    source, converted = published
    reference = PublishedReference(source)
    texts = [DOCUMENT_PROMPT + d for d in DOCUMENTS[:2]] + QUERIES
    one_by_one = torch.cat([reference.encode([text]) for text in texts])
    assert cosines(reference.encode(texts), one_by_one).min() >= MIN_COSINE
    reference.tokenizer.padding_side = "right"
    assert cosines(reference.encode(texts), one_by_one).min() >= MIN_COSINE
    model = load_sentence_transformer(converted)
    batched = model.encode(texts, batch_size=len(texts))
    single = torch.cat([torch.as_tensor(model.encode([text])) for text in texts])
    assert cosines(batched, single).min() >= MIN_COSINE
    assert cosines(batched, one_by_one).min() >= MIN_COSINE


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mteb") is None, reason='needs mteb: pip install ".[eval]"')
def test_mteb_c2llm_loader_on_a_local_folder_gives_our_vectors(published):
    """mteb's own C2LLM entry (loader, prompts, 2,048 tokens, left padding) loads a converted folder offline."""
    import mteb
    from datasets import Dataset
    from mteb.types import PromptType
    from torch.utils.data import DataLoader

    source, converted = published
    meta = mteb.get_model_meta("codefuse-ai/C2LLM-0.5B")
    wrapper = meta.loader(str(converted), revision=None, device="cpu",
                          **{**meta.loader_kwargs, "model_kwargs": {DTYPE_ARGUMENT: torch.float32}})
    task = mteb.get_task("CosQA")
    batches = DataLoader(Dataset.from_dict({"text": QUERIES}), batch_size=2)  # what mteb hands its encoders
    via_mteb = wrapper.encode(batches, task_metadata=task.metadata, hf_split="test", hf_subset="default",
                              prompt_type=PromptType.query)
    ours = load_sentence_transformer(converted).encode(QUERIES, prompt_name="CosQA-query")
    assert cosines(via_mteb, ours).min() >= MIN_COSINE
    assert cosines(ours, PublishedReference(source).encode([query_prompt(TASK_INSTRUCTIONS["CosQA"]) + q
                                                            for q in QUERIES])).min() >= MIN_COSINE


@pytest.mark.slow
@pytest.mark.parametrize("reading, exit_code", [("query", 0), ("projected_query", 1)])
def test_parity_tool_reports_which_reading_reproduces_the_published_vectors(published, tmp_path, monkeypatch, capsys,
                                                                            reading, exit_code):
    """The tool's comparison half, fed the reference's vectors as if written by --write-published elsewhere."""
    from tools import parity_check

    source, _ = published
    if reading == "projected_query" and PublishedReference(source).pma["S"].shape[-1] != HIDDEN:
        pytest.skip("the paper's reading needs a hidden-wide query")
    vectors_file = tmp_path / "published.safetensors"
    parity_check.save_vectors(vectors_file, PublishedReference(source, residual=reading).encode(list(SAMPLE_TEXTS)),
                              SAMPLE_TEXTS)
    monkeypatch.setattr("sys.argv", ["parity_check", str(source), "--published-vectors", str(vectors_file)])
    with pytest.raises(SystemExit) as exited:
        parity_check.main()
    assert exited.value.code == exit_code
    assert f"reproduce the published code (min cosine >= 0.9999): ['{reading}']" in capsys.readouterr().out


class StandInPublishedModel:
    """What the published remote code gives the tool once loaded: an object whose `encode` embeds texts (here the
    independent reference of the published computation, since the real remote code needs the Hub)."""

    def __init__(self, folder):
        self.reference = PublishedReference(folder)

    def encode(self, texts, batch_size, convert_to_tensor):
        assert convert_to_tensor
        return self.reference.encode(list(texts), batch_size=batch_size)


@pytest.mark.slow
def test_parity_tool_in_two_environments_runs_the_published_side_then_compares(published, tmp_path, monkeypatch,
                                                                               capsys):
    """--write-published (the environment with the published code), then --published-vectors (ours)."""
    from tools import parity_check

    source, _ = published
    loads = []

    def load_published(folder, attn_implementation=None):
        loads.append((str(folder), attn_implementation))
        return StandInPublishedModel(Path(folder))

    monkeypatch.setattr(parity_check, "load_sentence_transformer", load_published)
    vectors_file = tmp_path / "published.safetensors"
    monkeypatch.setattr("sys.argv", ["parity_check", str(source), "--write-published", str(vectors_file)])
    parity_check.main()
    # the published config asks for flash_attention_2; without flash-attn and a GPU the tool loads it with sdpa
    assert loads == [(str(source), "sdpa")] and vectors_file.is_file()
    assert f"wrote the published vectors of {len(SAMPLE_TEXTS)} texts" in capsys.readouterr().out

    monkeypatch.undo()
    monkeypatch.setattr("sys.argv", ["parity_check", str(source), "--published-vectors", str(vectors_file)])
    with pytest.raises(SystemExit) as exited:
        parity_check.main()
    assert exited.value.code == 0
    assert "reproduce the published code (min cosine >= 0.9999): ['query'" in capsys.readouterr().out


def test_parity_tool_explains_a_published_model_that_does_not_load(tmp_path, monkeypatch):
    from tools import parity_check

    def fails(folder, attn_implementation=None):
        raise ImportError("This modeling file requires deepspeed")

    monkeypatch.setattr(parity_check, "load_sentence_transformer", fails)
    with pytest.raises(SystemExit, match="needs? transformers < 5.*--write-published FILE.*--published-vectors FILE"):
        parity_check.published_vectors(tmp_path, ["x"])
