"""One hit per file listing its places (overlapping windows of one file merge, byte-identical files are listed
once), and what kind of file a hit comes from (source, test, docs, example, generated)."""

import json

import numpy as np
import pytest

from codesearch.__main__ import main
from codesearch.chunking import split_file
from codesearch import ranking
from codesearch.loaded import PATH_WEIGHT, LoadedIndex, PathVectors
from codesearch.quantization import DenseVectors
from codesearch.ranking import (Place, QuerySignals, RankingConfig, group_by_file, merge_places, path_kind, rank,
                                rank_places, rank_rows)
from codesearch.request import SearchRequest
from tests.test_codesearch_index import FakeEmbedder

PATHS = ["a.py", "a.py", "a.py", "b.py", "copy_of_b.py", "a.py"]
LINES = [1, 51, 101, 1, 1, 200]
END_LINES = [60, 110, 160, 9, 9, 220]
TITLES = ["def long", "def long", "def long", "def short", "def short", "def other"]
SAME_CONTENT = {"a.py": "sha-a", "b.py": "sha-b", "copy_of_b.py": "sha-b"}


def loaded(vectors, paths, lines=None, end_lines=None, titles=None, path_vectors=None) -> LoadedIndex:
    """A loaded index of these rows (float32 vectors); each row its own 5-line piece titled by its row unless given."""
    rows = range(len(paths))
    return LoadedIndex(np.arange(len(paths)), DenseVectors.from_float(np.asarray(vectors, np.float32), "float32"),
                       list(paths), lines or [1 for _ in rows], end_lines or [5 for _ in rows],
                       titles or [f"def f{row}" for row in rows], generation=0, path_vectors=path_vectors)


def request(ranking="hybrid", **fields) -> SearchRequest:
    return SearchRequest(query="anything", ranking=ranking, **fields)


def test_overlapping_windows_of_one_file_are_one_place_with_the_best_score_and_all_lines():
    places = merge_places([(1, 0.9), (0, 0.8), (5, 0.7)], PATHS, LINES, END_LINES, TITLES, SAME_CONTENT)
    assert [(p.row, p.score, p.line, p.end_line) for p in places] == [(1, 0.9, 1, 110), (5, 0.7, 200, 220)]


def test_a_window_bridging_two_places_joins_them():
    places = merge_places([(0, 0.9), (2, 0.8), (1, 0.7)], PATHS, LINES, END_LINES, TITLES, SAME_CONTENT)
    assert [(p.row, p.line, p.end_line) for p in places] == [(0, 1, 160)]


def test_windows_of_one_declaration_are_one_place_when_the_window_between_them_did_not_rank():
    """Rows 0 and 2 do not overlap, but row 1 (same file and title) chains them: one declaration, one place."""
    places = merge_places([(2, 0.9), (0, 0.8), (5, 0.7)], PATHS, LINES, END_LINES, TITLES, SAME_CONTENT)
    assert [(p.row, p.score, p.line, p.end_line) for p in places] == [(2, 0.9, 1, 160), (5, 0.7, 200, 220)]


def test_two_declarations_with_one_title_stay_apart_when_no_window_joins_them():
    paths, lines, end_lines, titles = ["c.ts"] * 2, [1, 30], [20, 50], ["Cache: get(key) {"] * 2  # overloads
    places = merge_places([(0, 0.9), (1, 0.8)], paths, lines, end_lines, titles, {})
    assert [p.row for p in places] == [0, 1]


def test_byte_identical_files_are_one_place_naming_the_other_paths():
    places = merge_places([(4, 0.9), (3, 0.9), (0, 0.5)], PATHS, LINES, END_LINES, TITLES, SAME_CONTENT)
    assert [(p.path, p.also) for p in places] == [("copy_of_b.py", ["b.py"]), ("a.py", [])]


