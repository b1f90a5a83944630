"""The semble benchmark harness scores as semble does: hand-computed NDCG@10, path and span matching, a tiny run."""

import importlib.util
import json
import math
import shutil

import pytest

from benchmarks.codesearch_semble import Target, infer_category, main, ndcg_at_k, target_ranks


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
    target = Target("src/mux.go", 10, 20)
    assert target.matches("src/mux.go", 20, 30)  # touching the last line overlaps
    assert target.matches("vendor/src/mux.go", 1, 10)  # a path ending with "/" + the target's
    assert not target.matches("src/xmux.go", 10, 20)  # a suffix that is not a whole path component
    assert not target.matches("src/mux.go", 21, 40)
    assert Target("mux.go").matches("mux.go", 500, 900)  # no span: the file is enough
    hits = [("a.go", [(1, 5)]), ("src/mux.go", [(1, 5)]), ("vendor/src/mux.go", [(12, 14)])]
    assert target_ranks(hits, (target, Target("a.go"), Target("gone.go"))) == [3, 1]
    # a hit is a file with its places: any place overlapping the span counts, at the file's rank
    assert target_ranks([("a.go", [(1, 5)]), ("src/mux.go", [(1, 5), (15, 16)])], (target,)) == [2]


def test_categories_default_as_semble_infers_them():
    assert infer_category("ServeHTTP") == "symbol"
    assert infer_category("How does routing work") == "architecture"
    assert infer_category("parse a header") == "semantic"


def write_benchmark(folder):
    (folder / "annotations").mkdir(parents=True)
    (folder / "repos" / "demo" / "pkg").mkdir(parents=True)
    (folder / "repos.json").write_text(json.dumps([
        {"name": "demo", "language": "python", "url": "", "revision": "0", "benchmark_root": "pkg"},
        {"name": "unannotated", "language": "go", "url": "", "revision": "0"}]))
    (folder / "repos" / "demo" / "pkg" / "config.py").write_text(
        "import json\n\n\ndef parse_config(path):\n    with open(path) as handle:\n        return json.load(handle)\n")
    (folder / "repos" / "demo" / "pkg" / "client.py").write_text(
        "def send_request(url, payload):\n    return post(url, payload, retries=3)\n")
    (folder / "annotations" / "demo.json").write_text(json.dumps([
        {"query": "parse_config", "relevant": [{"path": "pkg/config.py", "start_line": 4, "end_line": 6}],
         "secondary": []},
        {"query": "send request with retries", "relevant": ["pkg/client.py"], "secondary": ["pkg/gone.py"],
         "category": "semantic"},
        {"query": "nothing here", "relevant": ["pkg/deleted.py"], "secondary": []}]))


def test_a_small_benchmark_end_to_end(tmp_path, capsys):
    write_benchmark(tmp_path / "data")
    main(["--data", str(tmp_path / "data"), "--ranking", "bm25", "--work-dir", str(tmp_path / "work"),
          "--record-dir", str(tmp_path / "records")])
    figures = json.loads((tmp_path / "records" / "codesearch_semble.json").read_text())["metrics"]
    # query 1: found at rank 1 of 1 present; query 2: client.py at rank 1, gone.py absent from the index, so the
    # ideal is one hit; query 3: no target is indexed, 0 as semble scores it
    assert figures["per_repo"]["codesearch bm25"]["demo"]["ndcg"] == pytest.approx((1 + 1 + 0) / 3)
    summary = figures["summary"]["codesearch bm25"]
    assert summary["categories"] == {"semantic": pytest.approx(0.5), "symbol": pytest.approx(1.0)}
    assert summary["repos"] == 1 and summary["queries"] == 3
    assert "| codesearch bm25 | 0.667 |" in capsys.readouterr().out


