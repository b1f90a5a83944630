"""The semble benchmark harness: semble's own score (hand-computed NDCG@10, path and span matching), the place level
on the project's span annotations, the fixed dev/test split, and tiny runs."""

import importlib.util
import json
import math
import shutil
from dataclasses import replace

import pytest

from benchmarks.codesearch_semble import (DEV_REPOS, TEST_REPOS, Query, Target, infer_category, main, ndcg_at_k,
                                          score_query, split_by_language, target_ranks)
from benchmarks.codesearch_semble import codesearch_semble_places


def test_ndcg_by_hand():
    # targets found at ranks 1 and 3 of 2 present: (1 + 1/log2(4)) / (1 + 1/log2(3))
    assert ndcg_at_k([1, 3], present=2) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))
    assert ndcg_at_k([2], present=1) == pytest.approx(1 / math.log2(3))
    assert ndcg_at_k([11], present=1) == 0.0  # below the top 10
    assert ndcg_at_k([], present=0) == 0.0  # nothing findable: semble counts the query as 0
    # two targets found by one hit count once; the ideal is capped at 10 hits
    assert ndcg_at_k([1, 1], present=2) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(list(range(1, 11)), present=30) == pytest.approx(1.0)


def test_paths_and_spans_match_as_semble_matches_them():
    target = Target("src/mux.go", ((10, 20),))
    assert target.matches("src/mux.go", 20, 30)  # touching the last line overlaps
    assert target.matches("vendor/src/mux.go", 1, 10)  # a path ending with "/" + the target's
    assert not target.matches("src/xmux.go", 10, 20)  # a suffix that is not a whole path component
    assert not target.matches("src/mux.go", 21, 40)
    assert Target("mux.go").matches("mux.go", 500, 900)  # no span: the file is enough
    hits = [("a.go", [(1, 5)]), ("src/mux.go", [(1, 5)]), ("vendor/src/mux.go", [(12, 14)])]
    assert target_ranks(hits, (target, Target("a.go"), Target("gone.go"))) == [3, 1]
    # a hit is a file with its places: any place overlapping the span counts, at the file's rank
    assert target_ranks([("a.go", [(1, 5)]), ("src/mux.go", [(1, 5), (15, 16)])], (target,)) == [2]


# semble's 31 annotated repositories and their languages (its benchmarks/repos.json)
ANNOTATED = {"bash-it": "bash", "libuv": "c", "fmtlib": "cpp", "nlohmann-json": "cpp", "messagepack-csharp": "csharp",
             "ecto": "elixir", "phoenix": "elixir", "chi": "go", "cobra": "go", "gin": "go", "commons-lang": "java",
             "gson": "java", "express": "javascript", "exposed": "kotlin", "kotlinx-coroutines": "kotlin",
             "ktor": "kotlin", "aiohttp": "python", "fastapi": "python", "model2vec": "python",
             "pydantic": "python", "rack": "ruby", "sinatra": "ruby", "axum": "rust", "serde": "rust",
             "tokio": "rust", "cats": "scala", "circe": "scala", "alamofire": "swift", "trpc": "typescript",
             "vitest": "typescript", "zod": "typescript"}


def test_the_fixed_split_follows_its_rule_on_the_annotated_repositories():
    assert len(ANNOTATED) == 31
    assert split_by_language(ANNOTATED) == {"dev": DEV_REPOS, "test": TEST_REPOS}
    assert DEV_REPOS == {"aiohttp", "fastapi", "axum", "cats", "chi", "commons-lang", "ecto", "exposed", "fmtlib",
                         "rack", "trpc"}
    # one repository of a language: test only; three: one dev, two test
    assert split_by_language({"a": "zig"}) == {"dev": set(), "test": {"a"}}
    assert split_by_language({"c": "go", "a": "go", "b": "go"}) == {"dev": {"a"}, "test": {"b", "c"}}


def test_a_place_matches_by_the_first_place_of_a_file_hit():
    query = Query("gin", "go", "route", (Target("a.go"),), "semantic",
                  places=(Target("a.go", ((10, 20),)), Target("b.go")))
    # a.go's best place (1-5) misses its span, a later place (12-14) overlaps it; b.go has no span: its file matches
    hits = [("a.go", [(1, 5), (12, 14)]), ("c.go", [(1, 2)]), ("b.go", [(3, 4)])]
    scores = score_query(query, hits, lambda target: True, "best-place")
    ideal = 1 + 1 / math.log2(3)
    assert scores["file"] == 1.0  # semble's target is the file a.go, found first
    assert scores["place"] == pytest.approx((1 / math.log2(4)) / ideal)  # only b.go, at rank 3
    assert scores["place_rr"] == pytest.approx(1 / 3)
    assert scores["listed_places"] == pytest.approx((1 + 1 / math.log2(4)) / ideal)  # a.go's listed place counts
    # not annotated: semble's file level only
    assert score_query(replace(query, places=None), hits, lambda target: True, "best-place") == {"file": 1.0}
    # a target the index does not hold is out of the ideal
    assert score_query(query, hits, lambda target: target.path == "b.go", "best-place")["place"] == pytest.approx(
        1 / math.log2(4))


