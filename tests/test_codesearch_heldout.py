"""The held-out code-search set: its schema, its answers inside the trees, and how the quality harness reads it."""

import json
import shutil
import tarfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from benchmarks import codesearch_heldout as heldout_module
from benchmarks.codesearch_heldout import DEFAULT_TREES, HELDOUT_SET, HeldoutSet, load_set, tree_root
from benchmarks.codesearch_quality import counted_places, is_answer, ndcg_at_k, raw_rank, read_queries

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


def test_first_place_counts_a_file_hit_only_when_its_first_place_is_the_answer():
    expected = {"path": "mux.go", "line": 100, "end_line": 105}
    hit = [(0, ["mux.go"], (21, 48)), (1, ["mux.go"], (100, 105))]  # the struct first, the answer listed second

    def answered(hits: str) -> bool:
        return any(is_answer(paths, "", lines, expected) for _, paths, lines in counted_places(hit, hits))

    assert answered("files") and not answered("first-place")
    assert ndcg_at_k([1, 3, None]) == pytest.approx((1 + 0.5) / 3)  # 1/log2(1 + 1), 1/log2(3 + 1), 0


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


def packed(folder: Path, archive: Path) -> Path:
    """`folder`'s contents as a gzipped tarball at `archive`, as npm packs a package."""
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    return archive


def fake_npm_pack(monkeypatch, archive: Path) -> None:
    """`npm pack` that leaves a copy of `archive` in the folder it runs in, and is found on PATH."""
    monkeypatch.setattr(heldout_module.shutil, "which", lambda client: f"/usr/bin/{client}")
    monkeypatch.setattr(heldout_module.subprocess, "run",
                        lambda command, cwd, **_: shutil.copy(archive, Path(cwd) / "pkg-1.0.0.tgz"))


def a_set(sources: list[dict]) -> HeldoutSet:
    data = committed_set()
    return HeldoutSet.model_validate({**data, "trees": {"gin": {**data["trees"]["gin"], "sources": sources}},
                                      "queries": [q for q in data["queries"] if q["package"] == "gin"]})


def test_build_takes_a_folder_and_a_packed_tarball_and_replaces_nothing(tmp_path: Path, monkeypatch):
    package = tmp_path / "package"
    (package / "package" / "src").mkdir(parents=True)
    (package / "package" / "src" / "index.ts").write_text("export const a = 1;\n")
    (package / "package" / "README.md").write_text("not taken\n")
    inner = tmp_path / "inner"
    (inner / "lib").mkdir(parents=True)
    (inner / "lib" / "Main.java").write_text("class Main {}\n")
    packed(inner, package / "package" / "sources.tar.gz")
    archive = packed(package, tmp_path / "pkg.tgz")
    fake_npm_pack(monkeypatch, archive)
    digest = heldout_module.sha256_of(archive)
    source = {"registry": "npm", "name": "pkg", "version": "1.0.0", "sha256": digest}
    heldout = a_set([{**source, "take": "package/src", "into": "src"}, {**source, "take": "package/sources.tar.gz"}])
    trees = tmp_path / "trees"
    heldout_module.build(trees, heldout)
    tree = trees / "gin-1.8.1"
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()) == [
        "lib/Main.java", "src/index.ts"]
    assert [p.name for p in trees.iterdir()] == ["gin-1.8.1"]  # no temporary folder left
    (tree / "src" / "index.ts").write_text("kept\n")
    heldout_module.build(trees, heldout)  # a tree already there is kept as it is
    assert (tree / "src" / "index.ts").read_text() == "kept\n"


def test_build_refuses_an_archive_whose_sha256_differs_leaving_no_tree(tmp_path: Path, monkeypatch):
    (tmp_path / "package" / "package").mkdir(parents=True)
    fake_npm_pack(monkeypatch, packed(tmp_path / "package", tmp_path / "pkg.tgz"))
    heldout = a_set([{"registry": "npm", "name": "pkg", "version": "1.0.0", "sha256": "0" * 64, "take": "package"}])
    with pytest.raises(SystemExit, match="is not the pinned 0000"):
        heldout_module.build(tmp_path / "trees", heldout)
    assert list((tmp_path / "trees").iterdir()) == []


