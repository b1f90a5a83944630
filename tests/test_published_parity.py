"""The project computes what the published C2LLM computes: a published-layout checkpoint, converted, gives the
vectors of an independent reference (tests/published_reference.py) through AutoModel, SentenceTransformer,
mteb's own C2LLM loader and the parity tool, for d = hidden and d < hidden."""

import importlib.util
import re
from pathlib import Path

import pytest
import torch

from modeling_c2llm import DEFAULT_MAX_LENGTH, DTYPE_ARGUMENT
from tests.published_reference import READINGS, PublishedReference, write_published_checkpoint
from tools.convert_published import convert_published_checkpoint
from tools.parity_check import SAMPLE_TEXTS
from c2llm_data.prompts import DOCUMENT_PROMPT, TASK_INSTRUCTIONS, query_prompt
from train.tokenizer import qwen25_tokenizer_dir

HIDDEN = 64
MIN_COSINE = 0.99999
LONG_CODE = "".join(f"def step_{i}(state):\n    state['count'] += {i}\n    return state\n\n" for i in range(110))
QUERIES = ["sort", "read a jsonl file and return its lines", "how many users signed up in May?"]
DOCUMENTS = ["def add(a, b):\n    return a + b", "SELECT COUNT(*) FROM users;", LONG_CODE]  # the last > 2,048 tokens
TEXTS = ([query_prompt(TASK_INSTRUCTIONS["CodeSearchNetRetrieval"]) + q for q in QUERIES]
         + [DOCUMENT_PROMPT + d for d in DOCUMENTS])


# The residual reading and the padding effect do not depend on d: their tests run at d = hidden only.
AT_HIDDEN = pytest.mark.parametrize("published", [HIDDEN], indirect=True, ids=["d=hidden"])


@pytest.fixture(scope="module", params=[HIDDEN, 32], ids=["d=hidden", "d<hidden"])
def published(request, tmp_path_factory):
    """(published-layout folder, converted folder in the default reading) for one compressed dimension."""
    root = tmp_path_factory.mktemp(f"published-d{request.param}")
    source = write_published_checkpoint(root / "published", qwen25_tokenizer_dir(), hidden_size=HIDDEN,
                                        compressed_dim=request.param)
    return source, convert_published_checkpoint(source, root / "converted")


@pytest.fixture(scope="module")
def reference(published):
    """The independent reference on the published-layout folder (read-only: tests must not change it)."""
    return PublishedReference(published[0])


@pytest.fixture(scope="module")
def reference_vectors(reference):
    """{reading: (n, d) vectors of TEXTS}, computed once: the reference runs one text at a time."""
    return reference.encode_readings(TEXTS)


@pytest.fixture(scope="module")
def automodel(published):
    """The converted folder through AutoModel (read-only)."""
    from transformers import AutoModel

    return AutoModel.from_pretrained(published[1], trust_remote_code=True, **{DTYPE_ARGUMENT: torch.float32}).eval()


@pytest.fixture(scope="module")
def automodel_vectors(automodel, reference):
    """With the reference's tokenizer: the converted folder holds the same files (its own tokenizer is loaded by the
    SentenceTransformer tests below), and loading the Qwen2.5 tokenizer again costs a CPU-second."""
    return automodel.encode(TEXTS, reference.tokenizer)  # default length: 2,048, as the reference


@pytest.fixture(scope="module")
def sentence_transformer(published):
    """The converted folder through SentenceTransformer (a test that changes it puts it back)."""
    return load_sentence_transformer(published[1])


def cosines(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(torch.as_tensor(a).float(), torch.as_tensor(b).float(), dim=-1)


def load_sentence_transformer(folder):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu", trust_remote_code=True,
                               model_kwargs={DTYPE_ARGUMENT: torch.float32})


def test_automodel_equals_the_published_computation(automodel, automodel_vectors, reference, reference_vectors):
    assert automodel.config.pma_residual == "projected_query"  # the converter's default is the published reading
    long_text = reference.tokenizer(TEXTS[-1], add_special_tokens=False, return_length=True)
    assert long_text["length"][0] > DEFAULT_MAX_LENGTH
    assert cosines(automodel_vectors, reference_vectors["projected_query"]).min() >= MIN_COSINE