def test_categories_default_as_semble_infers_them():
    assert infer_category("ServeHTTP") == "symbol"
    assert infer_category("How does routing work") == "architecture"
    assert infer_category("parse a header") == "semantic"


def write_benchmark(folder):
    (folder / "annotations").mkdir(parents=True)
    (folder / "spans").mkdir()  # none of its queries annotated with places
    (folder / "repos" / "gin" / "pkg").mkdir(parents=True)
    (folder / "repos.json").write_text(json.dumps([
        {"name": "gin", "language": "python", "url": "", "revision": "0", "benchmark_root": "pkg"},
        {"name": "unannotated", "language": "go", "url": "", "revision": "0"}]))
    (folder / "repos" / "gin" / "pkg" / "config.py").write_text(
        "import json\n\n\ndef parse_config(path):\n    with open(path) as handle:\n        return json.load(handle)\n")
    (folder / "repos" / "gin" / "pkg" / "client.py").write_text(
        "def send_request(url, payload):\n    return post(url, payload, retries=3)\n")
    (folder / "annotations" / "gin.json").write_text(json.dumps([
        {"query": "parse_config", "relevant": [{"path": "pkg/config.py", "start_line": 4, "end_line": 6}],
         "secondary": []},
        {"query": "send request with retries", "relevant": ["pkg/client.py"], "secondary": ["pkg/gone.py"],
         "category": "semantic"},
        {"query": "nothing here", "relevant": ["pkg/deleted.py"], "secondary": []}]))


def data_args(tmp_path):
    """--data and --spans of the stand-in benchmark `write_benchmark(tmp_path / "data")` writes."""
    return ["--data", str(tmp_path / "data"), "--spans", str(tmp_path / "data" / "spans")]


def test_a_small_benchmark_end_to_end(tmp_path, capsys):
    write_benchmark(tmp_path / "data")
    main([*data_args(tmp_path), "--ranking", "bm25", "--work-dir", str(tmp_path / "work"),
          "--record-dir", str(tmp_path / "records")])
    figures = json.loads((tmp_path / "records" / "codesearch_semble.json").read_text())["metrics"]
    # query 1: found at rank 1 of 1 present; query 2: client.py at rank 1, gone.py absent from the index, so the
    # ideal is one hit; query 3: no target is indexed, 0 as semble scores it
    assert figures["per_repo"]["codesearch bm25"]["gin"]["ndcg"] == pytest.approx((1 + 1 + 0) / 3)
    summary = figures["summary"]["codesearch bm25"]
    assert summary["categories"] == {"semantic": pytest.approx(0.5), "symbol": pytest.approx(1.0)}
    assert summary["repos"] == 1 and summary["queries"] == 3
    # no query is annotated with places: the place-level columns are empty, the file level is semble's metric
    assert "| codesearch bm25 |  |  |  | 0.667 |" in capsys.readouterr().out


def write_spans(folder, repo, queries, revision="0"):
    (folder / f"{repo}.json").write_text(json.dumps({"repo": repo, "revision": revision, "queries": queries}))


def add_dev_repository(folder):
    """chi, a repository of the dev half, to the stand-in benchmark `write_benchmark` wrote."""
    specs = json.loads((folder / "repos.json").read_text())
    specs.append({"name": "chi", "language": "go", "url": "", "revision": "0"})
    (folder / "repos.json").write_text(json.dumps(specs))
    (folder / "repos" / "chi").mkdir(parents=True)
    (folder / "repos" / "chi" / "mux.py").write_text("def mount_router(prefix, router):\n    return prefix\n")
    (folder / "annotations" / "chi.json").write_text(json.dumps([
        {"query": "mount a router", "relevant": ["mux.py"], "secondary": [], "category": "semantic"}]))


GIN_SPANS = [
    {"query": "parse_config", "category": "symbol", "targets": [
        {"path": "pkg/config.py", "kind": "relevant", "spans": [{"start_line": 4, "end_line": 6,
                                                                 "name": "parse_config"}]}]},
    {"query": "send request with retries", "category": "semantic", "targets": [
        {"path": "pkg/client.py", "kind": "relevant", "spans": [], "note": "no declaration answers alone"}]}]