def test_same_lines_of_different_files_stay_apart():
    places = merge_places([(3, 0.9), (4, 0.8)], PATHS, LINES, END_LINES, TITLES, {})  # no hashes: files differ
    assert [p.path for p in places] == ["b.py", "copy_of_b.py"]


def test_a_class_piece_and_its_methods_stay_apart():
    """A class piece spans its methods' lines but holds none of their text (they are holes in it)."""
    paths, lines, end_lines, titles = ["c.py"] * 2, [1, 5], [40, 12], ["class Cache", "def Cache.get"]
    places = merge_places([(0, 0.9), (1, 0.8)], paths, lines, end_lines, titles, {})
    assert [p.row for p in places] == [0, 1]


def test_rank_places_reads_deeper_until_top_k_places_are_found():
    """Thirty windows of one function outrank everything else: the second place is found past them."""
    count = 40
    paths = ["long.py"] * 30 + [f"other{i}.py" for i in range(count - 30)]
    lines = [1 + 50 * i for i in range(30)] + [1] * (count - 30)
    end_lines = [60 + 50 * i for i in range(30)] + [5] * (count - 30)
    vectors = np.zeros((count, 2), dtype=np.float32)
    vectors[:30] = [1, 0]
    vectors[30:] = [0.6, 0.8]
    titles = ["def long"] * 30 + [f"def other{i}" for i in range(count - 30)]
    index = loaded(vectors, paths, lines, end_lines, titles)
    places = rank_places(request("dense", tests="keep"), index, QuerySignals(np.array([1, 0], np.float32)), 3)
    assert [p.path for p in places] == ["long.py", "other0.py", "other1.py"]
    assert (places[0].line, places[0].end_line) == (1, lines[29] + 59)


def test_rank_takes_the_files_coherence_and_place_order_from_its_config():
    """One lone place against a file of three: the file's other places lift it by the config's file_coherence."""
    paths = ["lone.py", "rich.py", "rich.py", "rich.py"]
    index = loaded(np.ones((4, 1)), paths, lines=[1, 1, 20, 40], end_lines=[5, 5, 24, 60])
    signals, plain = QuerySignals(np.ones(1), np.array([1.0, 1.0, 0.9, 0.8])), request("bm25", top_k=2)
    assert [group[0].path for group in rank(plain, index, signals, RankingConfig(file_coherence=0.0))] == [
        "lone.py", "rich.py"]  # a tie: the lower row first
    files = rank(plain, index, signals)  # the product's coherence lifts the file of three
    assert [group[0].path for group in files] == ["rich.py", "lone.py"]
    by_length = rank(plain, index, signals, RankingConfig(place_order=ranking.PlaceOrder(length_weight=1.0)))
    assert [place.line for place in by_length[0]] == [40, 1, 20]  # the long place first
    by_score = rank(plain, index, signals, RankingConfig(place_order=ranking.PlaceOrder(length_weight=0.0)))
    assert [place.line for place in by_score[0]] == [1, 20, 40]


@pytest.mark.parametrize("fields, message", [({"dense_weight": 1.5}, "from 0 \\(BM25 alone\\) to 1"),
                                             ({"file_coherence": -0.1}, "pass 0"),
                                             ({"priors": frozenset({"names"})}, "pass some of definitions, file")])
def test_a_ranking_config_out_of_range_is_refused_with_the_fix(fields, message):
    with pytest.raises(ValueError, match=message):
        RankingConfig(**fields)


@pytest.mark.parametrize("kind, signals, message", [("dense", QuerySignals(bm25=np.ones(2)), "QuerySignals\\(vector"),
                                                    ("hybrid", QuerySignals(np.ones(1)), "QuerySignals\\(bm25")])
def test_a_ranking_without_the_signal_it_reads_says_which_to_pass(kind, signals, message):
    with pytest.raises(ValueError, match=message):
        rank(request(kind), loaded(np.ones((2, 1)), ["a.py", "b.py"]), signals)