def test_sentence_transformer_with_prompt_names_equals_the_published_computation(sentence_transformer,
                                                                                  reference_vectors):
    model = sentence_transformer
    assert model.max_seq_length == DEFAULT_MAX_LENGTH == 2048
    queries = model.encode(QUERIES, prompt_name="CodeSearchNetRetrieval-query")
    documents = model.encode(DOCUMENTS, prompt_name="CodeSearchNetRetrieval-document")
    ours = torch.cat([torch.as_tensor(queries), torch.as_tensor(documents)])
    assert cosines(ours, reference_vectors["projected_query"]).min() >= MIN_COSINE


@AT_HIDDEN
def test_the_raw_seed_reading_is_a_different_function_and_stays_selectable(published, automodel_vectors, reference,
                                                                            reference_vectors, tmp_path):
    """The residual is what separates the two readings: the default must not match CodeFuse-CGE's raw seed, and
    a folder converted with pma_residual='query' must match it."""
    from transformers import AutoModel

    source, _ = published
    assert cosines(automodel_vectors, reference_vectors["query"]).min() < 0.999
    raw_seed = AutoModel.from_pretrained(convert_published_checkpoint(source, tmp_path / "raw-seed",
                                                                      pma_residual="query"),
                                         trust_remote_code=True, **{DTYPE_ARGUMENT: torch.float32}).eval()
    assert raw_seed.config.pma_residual == "query"
    assert cosines(raw_seed.encode(TEXTS, reference.tokenizer), reference_vectors["query"]).min() >= MIN_COSINE


@AT_HIDDEN
def test_padding_moves_published_vectors_but_never_ours(reference, reference_vectors, sentence_transformer):
    """The published PMA re-masks a softmax taken over every position, so a short text padded into a batch of
    long ones gets another vector; ours takes the softmax over real tokens and does not. Same lengths: no effect."""
    short = TEXTS[:-1]  # 7 to 40 tokens: enough padding to show the effect, cheap to run
    padded = reference.encode(short, batch_size=len(short))
    assert cosines(padded, reference_vectors["projected_query"][:-1]).min() < 0.999
    same_length = reference.encode([TEXTS[0], TEXTS[0]], batch_size=2)
    assert cosines(same_length, reference_vectors["projected_query"][:1]).min() >= MIN_COSINE
    model = sentence_transformer
    texts = [DOCUMENT_PROMPT + d for d in DOCUMENTS[:2]] + QUERIES
    batched = model.encode(texts, batch_size=len(texts))
    single = torch.cat([torch.as_tensor(model.encode([text])) for text in texts])
    assert cosines(batched, single).min() >= MIN_COSINE
    model.tokenizer.padding_side = "right"
    try:
        assert cosines(model.encode(texts, batch_size=len(texts)), single).min() >= MIN_COSINE
    finally:
        model.tokenizer.padding_side = "left"


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
@pytest.mark.parametrize("reading, exit_code", [("projected_query", 0), ("query", 1)])
def test_parity_tool_reports_which_reading_reproduces_the_published_vectors(published, tmp_path, monkeypatch, capsys,
                                                                            reading, exit_code):
    """The tool's comparison half, fed the reference's vectors as if written by --write-published elsewhere."""
    from tools import parity_check

    source, _ = published
    vectors_file = tmp_path / "published.safetensors"
    vectors = PublishedReference(source, residual=reading).encode(list(SAMPLE_TEXTS))  # unnormalized, as published
    parity_check.save_vectors(vectors_file, {"alone": vectors}, SAMPLE_TEXTS)
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
        return self.reference.encode_length_sorted(list(texts), batch_size)


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
    printed = capsys.readouterr().out
    assert "reproduce the published code (min cosine >= 0.9999): ['projected_query']" in printed
    padding = re.search(r"padding effect: .* min cosine ([0-9.]+), median ([0-9.]+)", printed)
    assert padding and float(padding.group(1)) < 0.9999  # the reference's re-masked softmax sees the padding


def test_parity_tool_explains_a_published_model_that_does_not_load(tmp_path, monkeypatch):
    from tools import parity_check

    def fails(folder, attn_implementation=None):
        raise ImportError("This modeling file requires deepspeed")

    monkeypatch.setattr(parity_check, "load_sentence_transformer", fails)
    with pytest.raises(SystemExit, match="needs? transformers < 5.*--write-published FILE.*--published-vectors FILE"):
        parity_check.published_vectors(tmp_path, ["x"])