def test_each_half_is_scored_apart_at_place_and_file_level(tmp_path, capsys):
    write_benchmark(tmp_path / "data")
    add_dev_repository(tmp_path / "data")
    write_spans(tmp_path / "data" / "spans", "gin", GIN_SPANS)
    common = [*data_args(tmp_path), "--ranking", "bm25", "--work-dir", str(tmp_path / "work"), "--record-dir",
              str(tmp_path / "records")]
    main(common)
    figures = json.loads((tmp_path / "records" / "codesearch_semble.json").read_text())["metrics"]
    assert figures["halves"] == {"test": ["gin"], "dev": ["chi"]} and list(figures["by_half"]) == ["test", "dev"]
    assert figures["half"] == "both" and figures["used_to_choose"] is None
    assert figures["spans"]["annotated_repos"] == ["gin"] and list(figures["spans"]["files"]) == ["gin.json"]
    assert figures["spans"]["not_annotated"] == {"chi": 1, "gin": 1}
    test_half = figures["by_half"]["test"]["codesearch bm25"]
    # gin: both annotated queries found at rank 1 by their first place; "nothing here" is not annotated, so it is
    # out of the place level but in semble's file level (0 there)
    assert test_half["place"]["overall"] == pytest.approx(1.0) and test_half["place_rr"]["overall"] == 1.0
    assert test_half["place"]["queries"] == 2 and test_half["not_annotated"] == {"gin": 1}
    assert test_half["file"]["overall"] == pytest.approx(2 / 3) == test_half["overall"]
    dev_half = figures["by_half"]["dev"]["codesearch bm25"]
    assert dev_half["place"]["overall"] is None and dev_half["file"]["overall"] == pytest.approx(1.0)
    out = capsys.readouterr().out
    assert out.index("## test half: 1 repositories (gin)") < out.index("## dev half: 1 repositories (chi)")
    assert "| codesearch bm25 | 1.000 | 1.000 | 1.000 | 0.667 |" in out
    rendered = codesearch_semble_places(json.loads((tmp_path / "records" / "codesearch_semble.json").read_text()))
    assert "| test (1 repositories) | bm25 | 1.000 | 1.000 | 1.000 | 0.667 |" in rendered
    assert "| dev (1 repositories) | bm25 |  |  |  | 1.000 |" in rendered
    assert "out of the place level: chi (1), gin (1)" in rendered

    main([*common, "--half", "dev", "--used-to-choose", "the BM25 prior's weight"])
    figures = json.loads((tmp_path / "records" / "codesearch_semble.json").read_text())["metrics"]
    assert figures["repos"] == ["chi"] and list(figures["by_half"]) == ["dev"]
    assert figures["half"] == "dev" and figures["used_to_choose"] == "the BM25 prior's weight"
    with pytest.raises(SystemExit, match="none of gin is in the dev half of the split: pass --half both"):
        main([*common, "--half", "dev", "--repo", "gin"])


def test_span_files_that_do_not_fit_the_data_are_refused_before_any_work(tmp_path):
    write_benchmark(tmp_path / "data")
    spans, work = tmp_path / "data" / "spans", ["--work-dir", str(tmp_path / "work")]
    write_spans(spans, "gin", [{**GIN_SPANS[0], "query": "parse config"}])
    with pytest.raises(SystemExit, match="'parse config' is not one of semble's queries of gin; copy"):
        main([*data_args(tmp_path), *work])
    write_spans(spans, "gin", GIN_SPANS, revision="1234")
    with pytest.raises(SystemExit, match="annotated at revision 1234, the data pins 0: its lines may have moved"):
        main([*data_args(tmp_path), *work])
    write_spans(spans, "gin", [{**GIN_SPANS[0], "targets": [{"path": "pkg/config.py", "kind": "primary",
                                                              "spans": []}]}])
    with pytest.raises(SystemExit, match="gin.json is not a span file"):
        main([*data_args(tmp_path), *work])
    write_spans(spans, "flask", [])
    (spans / "gin.json").unlink()
    with pytest.raises(SystemExit, match="annotates 'flask', which the data's repos.json does not annotate"):
        main([*data_args(tmp_path), *work])
    with pytest.raises(SystemExit, match="is not a folder: pass --spans"):
        main(["--data", str(tmp_path / "data"), "--spans", str(tmp_path / "absent"), *work])
    assert not (tmp_path / "work").exists()  # refused before anything was unpacked or indexed