def test_build_without_the_registry_client_says_so_before_any_download(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(heldout_module.shutil, "which", lambda client: None)
    with pytest.raises(SystemExit, match="apt-get, npm not found"):
        heldout_module.build(tmp_path / "trees", load_set())
    assert not (tmp_path / "trees").exists()


def test_the_raw_rank_is_that_of_the_best_answer_piece_ties_in_its_favour():
    scores = np.array([0.1, 0.9, 0.5, 0.9])
    assert raw_rank(scores, [2]) == 3
    assert raw_rank(scores, [0, 2]) == 3  # the better of two answer pieces
    assert raw_rank(scores, [3]) == 1  # a piece scoring as high is not ahead of it


@pytest.mark.parametrize("argv, message", [
    (["--length-weight", "-1"], "--length-weight must be 0 or more"),
    (["--length-weight", "nan"], "--length-weight must be 0 or more"),
    (["--repo", "gin"], "invalid choice: 'gin'"),  # a test-half repository: the order is never chosen there
    (["--half", "test", "--length-weight", "0"], "--half test reports the default order only"),
    (["--dense-share", "1.5"], "--dense-share must be from 0"),
    (["--title-weight", "-1"], "--title-weight must be 0 or more"),
    (["--half", "test", "--dense-share", "0.3"], "sweep other values of --dense-share with --half dev"),
    (["--half", "test", "--repo", "chi"], "the test half is reported whole"),
    (["--package-trees", "trees"], "give --package-trees and --package-index-root together"),
])
def test_the_place_order_sweep_refuses_a_bad_weight_or_a_test_repository_before_any_work(argv, message, tmp_path,
                                                                                          capsys):
    from benchmarks.codesearch_place_order import main as place_order

    with pytest.raises(SystemExit):
        place_order(["--work-dir", str(tmp_path), *argv])
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_the_place_order_sweep_refuses_an_unbuilt_package_set_before_any_work(tmp_path):
    from benchmarks.codesearch_place_order import main as place_order

    with pytest.raises(SystemExit, match="holds no finished build"):
        place_order(["--work-dir", str(tmp_path / "work"), "--package-trees", str(tmp_path / "trees"),
                     "--package-index-root", str(tmp_path / "index")])
    assert not any(tmp_path.iterdir())


def test_a_package_query_counts_its_first_place_or_its_first_n_places_and_what_showing_them_costs():
    from benchmarks.codesearch_place_order import SNIPPET_LINES, package_scorer, shown_costs
    from codesearch.ranking import Place

    def place(path: str, line: int, end_line: int) -> Place:
        return Place(row=0, score=1.0, path=path, line=line, end_line=end_line)

    query = {"path": "a.go", "line": 10, "end_line": 20}
    groups = [[place("b.go", 1, 5)],
              [place("a.go", 30, 39), place("a.go", 40, 49), place("a.go", 12, 18)],  # the answer third
              [place("c.go", 1, 10)]]
    scores = package_scorer(query)(groups)
    assert scores["place"] == 0.0  # no hit opens on the answer
    assert (scores["listed@2"], scores["listed@3"], scores["listed_places"]) == (0.0, 0.5, 0.5)
    assert scores["file"] == 0.5
    groups[1].insert(0, groups[1].pop())  # the answer first in its file
    assert package_scorer(query)(groups)["place"] == 0.5
    costs = shown_costs(groups)
    assert costs["code_lines@1"] == 5 + 7 + 10 and costs["code_lines@2"] == costs["code_lines@1"] + 10
    assert costs["output_lines@1"] == 3 * (1 + SNIPPET_LINES)  # a hit's line and its snippet each
    assert costs["output_lines@3"] == costs["output_lines@1"] + 2  # one line per further place listed


def test_the_places_shown_are_the_fewest_after_which_one_more_gains_too_little():
    from benchmarks.codesearch_place_order import PLACE_GAIN, SHOWN, listed_key, places_shown

    listed = (0.50, 0.60, 0.65, 0.65 + PLACE_GAIN / 2, 0.70, 0.70, 0.71, 0.71, 0.71, 0.71)
    figures = {listed_key(n): value for n, value in zip(SHOWN, listed, strict=True)}
    figures |= {f"{cost}@{n}": float(n) for n in SHOWN for cost in ("output_lines", "code_lines")}
    table, chosen = places_shown({"semble": figures, "packages": figures})
    assert chosen == 3  # 3 -> 4 gains less than PLACE_GAIN, though 4 -> 5 would gain more
    assert table[2]["mean_listed"] == pytest.approx(0.60) and table[2]["packages"]["code_lines"] == 2.0


def test_the_place_order_sweep_scores_every_combination_and_its_table_shows_the_best_and_the_length_family():
    from argparse import Namespace

    from benchmarks.codesearch_place_order import SWEEP_ROWS, label, swept_orders, table_place_order_sweep
    from codesearch.ranking import PlaceOrder

    asked = Namespace(half="dev", length_weight=[0.5, 0.0], dense_share=None, title_weight=[1.0])
    orders = swept_orders(asked)
    assert {(o.length_weight, o.title_weight) for o in orders} == {(0.0, 1.0), (0.5, 1.0)}
    assert len({o.dense_share for o in orders}) > 1  # the dense shares not given: the dev sweep's
    assert swept_orders(Namespace(half="test", length_weight=None, dense_share=None, title_weight=None)) == [
        PlaceOrder()]  # the test half: the default order alone

    grid = [PlaceOrder(length, share, title) for length in (0.0, 0.5) for share in (0.0, 0.5) for title in
            (0.0, 1.0, 2.0, 3.0)]  # 16 orders, 2 of them by score and length alone
    criterion = {label(order): 0.1 + order.dense_share + order.title_weight / 10 for order in grid}
    figures = {"place": 0.5, "place_rr": 0.5, "file": 0.8}
    metrics = {"criterion_by_order": criterion, "default": label(PlaceOrder(0.5, 0.0, 0.0)),
               "best_by_criterion": max(criterion, key=criterion.get),
               "order_fields": {label(order): {"length_weight": order.length_weight, "dense_share":
                                               order.dense_share, "title_weight": order.title_weight}
                                for order in grid},
               "orders": {label(order): {"semble": figures, "packages": figures} for order in grid}}
    rows = table_place_order_sweep({"metrics": metrics}).splitlines()[2:]
    assert len(rows) == SWEEP_ROWS + 2  # the best, then the two orders by score and length alone below them
    assert rows[0].startswith("| **0** | **0.5** | **3** |")  # the best first, in bold
    assert "0 (default when run)" in rows[-1] or "0 (default when run)" in rows[-2]