def place(path: str, score: float, line: int = 1) -> Place:
    return Place(row=0, score=score, path=path, line=line, end_line=line + 5)


def test_a_file_is_one_hit_listing_its_places_best_first():
    places = [place("a.py", 0.9, 10), place("b.py", 0.8), place("a.py", 0.7, 40), place("c.py", 0.6)]
    files = group_by_file(places, top_k=2, coherence=0.0)
    assert [[(p.path, p.line) for p in group] for group in files] == [[("a.py", 10), ("a.py", 40)], [("b.py", 1)]]


def test_a_file_with_several_good_places_outranks_one_lone_place_of_equal_score(monkeypatch):
    places = [place("lone.py", 1.0), place("rich.py", 1.0), place("rich.py", 0.9, 20), place("rich.py", 0.8, 40)]
    assert [group[0].path for group in group_by_file(places, 2, coherence=0.0)] == ["lone.py", "rich.py"]
    # rich.py: 1.0 + 0.1 x 1.0 x 2.7 / 2.7; lone.py: 1.0 + 0.1 x 1.0 x 1.0 / 2.7
    assert [group[0].path for group in group_by_file(places, 2, coherence=0.1)] == ["rich.py", "lone.py"]
    monkeypatch.setattr(ranking, "PLACES_PER_FILE", 2)
    assert len(group_by_file(places, 2, coherence=0.1)[0]) == 2  # a file lists at most PLACES_PER_FILE places


def test_a_licence_or_import_block_is_never_a_files_first_place_when_the_file_has_another():
    titles = ["// Copyright(c) 2016 Gabi Melman.", "void logger::flush_()", "* Licensed to the Apache Software "
              "Foundation (ASF) under one", "package org.apache.commons.lang3;", "class StringUtils"]
    paths = ["logger.cpp", "logger.cpp", "only_licence.java", "StringUtils.java", "StringUtils.java"]
    rows = [(0, 0.9), (2, 0.85), (3, 0.8), (1, 0.3), (4, 0.2)]  # each header scores above its file's code
    places = merge_places(rows, paths, [1, 20, 1, 18, 30], [12, 40, 16, 18, 60], titles, {})
    assert [place.header for place in places] == [True, True, True, False, False]
    files = group_by_file(places, top_k=3, coherence=0.0)
    assert [[titles[place.row] for place in group] for group in files] == [
        ["void logger::flush_()", "// Copyright(c) 2016 Gabi Melman."],  # the file still ranks by its header's score
        [titles[2]],  # a file that is only its header keeps it
        ["class StringUtils", "package org.apache.commons.lang3;"]]


def test_a_long_place_comes_before_a_short_neighbour_the_query_reaches_about_as_well():
    getter, builder = place("Cache.java", 1.0, 10), place("Cache.java", 0.5, 12)
    evict = Place(row=0, score=0.9, path="Cache.java", line=40, end_line=79)  # 40 lines against 6
    other = place("Other.java", 0.95)
    files = group_by_file([getter, other, evict, builder], top_k=2, coherence=0.0)
    assert [group[0].path for group in files] == ["Cache.java", "Other.java"]  # files still rank by their best place
    assert files[0] == [evict, getter, builder]
    # the length tips places the query reaches about equally, never a far better one
    assert group_by_file([getter, evict], 1, 0.0, ranking.PlaceOrder(length_weight=0.0))[0] == [getter, evict]
    far_better = place("Cache.java", 3.0, 10)
    assert group_by_file([far_better, evict], 1, 0.0)[0] == [far_better, evict]