def test_a_repository_outside_the_fixed_split_is_named_and_left_out(tmp_path, capsys):
    write_benchmark(tmp_path / "data")
    (tmp_path / "data" / "repos.json").write_text((tmp_path / "data" / "repos.json").read_text().replace(
        '"gin"', '"newrepo"'))
    (tmp_path / "data" / "annotations" / "gin.json").rename(tmp_path / "data" / "annotations" / "newrepo.json")
    with pytest.raises(SystemExit, match="none of newrepo is in the fixed split: write each into DEV_REPOS or"):
        main([*data_args(tmp_path), "--work-dir", str(tmp_path / "work")])
    assert "newrepo: in neither half of the fixed split, so left out" in capsys.readouterr().err
    assert not (tmp_path / "work").exists()


def test_a_repository_whose_copy_holds_no_target_is_left_out_and_named(tmp_path, capsys):
    write_benchmark(tmp_path / "data")
    # a copy at another revision than its annotations: files exist, none of them a target (every method scores 0)
    specs = json.loads((tmp_path / "data" / "repos.json").read_text())
    specs.append({"name": "messagepack-csharp", "language": "csharp", "url": "", "revision": "0",
                  "benchmark_root": "src"})
    (tmp_path / "data" / "repos.json").write_text(json.dumps(specs))
    copy = tmp_path / "data" / "repos" / "messagepack-csharp" / "src"
    copy.mkdir(parents=True)
    (copy / "Other.cs").write_text("class Other { void Run() {} }\n")
    (tmp_path / "data" / "annotations" / "messagepack-csharp.json").write_text(json.dumps([
        {"query": "Serializer", "relevant": ["src/Serializer.cs"], "secondary": ["src/Writer.cs"]}]))
    main([*data_args(tmp_path), "--ranking", "bm25", "--work-dir", str(tmp_path / "work"),
          "--record-dir", str(tmp_path / "records")])
    figures = json.loads((tmp_path / "records" / "codesearch_semble.json").read_text())["metrics"]
    assert figures["repos"] == ["gin"] and list(figures["left_out"]) == ["messagepack-csharp"]
    summary = figures["summary"]["codesearch bm25"]
    assert summary["overall"] == pytest.approx(2 / 3) and "csharp" not in summary["languages"]
    assert "messagepack-csharp: none of its 2 targets is a file of the data's copy" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no target of messagepack-csharp is a file of the data's copy"):
        main([*data_args(tmp_path), "--repo", "messagepack-csharp", "--work-dir", str(tmp_path / "work")])


@pytest.mark.slow  # embeds with the default model
def test_the_fusion_sweep_ranks_each_dense_weight_beside_the_default(tmp_path):
    write_benchmark(tmp_path / "data")
    common = [*data_args(tmp_path), "--work-dir", str(tmp_path / "work"), "--record-dir",
              str(tmp_path / "records")]
    main([*common, "--ranking", "bm25", "--dense-weight", "0"])
    summary = json.loads((tmp_path / "records" / "codesearch_semble.json").read_text())["metrics"]["summary"]
    # BM25's share alone fuses to BM25's order
    bm25_alone = summary["codesearch bm25"]["overall"]
    assert summary["codesearch hybrid, dense weight 0"]["overall"] == pytest.approx(bm25_alone)


