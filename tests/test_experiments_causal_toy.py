"""The causal toy (experiments/causal_toy/train.py): 2 training steps per pooling on a handful of pairs.

Cheap (a 1-layer, 32-wide model; pairs written to a tmp folder, nothing read from /work/cache): the saved
folder loads with SentenceTransformer(trust_remote_code=True) and gives finite vectors of the right size,
and the three poolings start from the same backbone weights yet give different embeddings.
"""

import importlib.util
import json
import sys

import pytest
import torch

from tests.conftest import REPO_ROOT

POOLINGS = ("pma", "last_token", "mean")
HIDDEN = 32
SHAPE = {"hidden_size": HIDDEN, "layers": 1, "attention_heads": 4, "kv_heads": 2, "intermediate_size": 64, "pma_heads": 4}
TEXTS = ["read a json lines file", "def add(a, b):\n    return a + b", ""]  # "" gets the side marker only


def load_train_script():
    """Import experiments/causal_toy/train.py under a private name (the repository also has a `train` package)."""
    spec = importlib.util.spec_from_file_location("experiments_causal_toy_train",
                                                  REPO_ROOT / "experiments" / "causal_toy" / "train.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


causal_toy = load_train_script()


def write_pairs(folder):
    """8 python docstring -> function pairs and 8 Java -> C# pairs, in mine.py's format."""
    folder.mkdir()
    python = [{"query": f"return {i} plus the argument", "positive": f"def add_{i}(x):\n    return x + {i}",
               "positive_with_docstring": f'def add_{i}(x):\n    """Return {i} plus x."""\n    return x + {i}'}
              for i in range(8)]
    java = [{"query": f"public int get{i}() {{return {i};}}", "positive": f"public int Get{i}(){{return {i};}}"}
            for i in range(8)]
    for name, rows in (("pairs_python.jsonl", python), ("pairs_java2cs.jsonl", java)):
        (folder / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


@pytest.fixture(scope="module")
def trained_folders(tmp_path_factory):
    """pooling -> the folder train.py saved after 2 steps of batch 4 (same seed, same batches)."""
    root = tmp_path_factory.mktemp("causal_toy")
    data = write_pairs(root / "data")
    shape_args = [f"--{key.replace('_', '-')}={value}" for key, value in SHAPE.items()]
    folders = {}
    for pooling in POOLINGS:
        folders[pooling] = root / pooling
        causal_toy.main(["--pooling", pooling, "--out", str(folders[pooling]), "--data", str(data), "--steps", "2",
                         "--batch-size", "4", "--warmup", "1", "--java-fraction", "0.5", "--threads", "1", *shape_args])
    return folders


def test_backbone_init_does_not_depend_on_the_pooling_but_the_embeddings_do():
    models = {pooling: causal_toy.build_model(pooling, seed=0, **SHAPE).eval() for pooling in POOLINGS}
    reference = models["mean"].model.state_dict()
    inputs = {"input_ids": torch.tensor([[151643, 11, 12, 13], [20, 21, 22, 23]]),
              "attention_mask": torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])}
    with torch.no_grad():
        embeddings = {pooling: model(**inputs).sentence_embedding for pooling, model in models.items()}
    for pooling, model in models.items():
        assert all(torch.equal(value, reference[key]) for key, value in model.model.state_dict().items())
        assert embeddings[pooling].shape == (2, HIDDEN)
    assert models["pma"].pma is not None and models["mean"].pma is None
    for a, b in (("pma", "last_token"), ("pma", "mean"), ("last_token", "mean")):
        assert not torch.allclose(embeddings[a], embeddings[b], atol=1e-4)


@pytest.mark.slow
def test_saved_folders_load_in_sentence_transformers_and_encode(trained_folders):
    from sentence_transformers import SentenceTransformer

    vectors = {}
    for pooling, folder in trained_folders.items():
        log = json.loads((folder / "train_log.json").read_text())
        assert len(log["steps"]) == 2 and all(step["seconds"] > 0 for step in log["steps"])
        # float32 as run_all.sh evaluates (C2LLM would pick bfloat16 on a CPU with native bf16)
        model = SentenceTransformer(str(folder), trust_remote_code=True, device="cpu", model_kwargs={"dtype": torch.float32})
        assert model.prompts == {"query": "Query: ", "document": "Document: "}
        vectors[pooling] = model.encode(TEXTS, prompt_name="query", convert_to_tensor=True)
        assert vectors[pooling].shape == (len(TEXTS), HIDDEN)
        assert torch.isfinite(vectors[pooling]).all()
        assert torch.allclose(vectors[pooling].norm(dim=-1), torch.ones(len(TEXTS)), atol=1e-4)
    for a, b in (("pma", "last_token"), ("pma", "mean"), ("last_token", "mean")):
        assert not torch.allclose(vectors[a], vectors[b], atol=1e-3)


def test_too_few_pairs_is_a_clear_error(tmp_path):
    data = write_pairs(tmp_path / "data")
    with pytest.raises(SystemExit, match="not enough pairs"):
        causal_toy.main(["--pooling", "mean", "--out", str(tmp_path / "out"), "--data", str(data), "--steps", "3",
                         "--batch-size", "8", "--threads", "1"])


def test_summarize_refuses_to_overwrite_the_table_without_results(tmp_path, monkeypatch):
    """The per-run suite outputs are not in git: with none, the committed table must survive, not be emptied."""
    spec = importlib.util.spec_from_file_location("experiments_causal_toy_summarize",
                                                  REPO_ROOT / "experiments" / "causal_toy" / "summarize.py")
    summarize = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(summarize)
    monkeypatch.setattr(summarize, "RESULTS", tmp_path)
    (tmp_path / "table.md").write_text("committed")
    with pytest.raises(SystemExit, match="not in git"):
        summarize.main()
    assert (tmp_path / "table.md").read_text() == "committed"