def test_a_member_the_model_prefers_comes_before_a_class_piece_that_repeats_the_querys_words():
    """BM25 lifts the class piece (it repeats the query's words), dense prefers the method: the product's order
    weighs the method's own dense score beside its fused one (PlaceOrder.dense_share)."""
    paths, lines, end_lines = ["Jsoup.java", "Jsoup.java", "Other.java"], [10, 40, 1], [16, 46, 5]
    titles = ["public class Jsoup {", "Jsoup: public static Connection connect(String url) {", "class Other {"]
    index = loaded([[0.7, 0.714], [0.95, 0.312], [0.0, 1.0]], paths, lines, end_lines, titles)
    signals = QuerySignals(np.array([1.0, 0.0], np.float32), np.array([9.0, 1.0, 0.0]))
    by_fused = RankingConfig(place_order=ranking.PlaceOrder(dense_share=0.0, title_weight=0.0))
    assert [place.line for place in rank(request(), index, signals, by_fused)[0]] == [10, 40]
    files = rank(request(), index, signals)
    assert [place.line for place in files[0]] == [40, 10]
    assert [place.dense for place in files[0]] == pytest.approx([0.95, 0.7])
    bm25_only = rank(request("bm25"), index, signals)[0]  # no query vector read: the order has no dense score
    assert [place.dense for place in bm25_only] == [None, None] and [p.line for p in bm25_only] == [10, 40]


def test_a_query_scores_the_rows_dense_once_for_their_ranking_and_their_order(monkeypatch):
    """The place order's dense share reads the scores the ranking computed, not a second pass over every row."""
    paths, lines, end_lines = ["Jsoup.java", "Jsoup.java", "Other.java"], [10, 40, 1], [16, 46, 5]
    titles = ["public class Jsoup {", "Jsoup: public static Connection connect(String url) {", "class Other {"]
    index = loaded([[0.7, 0.714], [0.95, 0.312], [0.0, 1.0]], paths, lines, end_lines, titles)
    passes = []
    scores_of = type(index).dense_scores
    monkeypatch.setattr(type(index), "dense_scores", lambda self, *args: passes.append(args) or scores_of(self, *args))
    signals = QuerySignals(np.array([1.0, 0.0], np.float32), np.array([9.0, 1.0, 0.0]))
    for kind in ("hybrid", "dense"):
        passes.clear()
        assert [place.line for place in rank(request(kind), index, signals)[0]] == [40, 10]
        assert len(passes) == 1, kind


def test_of_two_neighbours_the_one_whose_name_the_query_describes_comes_first():
    paths, lines, end_lines = ["StringUtil.java"] * 2, [173, 273], [182, 282]
    titles = ["StringUtil: public static boolean isNumeric(String string) {",
              "StringUtil: public static boolean isAscii(String string) {"]
    index = loaded(np.ones((2, 1)), paths, lines, end_lines, titles)
    ask = SearchRequest(query="Tests that a String contains only ASCII characters.", ranking="bm25")
    signals = QuerySignals(bm25=np.array([1.05, 1.0]))  # lengths equal: the scores alone put isNumeric first
    untitled = RankingConfig(place_order=ranking.PlaceOrder(title_weight=0.0))
    assert [place.line for place in rank(ask, index, signals, untitled)[0]] == [173, 273]
    files = rank(ask, index, signals)
    assert [place.line for place in files[0]] == [273, 173]
    # "string" and "ascii" of 7 declaration words, "string" of 7 (the owner "StringUtil: " is not counted)
    assert [place.title_match for place in files[0]] == pytest.approx([2 / 7, 1 / 7])


@pytest.mark.parametrize("fields, message", [({"dense_share": 1.5}, "from 0 \\(the fused score alone\\) to 1"),
                                             ({"title_weight": -1.0}, "pass 0 \\(titles ignored\\)"),
                                             ({"length_weight": float("nan")}, "pass 0 \\(places by score")])
def test_a_place_order_out_of_range_is_refused_with_the_fix(fields, message):
    with pytest.raises(ValueError, match=message):
        ranking.PlaceOrder(**fields)


def long_function(lines: int) -> str:
    body = "".join(f"    value_{i} = parse_config_entry(value_{i - 1})\n" for i in range(1, lines))
    return f"def parse_config_entries(value_0):\n{body}    return value_0\n"


