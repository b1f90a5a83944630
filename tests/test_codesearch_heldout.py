"""The held-out code-search set: its schema, its answers inside the trees, and how the quality harness reads it."""

import json
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from benchmarks.codesearch_heldout import DEFAULT_TREES, HELDOUT_SET, HeldoutSet, load_set, tree_root
from benchmarks.codesearch_quality import is_answer, read_queries

QUERIES_PER_TREE = 10


def committed_set() -> dict:
    return json.loads(HELDOUT_SET.read_text(encoding="utf-8"))


def test_committed_set_is_ten_queries_of_each_kind_mix_per_tree():
    heldout = load_set()
    per_tree = Counter(query.package for query in heldout.queries)
    assert per_tree == {package: QUERIES_PER_TREE for package in heldout.trees}
    for package in heldout.trees:
        kinds = {query.kind for query in heldout.queries if query.package == package}
        assert kinds == {"where", "behaviour", "symbol"}, package
    texts = [query.query for query in heldout.queries]
    assert len(set(texts)) == len(texts)
    assert {tree.language for tree in heldout.trees.values()} == {"go", "rust", "typescript", "java"}


@pytest.mark.parametrize(("change", "message"), [
    (lambda data: data["queries"][0].update(end_line=data["queries"][0]["line"] - 1), "is before line"),
    (lambda data: data["queries"][0].update(package="gson"), "not in `trees`: gson"),
    (lambda data: data["queries"][0].update(lines=[1, 2]), "lines"),
    (lambda data: data["queries"][0].update(line="12"), "line"),
    (lambda data: data["trees"]["zod"]["sources"][0].update(sha256="abc"), "sha256"),
])
def test_a_malformed_set_is_refused_naming_the_field(change, message):
    data = committed_set()
    change(data)
    with pytest.raises(ValidationError, match=message):
        HeldoutSet.model_validate_json(json.dumps(data))


def test_every_answer_lies_inside_its_tree():
    heldout = load_set()
    missing = [tree.folder for tree in heldout.trees.values() if not (DEFAULT_TREES / tree.folder).is_dir()]
    if missing:
        pytest.skip(f"trees not built ({', '.join(missing)}): python -m benchmarks.codesearch_heldout --build")
    for query in heldout.queries:
        source = DEFAULT_TREES / heldout.trees[query.package].folder / query.path
        assert source.is_file(), source
        lines = source.read_text(encoding="utf-8", errors="replace").splitlines()
        assert query.end_line <= len(lines), (query.path, query.end_line, len(lines))
        assert lines[query.line - 1].strip() and lines[query.end_line - 1].strip(), (query.path, query.line)


def test_a_span_answer_is_any_hit_in_its_file_that_overlaps_it():
    expected = {"path": "src/mux.go", "line": 10, "end_line": 20}
    assert is_answer(["src/mux.go"], "func Mux", (20, 30), expected)  # touching the last line overlaps
    assert is_answer(["src/mux.go"], "", (1, 10), expected)
    assert is_answer(["copy/mux.go", "src/mux.go"], "", (12, 14), expected)  # an identical file's path counts
    assert not is_answer(["src/mux.go"], "", (21, 40), expected)
    assert not is_answer(["src/other.go"], "", (10, 20), expected)
    # without end_line, the first line must be covered (the JavaScript/Go set's rule)
    assert not is_answer(["src/mux.go"], "", (12, 14), {"path": "src/mux.go", "line": 10})


def test_the_harness_reads_a_held_out_set_and_a_jsonl_set(tmp_path: Path):
    queries, heldout = read_queries(HELDOUT_SET)
    assert heldout == load_set()
    assert len(queries) == len(heldout.queries)
    assert set(queries[0]) == {"package", "query", "path", "line", "end_line"}
    jsonl = tmp_path / "set.jsonl"
    jsonl.write_text('{"package": "requests", "query": "q", "path": "utils.py", "name": "f"}\n\n')
    assert read_queries(jsonl) == ([{"package": "requests", "query": "q", "path": "utils.py", "name": "f"}], None)


def test_a_tree_is_found_by_its_folder_or_refused_saying_how_to_build_it(tmp_path: Path):
    heldout = load_set()
    (tmp_path / "gin-1.8.1").mkdir()
    assert tree_root(tmp_path, heldout, "gin") == tmp_path / "gin-1.8.1"
    with pytest.raises(SystemExit, match="--build"):
        tree_root(tmp_path, heldout, "zod")