def test_a_dense_weight_outside_zero_to_one_is_refused_before_any_work(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--data", str(tmp_path / "absent"), "--dense-weight", "1.5"])
    assert "1.5 is not a share: pass a number from 0 to 1" in capsys.readouterr().err


def test_unknown_repository_is_named_with_the_choices(tmp_path):
    write_benchmark(tmp_path / "data")
    with pytest.raises(SystemExit, match="no annotated repository or language named nope; the data has: gin"):
        main([*data_args(tmp_path), "--repo", "nope", "--work-dir", str(tmp_path / "work")])
    with pytest.raises(SystemExit, match="has no repos.json"):
        main(["--data", str(tmp_path), "--work-dir", str(tmp_path / "work")])


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep (rg) is not installed (Debian: ripgrep)")
def test_ripgrep_baseline_ranks_files_by_match_count(tmp_path):
    write_benchmark(tmp_path / "data")
    main([*data_args(tmp_path), "--method", "ripgrep", "--work-dir", str(tmp_path / "work"),
          "--record-dir", str(tmp_path / "records")])
    # only "parse_config" occurs literally (config.py, rank 1 of its 1 target); ripgrep is scored on every target
    record = json.loads((tmp_path / "records" / "codesearch_semble.json").read_text())
    per_query = record["metrics"]["per_repo"]["ripgrep"]["gin"]
    assert per_query["ndcg"] == pytest.approx(1 / 3)


FAKE_SEMBLE = '''
import json, os
from pathlib import Path
__version__ = "0.0.test"
# canned chunk hits per query: (file, start_line, end_line), best first
HITS = {"parse_config": [("config.py", 10, 12), ("config.py", 4, 6)],
        "send request with retries": [("client.py", 1, 2), ("config.py", 1, 6)], "nothing here": []}

class Chunk:
    def __init__(self, file_path, start_line, end_line):
        self.file_path, self.start_line, self.end_line = file_path, start_line, end_line

class Result:
    def __init__(self, chunk):
        self.chunk, self.score = chunk, 1.0

class SembleIndex:
    def __init__(self, chunks):
        self.chunks = chunks

    @classmethod
    def from_path(cls, folder, model_path):
        Path(os.environ["SEMBLE_CACHE_LOCATION"], "asked.json").write_text(json.dumps({"model": model_path}))
        return cls([Chunk(path.name, 1, 6) for path in sorted(Path(folder).glob("*.py"))])

    def search(self, query, top_k, alpha):
        with open(Path(os.environ["SEMBLE_CACHE_LOCATION"], "alphas"), "a") as alphas:
            alphas.write(f"{alpha}\\n")
        return [Result(Chunk(*hit)) for hit in HITS[query][:top_k]]
'''
FAKE_MODEL2VEC = '''
from pathlib import Path

class StaticModel:
    def __init__(self, vectors, tokenizer, normalize):
        self.shape = vectors.shape

    def save_pretrained(self, folder):
        Path(folder).mkdir(parents=True)
        Path(folder, "shape").write_text(str(self.shape))
'''


def install_fake_semble(folder, monkeypatch):
    """A stand-in `semble` (and `model2vec`) package on PYTHONPATH, so the peer runs without semble installed."""
    for name, text in (("semble", FAKE_SEMBLE), ("model2vec", FAKE_MODEL2VEC)):
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text(text)
    monkeypatch.setenv("PYTHONPATH", str(folder))


def test_semble_itself_is_scored_here_from_its_chunk_hits(tmp_path, monkeypatch, capsys):
    write_benchmark(tmp_path / "data")
    install_fake_semble(tmp_path / "fake", monkeypatch)
    main([*data_args(tmp_path), "--method", "semble", "--work-dir", str(tmp_path / "work"),
          "--record-dir", str(tmp_path / "records")])
    figures = json.loads((tmp_path / "records" / "codesearch_semble.json").read_text())["metrics"]
    label = "semble 0.0.test BM25 + its ranking (run here)"
    # query 1: its span (lines 4-6) is semble's second chunk; query 2: client.py first, gone.py not indexed; query
    # 3: its target is not indexed, 0
    assert figures["per_repo"][label]["gin"]["ndcg"] == pytest.approx((1 / math.log2(3) + 1 + 0) / 3)
    assert figures["per_repo"][label]["gin"]["distinct_files"] == pytest.approx((1 + 2 + 0) / 3)
    cache = tmp_path / "work" / "semble-cache"
    # offline: the BM25 path (semantic weight 0) over an index built with the stand-in model
    assert (cache / "alphas").read_text().split() == ["0.0", "0.0", "0.0"]
    assert "semble-stand-in-" in json.loads((cache / "asked.json").read_text())["model"]
    assert f"| {label} |  |  |  | 0.544 |" in capsys.readouterr().out

    (tmp_path / "potion").mkdir()
    main([*data_args(tmp_path), "--method", "semble", "--semble-model", str(tmp_path / "potion"),
          "--work-dir", str(tmp_path / "work"), "--record-dir", str(tmp_path / "records")])
    figures = json.loads((tmp_path / "records" / "codesearch_semble.json").read_text())["metrics"]
    assert list(figures["summary"]) == ["semble 0.0.test hybrid (potion, run here)"]
    # with its model, semble picks its own weight per query (alpha None)
    assert (cache / "alphas").read_text().split()[3:] == ["None", "None", "None"]


@pytest.mark.skipif(importlib.util.find_spec("semble") is not None, reason="semble is installed here")
def test_semble_not_installed_for_the_given_python_is_named_with_the_fix(tmp_path, capfd):
    write_benchmark(tmp_path / "data")
    with pytest.raises(SystemExit, match="semble_peer.py failed under"):
        main([*data_args(tmp_path), "--method", "semble", "--work-dir", str(tmp_path / "work")])
    assert "semble is not installed for" in capfd.readouterr().err  # the peer's own message, on its stderr