def test_the_command_prints_one_hit_per_place_of_one_file(tmp_path, capsys):
    root = tmp_path / "project"
    (root / "vendored").mkdir(parents=True)
    (root / "long.py").write_text(long_function(150))
    source = "def read_settings(path):\n    return open(path).read()\n"
    (root / "settings.py").write_text(source)
    (root / "vendored" / "settings.py").write_text(source)
    assert len(split_file("long.py", long_function(150))) == 3  # overlapping windows of one function
    code = main(["parse config entry value read settings", "--path", str(root), "--index-dir",
                 str(tmp_path / "index"), "--json", "--ranking", "bm25"], embedder=FakeEmbedder())
    hits = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [(hit["path"], hit["line"], hit["end_line"]) for hit in hits] == [("long.py", 1, 151),
                                                                            ("settings.py", 1, 2)]
    assert hits[0]["also"] == [] and hits[1]["also"] == ["vendored/settings.py"]
    assert hits[0]["more"] == [] and hits[1]["more"] == []
    main(["read settings", "--path", str(root), "--index-dir", str(tmp_path / "index")], embedder=FakeEmbedder())
    out = capsys.readouterr().out
    assert "settings.py:1-2  def read_settings\n" in out and "(identical: vendored/settings.py)" in out


@pytest.mark.parametrize("path, kind", [
    ("src/click/core.py", "source"), ("lib/server.js", "source"), ("docs/conf.py", "docs"), ("README.md", "docs"),
    ("doc/guide.rst", "docs"), ("examples/basic/app.py", "example"), ("demos/run.go", "example"),
    ("_examples/rest/main.go", "example"), ("api/service_pb2.py", "generated"), ("web/app.min.js", "generated"),
    ("pkg/zz_generated.deepcopy.go", "generated"),
    ("pkg/types_generated.go", "generated"), ("tests/test_core.py", "test"), ("docs/tests/test_x.py", "test"),
    ("examples/gen/api_pb2.py", "generated"), ("src/documented.py", "source"), ("src/example_utils.py", "source"),
    # JavaScript/TypeScript tests beside their code or in Jest's folder; test classes of the JVM, Swift and C#
    ("src/router.test.ts", "test"), ("lib/widget.spec.js", "test"), ("src/__tests__/helpers.ts", "test"),
    ("lib/user_spec.rb", "test"), ("src/main/java/WidgetTest.java", "test"), ("Sources/RouterTests.swift", "test"),
    ("core/ParserSpec.scala", "test"), ("src/contest.ts", "source"), ("lib/inspect.rb", "source"),
    ("src/Test.java", "source"), ("src/Manifest.java", "source"), ("src/latest.go", "source"),
])
def test_path_kinds(path, kind):
    assert path_kind(path) == kind


@pytest.mark.parametrize("ranking", ["dense", "bm25", "hybrid"])
def test_non_code_demotion_lets_source_win_a_tie(ranking):
    """Three pieces as good as one another: with the demotion, source comes first, whatever the row order."""
    paths = ["docs/conf.py", "examples/app.py", "src/app.py"]
    vectors = np.tile(np.array([[1, 0]], np.float32), (3, 1))
    bm25 = np.ones(3)
    signals = QuerySignals(np.array([1, 0], np.float32), bm25)
    kept = rank_rows(request(ranking, tests="keep", non_code="keep"), loaded(vectors, paths), signals, 3)
    demoted = rank_rows(request(ranking, tests="keep", non_code="demote"), loaded(vectors, paths), signals, 3)
    assert [paths[row] for row, _ in kept][0] == "docs/conf.py"  # ties: the lower row first
    assert [paths[row] for row, _ in demoted] == ["src/app.py", "docs/conf.py", "examples/app.py"]


