"""The MiniLM experiment's helpers (experiments/minilm): mining, the benchmark-overlap filter, batch sampling.

Cheap: no model is loaded; the benchmark is a two-document folder written here.
"""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

EXPERIMENT = REPO_ROOT / "experiments" / "minilm"


def load_script(name: str):
    """Import experiments/minilm/NAME.py under a private name (the repository also has a `train` package)."""
    spec = importlib.util.spec_from_file_location(f"experiments_minilm_{name}", EXPERIMENT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


mine = load_script("mine")
make_batches = load_script("train").make_batches

BENCHMARK_CODE = 'def writeBoolean(self, n):\n        """\n        Writes a Boolean to the stream.\n        """\n' \
                 '        t = TYPE_BOOL_TRUE\n\n        if n is False:\n            t = TYPE_BOOL_FALSE\n\n' \
                 '        self.stream.write(t)'

MODULE = '''
class Writer:
    def writeBoolean(self, n):
        """Writes a boolean value to the output stream.

        Long explanation that is not part of the query.
        """
        t = TYPE_BOOL_TRUE
        if n is False:  # a comment the benchmark copy does not have
            t = TYPE_BOOL_FALSE
        self.stream.write(t)


def parse_header(line):
    """Split an HTTP header line into its name and value."""
    name, _, value = line.partition(":")
    return name.strip().lower(), value.strip()


def stub(x):
    """This one has no real body at all."""
    pass
'''


def write_benchmark(folder: Path) -> Path:
    folder.mkdir(parents=True)
    rows = [{"_id": "c0", "text": BENCHMARK_CODE}, {"_id": "c1", "text": "SELECT 1"}]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q0", "text": "How to parse an HTTP header line?"}) + "\n")
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq0\tc0\t1\n")
    return folder


def test_function_pairs_take_the_first_docstring_paragraph_and_strip_the_docstring():
    pairs = {name: (query, code, full) for name, query, code, full in mine.function_pairs(MODULE)}
    assert set(pairs) == {"writeBoolean", "parse_header"}  # the stub has no real body
    query, code, full = pairs["parse_header"]
    assert query == "Split an HTTP header line into its name and value."
    assert code.startswith("def parse_header(line):\n    name, _, value") and '"""' not in code
    assert '"""Split an HTTP' in full
    assert pairs["writeBoolean"][0] == "Writes a boolean value to the output stream."


def test_overlap_filter_drops_benchmark_code_and_queries(tmp_path):
    index = mine.BenchmarkIndex([write_benchmark(tmp_path / "bench")])
    pairs = {name: (query, code, full) for name, query, code, full in mine.function_pairs(MODULE)}
    # same function as a benchmark document, despite other indentation, a comment and another docstring
    assert index.overlap_reason(*pairs["writeBoolean"]) == "code matches a benchmark text"
    # a query equal to a benchmark query up to case and punctuation
    assert index.overlap_reason("how to parse an HTTP header line", "def f():\n    return 1") == \
        "query matches a benchmark text"
    # a query equal to the docstring of a benchmark document
    assert index.overlap_reason("Writes a Boolean to the stream.", "def g():\n    return 2") == \
        "query matches a benchmark text"
    assert index.overlap_reason(*pairs["parse_header"]) is None


def test_mine_python_deduplicates_and_filters(tmp_path):
    index = mine.BenchmarkIndex([write_benchmark(tmp_path / "bench")])
    package = tmp_path / "site-packages" / "pkg"
    package.mkdir(parents=True)
    (package / "a.py").write_text(MODULE)
    (package / "b.py").write_text(MODULE)  # exact copy: duplicates
    rows, drops, per_source = mine.mine_python([tmp_path / "site-packages"], index)
    assert [row["query"] for row in rows] == ["Split an HTTP header line into its name and value."]
    assert drops["code matches a benchmark text"] == 2 and drops["duplicate code"] == 1
    assert per_source == {"pkg": 1}


def test_batches_are_seeded_single_group_and_never_reuse_a_pair():
    python_rows = [{"query": f"q{i}", "positive": f"p{i}", "positive_with_docstring": f"d{i}"} for i in range(100)]
    java_rows = [{"query": f"public j{i}", "positive": f"c{i}"} for i in range(50)]
    first = make_batches(python_rows, java_rows, steps=10, batch_size=8, java_fraction=0.2, keep_docstring=0.25, seed=3)
    assert first == make_batches(python_rows, java_rows, 10, 8, 0.2, 0.25, 3)
    assert first != make_batches(python_rows, java_rows, 10, 8, 0.2, 0.25, 4)
    java = [batch for batch in first if batch[0][0].startswith("public")]
    assert len(java) == 2 and all(all(q.startswith("public") for q, _ in batch) for batch in java)
    queries = [q for batch in first for q, _ in batch]
    assert len(queries) == len(set(queries)) == 80


def test_task_prompts_prefix_each_pair_with_its_tasks_prompts_and_keep_the_draws():
    train = load_script("train")
    prompts = train.repository_prompts()  # the repository model's own per-task prompts
    python_rows = [{"query": f"Return item {i}.", "positive": f"p{i}", "positive_with_docstring": f"d{i}",
                    "source": "pkg"} for i in range(40)]
    java_rows = [{"query": f"public j{i}", "positive": f"c{i}"} for i in range(20)]
    args = dict(steps=6, batch_size=8, java_fraction=0.34, keep_docstring=0.5, seed=1, web_queries=0.5)
    plain = make_batches(python_rows, java_rows, **args)
    prompted = make_batches(python_rows, java_rows, **args, prompts=prompts)
    kinds = {"docstring": 0, "web": 0, "java": 0}
    for plain_batch, prompted_batch in zip(plain, prompted, strict=True):
        for (query, positive), (prompted_query, prompted_positive) in zip(plain_batch, prompted_batch, strict=True):
            kind = "java" if query.startswith("public") else "web" if "python" in query else "docstring"
            task = train.TRAINING_PROMPT_TASKS[kind]
            assert prompted_query == prompts[f"{task}-query"] + query  # same draws, only the prefix differs
            assert prompted_positive == prompts[f"{task}-document"] + positive
            kinds[kind] += 1
        assert train.batch_group(prompted_batch, prompts) == train.batch_group(plain_batch, None)
    assert all(kinds.values())  # every kind of pair was checked


def test_grouped_batches_come_from_one_package_each():
    train = load_script("train")
    rng_rows = [("torch", 40), ("sympy", 30), ("stdlib", 9)]  # stdlib: too small for a batch of 10 on its own
    python_rows = [{"query": f"{source} q{i}", "positive": f"p {source} {i}", "positive_with_docstring": "d",
                    "source": source} for source, count in rng_rows for i in range(count)]
    java_rows = [{"query": f"public j{i}", "positive": f"c{i}"} for i in range(10)]
    batches = make_batches(python_rows, java_rows, steps=7, batch_size=10, java_fraction=0.0, keep_docstring=0.0,
                           seed=0, group_by_source=True)
    sources = [{query.split()[0] for query, _ in batch} for batch in batches]
    single = [s for s in sources if len(s) == 1]
    assert len(single) == 7 and sorted(next(iter(s)) for s in single) == ["sympy"] * 3 + ["torch"] * 4
    queries = [q for batch in batches for q, _ in batch]
    assert len(queries) == len(set(queries)) == 70  # no pair twice
    too_many = [python_rows[0]] * 5
    try:
        train.python_batch_rows(too_many, 2, 4, True, __import__("random").Random(0))
    except SystemExit as error:
        assert "only 1 python batches of 4 available, 2 asked" in str(error)
    else:
        raise AssertionError("asking for more batches than the data holds must fail")


def test_web_style_queries_look_like_search_queries():
    import random

    from train.augment import WEB_QUERY_WORDS, web_style_query  # the product's rewriting, which train.py imports

    for seed in range(8):
        query = web_style_query("Returns the indices of the sorted array.\n\nMore detail here.", random.Random(seed))
        assert "return the indices of the sorted array" in query and "python" in query  # imperative, lowercase
        assert "." not in query and "detail" not in query  # first sentence only
    long = web_style_query("Computes " + " ".join(f"w{i}" for i in range(40)), random.Random(0))
    assert len(long.split()) <= WEB_QUERY_WORDS + 4  # + "how to ... in python"
    assert web_style_query("Is this valid?", random.Random(0)).count("is this valid") == 1  # short verbs untouched


def test_merge_with_stock_interpolates_trained_tensors_and_keeps_frozen_ones_exact(tmp_path):
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    from evaluation.baselines import packaged_minilm_folder

    backbone = Transformer(str(packaged_minilm_folder()), max_seq_length=32)
    run = SentenceTransformer(modules=[backbone, Pooling(384, "mean"), Normalize()], device="cpu")
    stock_state = {k: v.clone() for k, v in backbone.auto_model.state_dict().items()}
    trained_name = "encoder.layer.5.output.dense.weight"
    with torch.no_grad():
        backbone.auto_model.state_dict()[trained_name].add_(1.0)  # "training" touched one tensor
    run.save(str(tmp_path / "run"))
    merged = load_script("merge").merge_with_stock(tmp_path / "run", stock_weight=0.25)
    merged_state = merged[0].auto_model.state_dict()
    torch.testing.assert_close(merged_state[trained_name], stock_state[trained_name] + 0.75)
    untouched = [name for name in stock_state if name != trained_name and stock_state[name].is_floating_point()]
    assert all(torch.equal(merged_state[name], stock_state[name]) for name in untouched)


@pytest.mark.slow
def test_train_saves_checkpoints_and_trains_only_the_top_layers_in_bf16(tmp_path, monkeypatch):
    """Two bf16-autocast steps of batch 4 on the packaged MiniLM: a checkpoint after step 1, the final model after
    step 2, both loadable; every forward ran under bf16 autocast, in train mode at the training length (saving the
    checkpoint did not leave the model in eval mode at 256 tokens); only the top layer and the PMA head moved, and
    they moved between the two."""
    import torch
    from sentence_transformers import SentenceTransformer

    forwards = []  # (autocast dtype or None, training, max_seq_length) per forward call
    original_forward = SentenceTransformer.forward

    def recording_forward(self, *args, **kwargs):
        autocast = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None
        forwards.append((autocast, self.training, self[0].max_seq_length))
        return original_forward(self, *args, **kwargs)

    monkeypatch.setattr(SentenceTransformer, "forward", recording_forward)

    data = tmp_path / "data"
    data.mkdir()
    python_rows = [{"query": f"return the {i}th power of x", "positive": f"def power_{i}(x):\n    return x ** {i}",
                    "positive_with_docstring": f'def power_{i}(x):\n    """Power {i}."""\n    return x ** {i}',
                    "source": "stdlib"} for i in range(8)]
    java_rows = [{"query": f"public int f{i}() {{ return {i}; }}", "positive": f"public int F{i}() {{ return {i}; }}"}
                 for i in range(8)]
    for name, rows in (("pairs_python.jsonl", python_rows), ("pairs_java2cs.jsonl", java_rows)):
        (data / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "run"
    load_script("train").main(["--pooling", "pma", "--data", str(data), "--out", str(out), "--steps", "2",
                               "--batch-size", "4", "--java-fraction", "0", "--train-layers", "1", "--bf16",
                               "--save-every", "1", "--max-seq-length", "32", "--warmup", "1"])
    monkeypatch.setattr(SentenceTransformer, "forward", original_forward)
    # model.save runs a forward of its own (model card) in eval mode at 256 tokens, outside autocast.
    training_forwards = [call for call in forwards if call[0] is not None]
    assert training_forwards == [(torch.bfloat16, True, 32)] * 4  # 2 steps x (queries, positives)
    assert all(call == (None, False, 256) for call in forwards if call[0] is None)
    log = json.loads((out / "train_log.json").read_text())
    assert [step["step"] for step in log["steps"]] == [1, 2]
    checkpoint = SentenceTransformer(str(out / "checkpoint-1"), trust_remote_code=True, device="cpu")
    final = SentenceTransformer(str(out), trust_remote_code=True, device="cpu")
    assert final[0].max_seq_length == 256  # saved for evaluation, not at the training length
    before, after = checkpoint.state_dict(), final.state_dict()
    moved = {name for name in before if not torch.equal(before[name], after[name])}
    assert moved and all(".encoder.layer.5." in name or name.startswith("1.") for name in moved), sorted(moved)[:5]
    assert not (out / "checkpoint-2").exists()  # the last step is the final model, not a checkpoint


def test_merge_averages_checkpoints_with_their_weights_then_the_stock_share(tmp_path):
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    from evaluation.baselines import packaged_minilm_folder

    trained_name = "encoder.layer.5.output.dense.weight"
    stock = None
    for offset, name in ((1.0, "checkpoint-1"), (3.0, "run")):  # two "checkpoints" of one run
        backbone = Transformer(str(packaged_minilm_folder()), max_seq_length=32)
        if stock is None:
            stock = {k: v.clone() for k, v in backbone.auto_model.state_dict().items()}
        with torch.no_grad():
            backbone.auto_model.state_dict()[trained_name].add_(offset)
        SentenceTransformer(modules=[backbone, Pooling(384, "mean"), Normalize()], device="cpu").save(str(tmp_path / name))
    merge = load_script("merge")
    merged = merge.merge_with_stock([tmp_path / "checkpoint-1", tmp_path / "run"], stock_weight=0.5,
                                    run_weights=[0.25, 0.75])
    # 0.5 x (0.25 x 1 + 0.75 x 3) + 0.5 x 0 = 1.25 above stock
    torch.testing.assert_close(merged[0].auto_model.state_dict()[trained_name], stock[trained_name] + 1.25)
    with pytest.raises(SystemExit, match="summing to 1"):
        merge.merge_with_stock([tmp_path / "checkpoint-1", tmp_path / "run"], stock_weight=0.5, run_weights=[0.5, 0.6])


def test_best_per_set_takes_each_benchmarks_best_trained_score_and_ignores_stock_and_bm25():
    summarize = load_script("summarize")
    benches = summarize.REPORTED

    def scores(first: float, rest: float) -> dict:
        return {bench: {"ndcg@10": first if i == 0 else rest} for i, bench in enumerate(benches)}

    columns = [("stock MiniLM", scores(0.99, 0.99)), ("bm25", scores(0.98, 0.98)),
               ("a", scores(0.5, 0.7)), ("b", scores(0.6, 0.4))]
    best = summarize.best_per_set(columns, benches)
    assert best[benches[0]]["ndcg@10"] == 0.6 and all(best[b]["ndcg@10"] == 0.7 for b in benches[1:])
    with pytest.raises(SystemExit, match="at least one column"):
        summarize.best_per_set(columns[:2], benches)


def test_summarize_tables_chosen_benchmarks_and_refuses_to_overwrite_a_table_without_results(tmp_path, monkeypatch):
    """The per-run suite outputs are not in git: with none, the committed table must survive, not be emptied."""
    summarize = load_script("summarize")
    monkeypatch.setattr(summarize, "RESULTS", tmp_path)
    (tmp_path / "table.md").write_text("committed")
    with pytest.raises(SystemExit, match="not in git"):
        summarize.main([])
    assert (tmp_path / "table.md").read_text() == "committed"
    (tmp_path / "stock.json").write_text(json.dumps({"cosqa_dev": {"ndcg@10": 0.6}}))
    (tmp_path / "run.json").write_text(json.dumps({"cosqa_dev": {"ndcg@10": 0.5}}))
    summarize.main(["--name", "dev", "--benchmarks", "cosqa_dev", "--columns", "stock MiniLM=stock.json", "run=run.json"])
    table = json.loads((tmp_path / "dev.json").read_text())
    assert table["ndcg@10"] == {"cosqa_dev": {"stock MiniLM": 0.6, "run": 0.5}}
    assert table["verdicts"]["run"]["gain"] == pytest.approx(-0.1)
