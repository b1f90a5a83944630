"""Issue 6 experiment helpers (experiments/minilm): mining, the benchmark-overlap filter, batch sampling.

Cheap: no model is loaded; the benchmark is a two-document folder written here.
"""

import importlib.util
import json
import sys
from pathlib import Path

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