def test_a_repository_whose_copy_holds_no_target_is_left_out_and_named(tmp_path, capsys):
    write_benchmark(tmp_path / "data")
    # a copy at another revision than its annotations: files exist, none of them a target (every method scores 0)
    specs = json.loads((tmp_path / "data" / "repos.json").read_text())
    specs.append({"name": "stale", "language": "csharp", "url": "", "revision": "0", "benchmark_root": "src"})
    (tmp_path / "data" / "repos.json").write_text(json.dumps(specs))
    (tmp_path / "data" / "repos" / "stale" / "src").mkdir(parents=True)
    (tmp_path / "data" / "repos" / "stale" / "src" / "Other.cs").write_text("class Other { void Run() {} }\n")
    (tmp_path / "data" / "annotations" / "stale.json").write_text(json.dumps([
        {"query": "Serializer", "relevant": ["src/Serializer.cs"], "secondary": ["src/Writer.cs"]}]))
    main(["--data", str(tmp_path / "data"), "--ranking", "bm25", "--work-dir", str(tmp_path / "work"),
          "--record-dir", str(tmp_path / "records")])
    figures = json.loads((tmp_path / "records" / "codesearch_semble.json").read_text())["metrics"]
    assert figures["repos"] == ["demo"] and list(figures["left_out"]) == ["stale"]
    summary = figures["summary"]["codesearch bm25"]
    assert summary["overall"] == pytest.approx(2 / 3) and "csharp" not in summary["languages"]
    assert "stale: none of its 2 targets is a file of the data's copy" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no target of stale is a file of the data's copy"):
        main(["--data", str(tmp_path / "data"), "--repo", "stale", "--work-dir", str(tmp_path / "work")])


@pytest.mark.slow  # embeds with the default model
def test_the_fusion_sweep_ranks_each_dense_weight_beside_the_default(tmp_path):
    write_benchmark(tmp_path / "data")
    common = ["--data", str(tmp_path / "data"), "--work-dir", str(tmp_path / "work"), "--record-dir",
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
    with pytest.raises(SystemExit, match="no annotated repository or language named nope; the data has: demo"):
        main(["--data", str(tmp_path / "data"), "--repo", "nope", "--work-dir", str(tmp_path / "work")])
    with pytest.raises(SystemExit, match="has no repos.json"):
        main(["--data", str(tmp_path), "--work-dir", str(tmp_path / "work")])


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep (rg) is not installed (Debian: ripgrep)")
def test_ripgrep_baseline_ranks_files_by_match_count(tmp_path):
    write_benchmark(tmp_path / "data")
    main(["--data", str(tmp_path / "data"), "--method", "ripgrep", "--work-dir", str(tmp_path / "work"),
          "--record-dir", str(tmp_path / "records")])
    # only "parse_config" occurs literally (config.py, rank 1 of its 1 target); ripgrep is scored on every target
    record = json.loads((tmp_path / "records" / "codesearch_semble.json").read_text())
    per_query = record["metrics"]["per_repo"]["ripgrep"]["demo"]
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
    main(["--data", str(tmp_path / "data"), "--method", "semble", "--work-dir", str(tmp_path / "work"),
          "--record-dir", str(tmp_path / "records")])
    figures = json.loads((tmp_path / "records" / "codesearch_semble.json").read_text())["metrics"]
    label = "semble 0.0.test BM25 + its ranking (run here)"
    # query 1: its span (lines 4-6) is semble's second chunk; query 2: client.py first, gone.py not indexed; query
    # 3: its target is not indexed, 0
    assert figures["per_repo"][label]["demo"]["ndcg"] == pytest.approx((1 / math.log2(3) + 1 + 0) / 3)
    assert figures["per_repo"][label]["demo"]["distinct_files"] == pytest.approx((1 + 2 + 0) / 3)
    cache = tmp_path / "work" / "semble-cache"
    # offline: the BM25 path (semantic weight 0) over an index built with the stand-in model
    assert (cache / "alphas").read_text().split() == ["0.0", "0.0", "0.0"]
    assert "semble-stand-in-" in json.loads((cache / "asked.json").read_text())["model"]
    assert f"| {label} | 0.544 |" in capsys.readouterr().out

    (tmp_path / "potion").mkdir()
    main(["--data", str(tmp_path / "data"), "--method", "semble", "--semble-model", str(tmp_path / "potion"),
          "--work-dir", str(tmp_path / "work"), "--record-dir", str(tmp_path / "records")])
    figures = json.loads((tmp_path / "records" / "codesearch_semble.json").read_text())["metrics"]
    assert list(figures["summary"]) == ["semble 0.0.test hybrid (potion, run here)"]
    # with its model, semble picks its own weight per query (alpha None)
    assert (cache / "alphas").read_text().split()[3:] == ["None", "None", "None"]


@pytest.mark.skipif(importlib.util.find_spec("semble") is not None, reason="semble is installed here")
def test_semble_not_installed_for_the_given_python_is_named_with_the_fix(tmp_path, capfd):
    write_benchmark(tmp_path / "data")
    with pytest.raises(SystemExit, match="semble_peer.py failed under"):
        main(["--data", str(tmp_path / "data"), "--method", "semble", "--work-dir", str(tmp_path / "work")])
    assert "semble is not installed for" in capfd.readouterr().err  # the peer's own message, on its stderr