def test_the_command_lists_a_files_other_places_under_its_hit(tmp_path, capsys):
    root = tmp_path / "project"
    root.mkdir()
    (root / "config.py").write_text("def read_config(path):\n    return path\n\n\n"
                                    "def write_config(path, config):\n    return path, config\n")
    (root / "other.py").write_text("def unrelated(value):\n    return value\n")
    argv = ["config path", "--path", str(root), "--index-dir", str(tmp_path / "index"), "--ranking", "bm25"]
    assert main([*argv, "--json"], embedder=FakeEmbedder()) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [hit["path"] for hit in hits] == ["config.py"]  # one hit for the file, not one per function
    assert {hits[0]["title"], *(place["title"] for place in hits[0]["more"])} == {"def read_config",
                                                                                 "def write_config"}
    main(argv, embedder=FakeEmbedder())
    other = hits[0]["more"][0]
    assert f"also {other['score']:.3f}  :{other['line']}-{other['end_line']}  {other['title']}\n" in (
        capsys.readouterr().out)



def test_the_text_output_prints_every_place_a_file_hit_lists(tmp_path, capsys):
    root = tmp_path / "project"
    root.mkdir()
    (root / "config.py").write_text("".join(f"def read_config_{number}(path):\n    return path\n\n\n"
                                            for number in range(ranking.PLACES_PER_FILE + 2)))
    argv = ["read config path", "--path", str(root), "--index-dir", str(tmp_path / "index"), "--ranking", "bm25"]
    assert main([*argv, "--json"], embedder=FakeEmbedder()) == 0
    hits = json.loads(capsys.readouterr().out)
    assert len(hits[0]["more"]) == ranking.PLACES_PER_FILE - 1  # the JSON lists PLACES_PER_FILE places a file
    assert main(argv, embedder=FakeEmbedder()) == 0
    printed = [line.split("  :", 1)[1] for line in capsys.readouterr().out.splitlines()
               if line.lstrip().startswith("also ")]
    assert printed == [f"{place['line']}-{place['end_line']}  {place['title']}" for place in hits[0]["more"]]

def test_the_dense_weight_shares_the_fused_score():
    dense, bm25 = np.array([0.875, 0.5, 0.125]), np.array([0.0, 4.0, 8.0])  # disagree; exact in float32
    assert np.argmax(ranking.fuse(dense, bm25, dense_weight=1.0)) == 0  # dense alone
    assert np.argmax(ranking.fuse(dense, bm25, dense_weight=0.0)) == 2  # BM25 alone
    paths = ["a.py", "b.py", "c.py"]
    rows, signals = loaded(dense[:, None], paths), QuerySignals(np.array([1.0]), bm25)
    default = ranking.list_scores(request(), rows, signals, 10)
    assert np.array_equal(default, ranking.fuse(dense, bm25, ranking.DENSE_WEIGHT))
    assert np.array_equal(ranking.list_scores(request(), rows, signals, 10, RankingConfig(dense_weight=0.0)),
                          ranking.fuse(dense, bm25, 0.0))


def test_fusion_keeps_an_answer_only_dense_ranks_high():
    """Dense ranks row 0 first by a clear margin, BM25 85th; row 1 is 20th in both lists. Reciprocal rank fusion
    (1/61 + 1/145 < 2/80) put row 1 first; the fused scores keep dense's strong evidence."""
    n = 200
    dense = np.linspace(0.6, 0.2, n)  # row order is dense's order, apart from the two rows below
    bm25 = np.linspace(20.0, 1.0, n)
    dense[[0, 1, 19]], bm25[[0, 1, 84]] = [0.9, dense[19], dense[1]], [bm25[84], bm25[19], bm25[0]]
    bm25[[19]] = bm25[1]
    fused = ranking.fuse(dense, bm25)
    assert fused[0] > fused[1] > 0
    assert ranking.fuse(np.array([0.5, 0.1]), np.array([0.0, 0.0]))[1] > 0  # dense's last row is still found
    assert ranking.fuse(np.linspace(1, 0, 300), np.zeros(300))[-1] == 0  # below both lists' depth: not found


