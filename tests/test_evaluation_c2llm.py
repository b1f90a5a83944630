"""Our model through the evaluation code: a tiny random C2LLM folder from `tests/make_tiny_model.py`.

Checks that both runners give C2LLM the prompts of the MTEB task closest to each benchmark, that they
agree with each other, and that the ModelMeta is filled from the folder.
"""

import json

import pytest

from evaluation import mteb_code, suite
from evaluation.model_meta import c2llm_loader_kwargs, model_meta_from_folder
from tests.make_tiny_model import make_tiny_model
from tests.test_evaluation_data import BENCHMARKS

TINY_EMBEDDING_DIM = 32
MODEL_CARD = """---
license: apache-2.0
language: [en, python]
datasets: [CoIR-Retrieval/cosqa]
base_model: Qwen/Qwen2.5-Coder-0.5B-Instruct
---
# tiny C2LLM

```bibtex
@article{tiny, title={Tiny}}
```
"""
BENCHMARK = "humaneval"  # its closest MTEB-Code task is AppsRetrieval
SUBSET = ["--max-queries", "8", "--max-corpus", "40", "--no-progress"]


@pytest.fixture(scope="module")
def c2llm_folder(tmp_path_factory):
    """A tiny random C2LLM folder with a model card."""
    folder = make_tiny_model(tmp_path_factory.mktemp("c2llm") / "tiny", pma_dim=TINY_EMBEDDING_DIM)
    (folder / "README.md").write_text(MODEL_CARD)
    return folder


@pytest.fixture
def recorded_prompts(monkeypatch):
    """Record the prompt text of every SentenceTransformer.encode call (encode_query/encode_document call it too)."""
    from sentence_transformers import SentenceTransformer

    used = set()
    original = SentenceTransformer.encode

    def spy(self, *args, **kwargs):
        prompt = kwargs.get("prompt")
        if prompt is None and kwargs.get("prompt_name"):
            prompt = self.prompts[kwargs["prompt_name"]]
        used.add(prompt)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SentenceTransformer, "encode", spy)
    return used


@pytest.mark.slow
def test_both_runners_give_c2llm_the_closest_tasks_prompts(c2llm_folder, tmp_path, recorded_prompts):
    if not (BENCHMARKS / BENCHMARK).is_dir():
        pytest.skip("needs ../shared/data/benchmarks beside the repository (the project's data, see its README)")
    prompts = json.loads((c2llm_folder / "config_sentence_transformers.json").read_text())["prompts"]
    expected = {prompts["AppsRetrieval-query"], prompts["AppsRetrieval-document"]}

    suite.main([
        "--model", str(c2llm_folder), "--data", str(BENCHMARKS / BENCHMARK), "--output", str(tmp_path / "suite.json"),
        *SUBSET,
    ])
    assert recorded_prompts == expected
    recorded_prompts.clear()
    # The MTEB runner loads C2LLM with mteb's C2LLM loader, whose prompts_dict gives the same texts.
    mteb_code.main([
        "--model", str(c2llm_folder), "--local-data", str(BENCHMARKS / BENCHMARK),
        "--cache-dir", str(tmp_path / "cache"), "--output", str(tmp_path / "mteb.json"), *SUBSET,
    ])
    assert recorded_prompts == expected
    suite_ndcg = json.loads((tmp_path / "suite.json").read_text())[BENCHMARK]["ndcg@10"]
    mteb_ndcg = json.loads((tmp_path / "mteb.json").read_text())[f"LocalBEIR-{BENCHMARK}"]
    assert mteb_ndcg == pytest.approx(100 * suite_ndcg, abs=0.02)


@pytest.mark.slow
def test_model_meta_is_filled_from_the_c2llm_folder(c2llm_folder):
    from mteb.models.instruct_wrapper import InstructSentenceTransformerModel
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(c2llm_folder), trust_remote_code=True)
    meta = model_meta_from_folder(c2llm_folder, name="test-org/c2llm-tiny", revision="abc")
    assert meta.n_parameters == sum(p.numel() for p in model.parameters())
    assert meta.embed_dim == model.get_embedding_dimension() == TINY_EMBEDDING_DIM
    assert meta.max_tokens == model[0].auto_model.config.max_position_embeddings
    assert meta.license == "apache-2.0" and meta.languages == ["eng-Latn", "python-Code"]
    assert meta.training_datasets == {"CosQA"} and meta.adapted_from == "Qwen/Qwen2.5-Coder-0.5B-Instruct"
    assert meta.use_instructions and meta.loader is InstructSentenceTransformerModel
    assert meta.loader_kwargs == c2llm_loader_kwargs()
    assert meta.citation.startswith("@article{tiny") and meta.reference == "https://huggingface.co/test-org/c2llm-tiny"