def test_a_files_import_header_ranks_below_the_code_of_other_files():
    paths = ["middleware/maybe.go", "middleware/maybe.go", "middleware/redirect.go", "core.h"]
    titles = ["package middleware", "func Maybe(mw func(http.Handler) http.Handler) {", "func Redirect(code int) {",
              '#include "base.h"']
    bm25 = np.array([4.0, 1.0, 3.0, 2.0])  # a short header matches a folder's word best
    plain = request("bm25", tests="keep", non_code="keep")
    scores = ranking.adjusted(bm25, plain, paths, titles)
    assert scores.tolist() == [4.0 * ranking.HEADER_WEIGHT, 1.0, 3.0, 2.0]  # a header-only file keeps its score
    assert bm25.tolist() == [4.0, 1.0, 3.0, 2.0]  # the caller's scores are left as they were
    titled = ["def maybe", "def other", "def redirect", "def core"]
    assert ranking.adjusted(bm25, plain, paths, titled).tolist() == bm25.tolist()  # no header


def test_a_file_path_like_the_query_lifts_the_dense_score_of_its_pieces():
    pieces = np.array([[1, 0, 0], [1, 0, 0], [1, 0, 0]], np.float32)  # three pieces the model scores alike
    query = np.array([0.8, 0.6, 0.0], np.float32)
    paths = ["middleware/cors.go", "util/strings.go", "new/file.go"]
    path_vectors = PathVectors.of_rows(paths, {"middleware/cors.go": np.array([0, 1, 0], np.float32),
                                               "util/strings.go": np.array([0, 0, 1], np.float32)})
    assert path_vectors.row_files.tolist() == [0, 1, 2]
    # a path cosine of 0.6 for the first file, 0 for the second; the third has no path vector: no path term
    assert loaded(pieces, paths, path_vectors=path_vectors).dense_scores(query, 3) == pytest.approx(
        [0.8 + PATH_WEIGHT * 0.6, 0.8, 0.8])
    assert loaded(pieces, paths).dense_scores(query, 3).tolist() == pytest.approx([0.8, 0.8, 0.8])
    # in every ranking that reads dense scores, through the places
    reversed_paths = list(reversed(paths))
    index = loaded(pieces, reversed_paths, path_vectors=PathVectors.of_rows(
        reversed_paths, {"middleware/cors.go": np.array([0, 1, 0], np.float32)}))
    for kind in ("dense", "hybrid"):
        places = rank_places(request(kind, tests="keep"), index, QuerySignals(query, np.zeros(3)), 3)
        assert places[0].path == "middleware/cors.go"
    assert PathVectors.of_rows(paths, {}) is None  # nothing known: no path term at all


def test_a_folder_search_takes_every_default_from_the_request(tmp_path):
    """One default per option: FolderSearch.search ranks as the command and the MCP tool do (non-code demoted)."""
    from codesearch.searcher import FolderSearch, IndexOptions

    root = tmp_path / "project"
    (root / "docs").mkdir(parents=True)
    docs = "def parse_config(path):\n    # parse the config: parse it\n    return path\n"  # more of the query's words
    (root / "docs" / "conf.py").write_text(docs)
    (root / "app.py").write_text("def parse_config(path):\n    return path\n")
    folder = FolderSearch(root, IndexOptions(index_dir=tmp_path / "index", quiet=True), FakeEmbedder())
    try:
        kept = folder.search(SearchRequest(query="parse config", ranking="bm25", non_code="keep"))
        assert [hit["path"] for hit in kept] == ["docs/conf.py", "app.py"]
        default = folder.search(SearchRequest(query="parse config", ranking="bm25"))
        assert [hit["path"] for hit in default] == ["app.py", "docs/conf.py"]
    finally:
        folder.close()
