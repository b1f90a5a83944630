"""codesearch on semble's public code-search benchmark: at the place an agent reads first, and as semble scores itself.

    python benchmarks/codesearch_semble.py                                   # every repository, hybrid
    python benchmarks/codesearch_semble.py --half dev --used-to-choose "the file-name boost"  # tune on dev only
    python benchmarks/codesearch_semble.py --ranking dense --ranking bm25 --ranking hybrid --repo gin --repo gson
    python benchmarks/codesearch_semble.py --dense-weight 0.4 --dense-weight 0.6  # the fusion sweep, beside hybrid
    python benchmarks/codesearch_semble.py --method ripgrep                  # semble's ripgrep baseline (needs rg)
    python benchmarks/codesearch_semble.py --method semble --semble-python ~/semble-env/bin/python  # semble itself
    python benchmarks/codesearch_semble.py --build DIR                       # fetch the data (network: GitHub)

The benchmark (MinishLab/semble, `benchmarks/`): `repos.json` pins public repositories (name, language, url,
revision, benchmark_root); `annotations/<name>.json` holds queries, each with `relevant` and `secondary` targets (a
path from the repository root, some with `start_line`/`end_line`) and a `category`. A data folder holds those two
and the repositories' benchmark folders, as `repos/<name>/<benchmark_root>/...` or packed as `repos.tar.gz`
(unpacked once under --work-dir). `../shared/data/semble-benchmark/` is such a folder; `--build DIR` makes one
(a shallow clone of semble for the files, then each repository at its pinned revision); nothing of it is committed.

The score (semble's `run_benchmark.py` and `metrics.py`, re-implemented from their definition): per query, each
target's rank is that of the first of the top 10 hits whose path is the target's path (or ends with "/" + it) and
whose lines overlap the target's span when it has one (a codesearch hit is one file: by default only its best
place is matched against a span, as semble's one-chunk hits are; `--credit listed-places` credits any place it lists);
binary-gain NDCG@10 over those ranks, the ideal being min(10, the targets present in the index) hits, 0 when none
is present; the mean over a repository's queries, then the mean over repositories. A repository none of whose
targets is a file of the data's copy (a copy at another revision than the annotations') is left out of every mean
and named: semble's metric would score each of its queries 0 there, whatever the method. A language's or category's
figure is the mean over its repositories (semble's per-language table) of the per-repository means.

The place level (the headline): codesearch answers with files, each listing its places (function/method spans),
and an agent reads the first place of each file hit first. The project's span annotations (`--spans DIR`, default
benchmarks/data/semble_spans, one `<repo>.json` per repository; the format and provenance are in its README) give
each of semble's queries its targets' acceptable spans. A file hit matches a target there when it is the target's
file AND its first (best) place overlaps one of the target's spans (a target annotated with no span: its file
alone). Reported: place-level NDCG@10 (same gains and ideal as above), place-level MRR@10 (agents read top-down),
and, as a secondary column, NDCG@10 when any place the hit lists may match (what showing more places would give);
semble's file-level metric beside them, always. A query with no annotation is out of the place-level means (counted,
its repositories named). semble's published rows are file level: compare them to that column only. semble run
here (`--method semble`) is scored the same way, each of its chunk hits a place; a ripgrep hit is a file, no place.

The split: every choice (a ranking constant, a data mix) is tuned on the dev half of semble's repositories and
reported on the test half, a fixed split written in DEV_REPOS / TEST_REPOS (the rule beside them). `--half dev|test|
both` (default both) runs those repositories; each half is summarized apart (overall, per language, per category),
the test half first. A record says its half and, with `--used-to-choose TEXT`, what the run chose.

codesearch runs as a user runs it: one index per repository (under --work-dir, so a second run embeds nothing; index
CPU seconds are reported for the run that built it), then every query through `FolderSearch.search`. Only BM25
rankings asked for: the index is built with constant vectors (BM25 never reads them), so it costs seconds.
Prints, per half, every metric overall with the mean number of distinct files in a top 10, index CPU seconds and
query p50 latency, then place and file level per language and per category, beside semble's published rows on the
same repositories.

`--method semble` runs semble itself on the same copies (`benchmarks/semble_peer.py`, in an environment that has
semble installed, `--semble-python`) and scores its hits here with the same metric: offline, its BM25 path with its
whole ranking; with `--semble-model FOLDER` (its model2vec model, downloaded where there is a network), its hybrid.
A target counts as present when its file is one semble indexed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/codesearch_semble.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.common import (add_dense_weight_argument, add_record_argument, add_selection_arguments,  # noqa: E402
                               dense_weight_labels, load_line, selection_fields, write_record)
from codesearch.first_stage import FirstStage  # noqa: E402
from codesearch.priors import PRIOR_RULES  # noqa: E402
from codesearch.quantization import DEFAULT_PRECISION, PRECISIONS  # noqa: E402
from codesearch.ranking import RANKINGS, RankingConfig  # noqa: E402
from codesearch.request import SearchRequest  # noqa: E402
from codesearch.searcher import FolderSearch, IndexOptions  # noqa: E402

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "semble-benchmark"
DEFAULT_SPANS = REPO_ROOT / "benchmarks" / "data" / "semble_spans"
SPANS_FORMAT = "benchmarks/data/semble_spans/README.md"
SEMBLE_REPOSITORY = "https://github.com/MinishLab/semble.git"
TOP_K = 10  # semble scores NDCG@10 over a top 10
PEER_SCRIPT = REPO_ROOT / "benchmarks" / "semble_peer.py"
PUBLISHED_FILES = {"semble hybrid (published)": "semble_published_hybrid.json",
                   "ripgrep (published)": "ripgrep_published.json"}
# The fixed dev/test split of semble's annotated repositories. Rule: per language, the repositories sorted by name,
# the first floor(n/2) are dev, the rest test; a language with one repository is test only. Written out (not
# computed per run) so that a repository semble adds upstream never moves an old one from its half; a new one is in
# neither half until it is written here by the same rule. Every ranking constant and data mix is chosen on dev and
# reported on test (messagepack-csharp, test, is left out of every mean anyway: no target is a file of the copy).
DEV_REPOS = frozenset({"aiohttp", "axum", "cats", "chi", "commons-lang", "ecto", "exposed", "fastapi", "fmtlib",
                       "rack", "trpc"})
TEST_REPOS = frozenset({"alamofire", "bash-it", "circe", "cobra", "express", "gin", "gson", "ktor",
                        "kotlinx-coroutines", "libuv", "messagepack-csharp", "model2vec", "nlohmann-json", "phoenix",
                        "pydantic", "serde", "sinatra", "tokio", "vitest", "zod"})
HALVES = {"test": TEST_REPOS, "dev": DEV_REPOS}  # the test half first: it is the headline
# score_query's metrics, the headline first; semble's published rows compare to "file" only
METRICS = {"place": "place NDCG@10", "place_rr": "place MRR@10", "listed_places": "listed places NDCG@10",
           "file": "file NDCG@10"}


@dataclass(frozen=True)
class Target:
    path: str  # from the repository root
    spans: tuple[tuple[int, int], ...] = ()  # (start_line, end_line) of each acceptable place; none: the file is enough

    def matches(self, path: str, line: int, end_line: int) -> bool:
        """`path` (from the repository root) is this target's file and lines `line`-`end_line` overlap one of its
        spans (any lines, when it has none)."""
        if path != self.path and not path.endswith("/" + self.path):
            return False
        return not self.spans or any(not (end_line < start or line > end) for start, end in self.spans)


@dataclass(frozen=True)
class Query:
    repo: str
    language: str
    text: str
    targets: tuple[Target, ...]  # semble's: relevant, then secondary: both count as relevant
    category: str
    places: tuple[Target, ...] | None = None  # the project's span annotations (SpanFile); None: not annotated


class Span(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)
    name: str

    @model_validator(mode="after")
    def _ordered(self) -> "Span":
        if self.end_line < self.start_line:
            raise ValueError(f"{self.name}: end_line {self.end_line} is before start_line {self.start_line}")
        return self


class SpanTarget(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    path: str  # from the repository root, as semble's targets
    kind: Literal["relevant", "secondary"]
    spans: list[Span]  # the declarations that answer the query; [] where none does: the file alone is matched
    note: str | None = None
    missing: bool | str | None = None  # the annotator's word that the file is absent at the revision


class SpanQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    query: str  # semble's query text, exactly
    category: str
    targets: list[SpanTarget]


class SpanFile(BaseModel):
    """benchmarks/data/semble_spans/<repo>.json: the places that answer semble's queries of one repository."""
    model_config = ConfigDict(extra="forbid", strict=True)
    repo: str
    revision: str  # semble's pinned revision the spans were read at
    queries: list[SpanQuery]


def ndcg_at_k(ranks: list[int], present: int, k: int = TOP_K) -> float:
    """Binary-gain NDCG@k of the 1-based `ranks` at which targets were found, `present` targets being findable."""
    if present == 0:
        return 0.0
    gains = {rank for rank in ranks if 1 <= rank <= k}
    dcg = sum(1 / math.log2(rank + 1) for rank in gains)
    return dcg / sum(1 / math.log2(rank + 1) for rank in range(1, min(k, present) + 1))


def reciprocal_rank(ranks: list[int], k: int = TOP_K) -> float:
    """1 / the best of `ranks` within the top k, 0 when none is: the reciprocal rank of MRR@k."""
    return max((1 / rank for rank in ranks if 1 <= rank <= k), default=0.0)


def target_ranks(hits: list[tuple[str, list[tuple[int, int]]]], targets: tuple[Target, ...]) -> list[int]:
    """For each target found among `hits` (path, and the (line, end_line) of each place the hit lists: codesearch
    gives one hit per file with its places), the 1-based rank of the first hit matching it."""
    ranks = []
    for target in targets:
        rank = next((i for i, (path, spans) in enumerate(hits, 1)
                     if any(target.matches(path, line, end_line) for line, end_line in spans)), None)
        if rank is not None:
            ranks.append(rank)
    return ranks


def split_by_language(languages: dict[str, str]) -> dict[str, set[str]]:
    """{"dev": names, "test": names} of repositories {name: language} by the split's rule (see DEV_REPOS): per
    language, sorted by name, the first floor(n/2) dev and the rest test."""
    by_language = defaultdict(list)
    for name, language in languages.items():
        by_language[language].append(name)
    halves = {"dev": set(), "test": set()}
    for names in by_language.values():
        names.sort()
        halves["dev"].update(names[:len(names) // 2])
        halves["test"].update(names[len(names) // 2:])
    return halves


def score_query(query: Query, hits: list[tuple[str, list[tuple[int, int]]]], present: Callable[[Target], bool],
                credit: str) -> dict[str, float]:
    """One query's scores from its `hits` (path from the repository root, and the (line, end_line) of each place the
    hit lists, best first), best first; `present`: whether the index holds a target. "file": semble's metric on
    semble's targets (`credit`: which places may match their lines); where the query is annotated, "place": NDCG@10
    where a hit matches a span target by its first place only (what an agent reads first), "place_rr": its
    reciprocal rank, "listed_places": NDCG@10 where any place the hit lists may match."""
    first_places = [(path, places[:1]) for path, places in hits]
    file_hits = hits if credit == "listed-places" else first_places
    scores = {"file": ndcg_at_k(target_ranks(file_hits, query.targets), sum(map(present, query.targets)))}
    if query.places is not None:
        findable = sum(map(present, query.places))
        ranks = target_ranks(first_places, query.places)
        scores |= {"place": ndcg_at_k(ranks, findable), "place_rr": reciprocal_rank(ranks) if findable else 0.0,
                   "listed_places": ndcg_at_k(target_ranks(hits, query.places), findable)}
    return scores


def infer_category(text: str) -> str:
    """semble's rule for a query without a category: one word is a symbol, "how ..." architecture."""
    if " " not in text.strip():
        return "symbol"
    return "architecture" if text.lower().startswith("how ") else "semantic"


def _target(raw: str | dict) -> Target:
    if isinstance(raw, str):
        return Target(raw)
    start, end = raw.get("start_line"), raw.get("end_line")
    return Target(str(raw["path"]), () if start is None or end is None else ((int(start), int(end)),))


def load_benchmark(data: Path) -> tuple[dict[str, dict], list[Query]]:
    """The repositories of `data/repos.json` that have annotations, and their queries, in annotation order."""
    for needed in ("repos.json", "annotations"):
        if not (data / needed).exists():
            raise SystemExit(f"{data} has no {needed}: pass --data with a folder holding repos.json, annotations/ "
                             f"and repos/ (or repos.tar.gz), or make one with --build DIR (needs GitHub)")
    specs = {spec["name"]: spec for spec in json.loads((data / "repos.json").read_text(encoding="utf-8"))}
    queries = []
    for annotations in sorted((data / "annotations").glob("*.json")):
        for item in json.loads(annotations.read_text(encoding="utf-8")):
            repo = item.get("repo", annotations.stem)
            if repo not in specs:
                continue
            targets = tuple(_target(raw) for raw in [*item.get("relevant", []), *item.get("secondary", [])])
            category = item.get("category")
            queries.append(Query(repo, specs[repo]["language"], item["query"], targets,
                                 category if isinstance(category, str) else infer_category(item["query"])))
    return {name: spec for name, spec in specs.items() if any(q.repo == name for q in queries)}, queries


def attach_places(folder: Path, specs: dict[str, dict], queries: list[Query]) -> list[Query]:
    """`queries`, each with the places its repository's span file (`folder/<repo>.json`, SpanFile) gives it; a
    query whose repository has no file, or whose file does not list it, stays not annotated. Every file is checked
    (schema, repository, revision, query texts) before anything is indexed."""
    if not folder.is_dir():
        raise SystemExit(f"{folder} is not a folder: pass --spans with the folder of span files "
                         "(benchmarks/data/semble_spans)")
    texts = defaultdict(set)
    for query in queries:
        texts[query.repo].add(query.text)
    places = {}
    for path in sorted(folder.glob("*.json")):
        try:
            spans = SpanFile.model_validate_json(path.read_text(encoding="utf-8"))
        except ValidationError as error:
            raise SystemExit(f"{path} is not a span file (the format: {SPANS_FORMAT}): {error}") from None
        if spans.repo not in specs:
            raise SystemExit(f"{path} annotates {spans.repo!r}, which the data's repos.json does not annotate: fix "
                             "its repo, or pass --spans with a folder made for this data")
        if spans.revision != specs[spans.repo]["revision"]:
            raise SystemExit(f"{path} was annotated at revision {spans.revision}, the data pins "
                             f"{specs[spans.repo]['revision']}: its lines may have moved; annotate it again at the "
                             "data's revision, or pass --data with a copy at the spans' revision")
        for item in spans.queries:
            if item.query not in texts[spans.repo]:
                raise SystemExit(f"{path}: {item.query!r} is not one of semble's queries of {spans.repo}; copy "
                                 "the query text from semble's annotations exactly")
            places[spans.repo, item.query] = tuple(
                Target(target.path, tuple((span.start_line, span.end_line) for span in target.spans))
                for target in sorted(item.targets, key=lambda target: target.kind != "relevant"))
    return [replace(query, places=places.get((query.repo, query.text))) for query in queries]


def repos_folder(data: Path, work_dir: Path) -> Path:
    """`data/repos`, or `data/repos.tar.gz` unpacked once under `work_dir` (a temporary name, then renamed)."""
    if (data / "repos").is_dir():
        return data / "repos"
    archive = data / "repos.tar.gz"
    if not archive.is_file():
        raise SystemExit(f"{data} has neither repos/ nor repos.tar.gz: make the folder with --build DIR")
    unpacked = work_dir / f"repos-{archive.stat().st_size}-{archive.stat().st_mtime_ns}"
    if not unpacked.is_dir():
        work_dir.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(dir=work_dir, prefix=".unpacking-"))
        with tarfile.open(archive) as tar:
            tar.extractall(partial, filter="data")
        (partial / "repos").rename(unpacked)
        shutil.rmtree(partial)
    return unpacked


def repositories_without_targets(repos: Path, queries: list[Query]) -> dict[str, int]:
    """The repositories none of whose targets is a file of the data's copy, with their number of targets: a copy
    made at another revision than the annotations' (the data folder's README names them). No method can find a
    target there, and semble's metric scores every such query 0 (its n_relevant, the targets present in the index,
    is 0), so a mean over them measures the copy, not the search."""
    found, total = defaultdict(int), defaultdict(int)
    for query in queries:
        for target in query.targets:
            total[query.repo] += 1
            found[query.repo] += (repos / query.repo / target.path).is_file()
    return {name: count for name, count in total.items() if not found[name]}


def benchmark_dir(repos: Path, spec: dict) -> tuple[Path, str]:
    """The folder semble indexes for `spec`, and the prefix that turns its paths into repository-root paths."""
    root = spec.get("benchmark_root") or ""
    return repos / spec["name"] / root, (root.rstrip("/") + "/") if root else ""


class ConstantEmbedder:
    """Unit vectors that are all equal: an index for BM25 alone, whose ranking never reads them."""

    backend = "none (BM25 only)"
    fingerprint = "constant-unit-vector"

    def _rows(self, texts: list[str]) -> np.ndarray:  # (n, 8) float32, every row the same unit vector
        rows = np.zeros((len(texts), 8), dtype=np.float32)
        rows[:, 0] = 1.0
        return rows

    encode_document = encode_query = _rows


def first_stage_of(search: FolderSearch) -> FirstStage:
    """The first stage (codesearch.first_stage) a fresh folder would get, made from the built index: the same
    pieces, and the vectors the model gives them (so no piece is embedded again; the ranking is the same)."""
    return FirstStage.from_rows(search.index.stored_pieces(), search.index.file_keys(),
                                path_vectors=search.index.path_vectors())


def run_codesearch(repos: Path, specs: dict[str, dict], queries: list[Query], rankings: list[str],
                   args: argparse.Namespace) -> dict[str, dict[str, dict]]:
    """{ranking: {repo: {"ndcg", "per_query", "distinct_files", "index_cpu_s", "p50_ms", "pieces"}}}."""
    bm25_only = set(rankings) == {"bm25"} and not args.first_stage and not args.dense_weight
    first = {f"hybrid, first answer (BM25's best {n})": n for n in args.first_stage or []}  # label -> candidates
    weighted = dense_weight_labels(args.dense_weight)
    rankings = [*rankings, *first, *weighted]
    config = RankingConfig(priors=PRIOR_RULES - set(args.ablate or ()))  # less the rules --ablate turns off
    by_repo = defaultdict(list)
    for query in queries:
        by_repo[query.repo].append(query)
    results = {ranking: {} for ranking in rankings}
    for name in sorted(by_repo):
        folder, prefix = benchmark_dir(repos, specs[name])
        if not folder.is_dir():
            print(f"{name}: {folder} is missing; skipped", file=sys.stderr)
            continue
        options = IndexOptions(model=args.model, max_seq_length=args.max_seq_length, quiet=True,
                               precision=args.precision,
                               index_dir=args.work_dir / "indexes" / ("bm25-only" if bm25_only else "embedded") / name)
        search = FolderSearch(folder, options, embedder=ConstantEmbedder() if bm25_only else None)
        cpu = time.process_time()
        search.refresh()
        index_cpu = time.process_time() - cpu
        index = search.index.load()
        pieces = list(zip((prefix + path for path in index.paths), index.lines, index.end_lines))
        stage = first_stage_of(search) if args.first_stage else None

        def present(target: Target) -> bool:
            return any(target.matches(*piece) for piece in pieces)
        for ranking in rankings:
            per_query, distinct, latencies = [], [], []
            for query in by_repo[name]:
                started = time.perf_counter()
                # as codesearch answers by default (tests and non-code demoted), but for the ranking swept
                request = SearchRequest(query=query.text, top_k=TOP_K,
                                        ranking="hybrid" if ranking in first or ranking in weighted else ranking)
                if ranking in first:
                    hits = search.first_search(stage, request, candidates=first[ranking], config=config)
                elif ranking in weighted:
                    hits = search.search(request, config=replace(config, dense_weight=weighted[ranking]))
                else:
                    hits = search.search(request, config=config)
                latencies.append(time.perf_counter() - started)
                found = [(prefix + hit["path"], [(place["line"], place["end_line"]) for place in [hit, *hit["more"]]])
                         for hit in hits]
                per_query.append(score_query(query, found, present, args.credit))
                distinct.append(len({hit[0] for hit in found}))
            results[ranking][name] = {"ndcg": statistics.fmean(q["file"] for q in per_query), "per_query": per_query,
                                      "distinct_files": statistics.fmean(distinct), "index_cpu_s": index_cpu,
                                      "p50_ms": 1000 * statistics.median(latencies), "pieces": len(pieces)}
        search.close()
        print(f"{name:<20} {len(pieces):>6} pieces  index {index_cpu:6.1f} CPU-s  " + "  ".join(
            f"{ranking} {results[ranking][name]['ndcg']:.3f}" for ranking in rankings), file=sys.stderr)
    return results


def run_ripgrep(repos: Path, specs: dict[str, dict], queries: list[Query]) -> dict[str, dict]:
    """semble's ripgrep baseline: files ranked by `rg --count --fixed-strings --ignore-case` of the whole query,
    scored against every target (present or not) by file path alone (semble's), and by the lines of none at place
    level: a ripgrep hit is a file, no place (only a span target with no spans can match it)."""
    if shutil.which("rg") is None:
        raise SystemExit("ripgrep (rg) is not on PATH: install it (Debian: apt-get install ripgrep)")
    per_repo = defaultdict(list)
    for query in queries:
        folder, prefix = benchmark_dir(repos, specs[query.repo])
        listing = subprocess.run(["rg", "--count", "--no-heading", "--ignore-case", "--hidden", "--glob", "!.git",
                                  "--fixed-strings", "--", query.text, "."], cwd=folder, capture_output=True,
                                 text=True, check=False).stdout
        counted = [line.rsplit(":", 1) for line in listing.splitlines() if ":" in line]
        counted.sort(key=lambda pair: -int(pair[1]))
        files = [(prefix + path.removeprefix("./"), [(0, 0)]) for path, _ in counted[:TOP_K]]
        by_file = replace(query, targets=tuple(Target(target.path) for target in query.targets))
        per_repo[query.repo].append(score_query(by_file, files, lambda target: True, "best-place"))
    return {name: {"ndcg": statistics.fmean(q["file"] for q in scores), "per_query": scores}
            for name, scores in per_repo.items()}


def run_semble(repos: Path, specs: dict[str, dict], queries: list[Query], args: argparse.Namespace
               ) -> tuple[str, dict[str, dict]]:
    """semble answering every query (PEER_SCRIPT run by `args.semble_python`), scored here: each of its chunk hits
    is (path, [(start_line, end_line)]), so a target's rank is that of semble's first chunk that matches it.
    -> (the method's label, {repo: {"ndcg", "per_query", "distinct_files", "index_cpu_s", "p50_ms", "pieces"}})."""
    by_repo = defaultdict(list)
    for query in queries:
        by_repo[query.repo].append(query)
    folders = {name: benchmark_dir(repos, specs[name]) for name in by_repo}
    job = {"model": str(args.semble_model) if args.semble_model else None,
           "cache": str(args.work_dir / "semble-cache"),
           "repos": [{"name": name, "folder": str(folders[name][0]), "queries": [q.text for q in by_repo[name]]}
                     for name in sorted(by_repo) if folders[name][0].is_dir()]}
    process = subprocess.run([str(args.semble_python), str(PEER_SCRIPT)], input=json.dumps(job), text=True,
                             stdout=subprocess.PIPE, check=False)
    if process.returncode != 0:
        raise SystemExit(f"{PEER_SCRIPT.name} failed under {args.semble_python} (exit {process.returncode}; its "
                         "message is above)")
    results, version = {}, "?"
    for line in process.stdout.splitlines():
        answered = json.loads(line)
        name, version = answered["name"], answered["semble_version"]
        prefix = folders[name][1]
        files = {prefix + path for path in answered["files"]}
        per_query, distinct = [], []
        for query, hits in zip(by_repo[name], answered["hits"], strict=True):
            found = [(prefix + path, [(start, end)]) for path, start, end in hits]
            per_query.append(score_query(query, found, lambda target: any(
                Target(target.path).matches(path, 0, 0) for path in files), "best-place"))
            distinct.append(len({path for path, _ in found}))
        results[name] = {"ndcg": statistics.fmean(q["file"] for q in per_query), "per_query": per_query,
                         "distinct_files": statistics.fmean(distinct), "index_cpu_s": answered["index_cpu_s"],
                         "p50_ms": answered["p50_ms"], "pieces": answered["chunks"]}
        print(f"{name:<20} {answered['chunks']:>6} chunks  index {answered['index_cpu_s']:6.1f} CPU-s  semble "
              f"{results[name]['ndcg']:.3f}", file=sys.stderr)
    label = (f"semble {version} hybrid ({args.semble_model.name}, run here)" if args.semble_model
             else f"semble {version} BM25 + its ranking (run here)")
    return label, results


def summary(per_repo: dict[str, dict], specs: dict[str, dict], queries: list[Query],
            repos: frozenset[str] | set[str] | None = None) -> dict:
    """Over the repositories `repos` (default: every scored one), per metric of `score_query` ("place",
    "place_rr", "listed_places", "file"): overall, per language and per category, each a mean over repositories of
    per-repository means (semble's order of means). A repository none of whose queries is annotated is out of the
    place-level means; "not_annotated" counts such queries per repository. The file level is also at the top level
    (records made before place-level scoring keep it there)."""
    covered = [name for name in per_repo if repos is None or name in repos]
    scores = defaultdict(lambda: defaultdict(list))  # metric -> repository -> its queries' scores
    by_category = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))  # metric -> category -> repo -> scores
    query_index, not_annotated = defaultdict(int), defaultdict(int)
    for query in queries:
        if query.repo in covered:
            scored = per_repo[query.repo]["per_query"][query_index[query.repo]]
            query_index[query.repo] += 1
            not_annotated[query.repo] += query.places is None
            for metric, value in scored.items():
                scores[metric][query.repo].append(value)
                by_category[metric][query.category][query.repo].append(value)
    figures = {}
    for metric in METRICS:
        repo_means = {name: statistics.fmean(values) for name, values in scores[metric].items()}
        by_language = defaultdict(list)
        for name, mean in repo_means.items():
            by_language[specs[name]["language"]].append(mean)
        figures[metric] = {
            "overall": statistics.fmean(repo_means.values()) if repo_means else None,
            "languages": {language: statistics.fmean(means) for language, means in sorted(by_language.items())},
            "categories": {category: statistics.fmean(statistics.fmean(values) for values in repos.values())
                           for category, repos in sorted(by_category[metric].items())},
            "repos": len(repo_means), "queries": sum(map(len, scores[metric].values()))}
    return {**figures["file"], **figures,
            "not_annotated": {name: count for name, count in sorted(not_annotated.items()) if count}}


def published_scores(data: Path, repos: list[str]) -> dict[str, dict[str, float]]:
    """semble's own published per-repository NDCG@10 for `repos`, per published method the data folder carries
    for all of them."""
    rows = {}
    for label, file_name in PUBLISHED_FILES.items():
        if (data / file_name).is_file():
            scores = json.loads((data / file_name).read_text(encoding="utf-8"))["ndcg10"]
            if all(name in scores for name in repos):
                rows[label] = {name: scores[name] for name in repos}
    return rows


def published(data: Path, repos: list[str]) -> dict[str, float]:
    """semble's own published NDCG@10 on the same repositories (their mean), where the data folder carries them."""
    return {label: statistics.fmean(scores.values()) for label, scores in published_scores(data, repos).items()}


def published_languages(data: Path, repos: list[str], specs: dict[str, dict]) -> dict[str, dict[str, float]]:
    """The same per language: the mean over a language's repositories, as `summary` takes it."""
    rows = {}
    for label, scores in published_scores(data, repos).items():
        by_language = defaultdict(list)
        for name, score in scores.items():
            by_language[specs[name]["language"]].append(score)
        rows[label] = {language: statistics.fmean(values) for language, values in sorted(by_language.items())}
    return rows


def build(target: Path) -> None:
    """A data folder from GitHub: semble's benchmark files, then each repository's benchmark_root at its revision."""
    if target.exists() and any(target.iterdir()):
        raise SystemExit(f"{target} is not empty: --build writes a new folder; pass an empty or missing one")
    partial = Path(tempfile.mkdtemp(dir=target.parent if target.parent.is_dir() else None, prefix=".semble-"))
    git = ["git", "-c", "advice.detachedHead=false"]
    subprocess.run([*git, "clone", "--quiet", "--depth", "1", SEMBLE_REPOSITORY, str(partial / "semble")], check=True)
    shutil.copy(partial / "semble" / "benchmarks" / "repos.json", partial / "repos.json")
    shutil.copytree(partial / "semble" / "benchmarks" / "annotations", partial / "annotations")
    for spec in json.loads((partial / "repos.json").read_text(encoding="utf-8")):
        checkout = partial / "repos" / spec["name"]
        print(f"{spec['name']}: {spec['url']} @ {spec['revision'][:12]}", file=sys.stderr)
        checkout.mkdir(parents=True)
        for step in (["init", "--quiet"], ["fetch", "--quiet", "--depth", "1", spec["url"], spec["revision"]],
                     ["checkout", "--quiet", "FETCH_HEAD"]):
            subprocess.run([*git, "-C", str(checkout), *step], check=True)
        shutil.rmtree(checkout / ".git")
    shutil.rmtree(partial / "semble")
    partial.rename(target)
    print(f"wrote {target}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the benchmark folder (see above)")
    parser.add_argument("--method", choices=("codesearch", "ripgrep", "semble"), default="codesearch",
                        help="codesearch, semble's ripgrep baseline (to check the harness: ~0.12), or semble itself")
    parser.add_argument("--semble-python", type=Path, default=Path(sys.executable),
                        help="--method semble: a Python with semble installed (default: this one)")
    parser.add_argument("--semble-model", type=Path,
                        help="--method semble: semble's model2vec model folder (default: none, its BM25 path)")
    parser.add_argument("--ranking", action="append", choices=RANKINGS,
                        help="codesearch ranking, repeatable (default: hybrid)")
    parser.add_argument("--model", default="default", help="codesearch --model (default: the bundled model)")
    parser.add_argument("--max-seq-length", type=int, default=IndexOptions.max_seq_length,
                        help="codesearch --max-seq-length")
    parser.add_argument("--ablate", action="append", choices=sorted(PRIOR_RULES),
                        help="turn one code prior off (codesearch.priors), to measure what it is worth (repeatable)")
    parser.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION,
                        help="codesearch --precision (a change re-quantizes the stored vectors, embeds nothing)")
    parser.add_argument("--first-stage", action="append", type=int, metavar="N",
                        help="also rank hybrid as `--first-answer fast` answers before the index is built: BM25 "
                             "over every piece, the model over BM25's best N (repeatable)")
    add_dense_weight_argument(parser)
    parser.add_argument("--repo", action="append", help="only these repositories (repeatable)")
    parser.add_argument("--language", action="append", help="only these languages (repeatable)")
    parser.add_argument("--credit", choices=("best-place", "listed-places"), default="best-place",
                        help="file level (semble's metric): which places of a file hit may match the lines of "
                             "semble's own targets: its best (default, the comparison with semble's chunk hits) or any "
                             "it lists; the place level always reports both (its listed-places column)")
    parser.add_argument("--work-dir", type=Path,
                        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "c2llm-semble",
                        help="unpacked repositories and codesearch indexes, kept between runs")
    parser.add_argument("--spans", type=Path, default=DEFAULT_SPANS, metavar="DIR",
                        help="the project's span annotations of semble's queries, one <repo>.json each, for the "
                             f"place level (default: benchmarks/data/semble_spans; the format: {SPANS_FORMAT})")
    add_selection_arguments(parser)
    add_record_argument(parser, "codesearch_semble")
    parser.add_argument("--build", type=Path, metavar="DIR", help="make a data folder at DIR from GitHub and stop")
    args = parser.parse_args(argv)
    if args.build:
        return build(args.build)
    specs, queries = load_benchmark(args.data)
    queries = attach_places(args.spans, specs, queries)
    unknown = sorted(set(args.repo or []) - set(specs)) + sorted(
        set(args.language or []) - {spec["language"] for spec in specs.values()})
    if unknown:
        raise SystemExit(f"no annotated repository or language named {', '.join(unknown)}; the data has: "
                         f"{', '.join(sorted(specs))} ({', '.join(sorted({s['language'] for s in specs.values()}))})")
    unsplit = sorted(set(specs) - DEV_REPOS - TEST_REPOS)
    if unsplit:
        print(f"{', '.join(unsplit)}: in neither half of the fixed split, so left out; write each into DEV_REPOS or "
              "TEST_REPOS (benchmarks/codesearch_semble.py) by the rule beside them", file=sys.stderr)
    halves = {half: names for half, names in HALVES.items() if args.half in (half, "both")}
    queries = [q for q in queries if (not args.repo or q.repo in args.repo)
               and (not args.language or q.language in args.language)]
    chosen = sorted({q.repo for q in queries})
    queries = [q for q in queries if any(q.repo in names for names in halves.values())]
    if not queries and args.half == "both":
        raise SystemExit(f"none of {', '.join(chosen)} is in the fixed split: write each into DEV_REPOS or "
                         "TEST_REPOS (benchmarks/codesearch_semble.py) by the rule beside them")
    if not queries:
        raise SystemExit(f"none of {', '.join(chosen)} is in the {args.half} half of the split: pass --half both, or "
                         f"a repository of that half ({', '.join(sorted(set().union(*halves.values())))})")
    repos = repos_folder(args.data, args.work_dir)
    left_out = repositories_without_targets(repos, queries)
    for name, targets in left_out.items():
        print(f"{name}: none of its {targets} targets is a file of the data's copy ({repos / name}), so no method "
              "can score there; left out of every mean. Make a copy at the annotations' revision (--build DIR)",
              file=sys.stderr)
    queries = [query for query in queries if query.repo not in left_out]
    if not queries:
        raise SystemExit(f"no target of {', '.join(left_out)} is a file of the data's copy under {repos}: nothing "
                         "to score; make a copy at the annotations' revision with --build DIR")
    loads = [load_line("start")]
    if args.method == "ripgrep":
        per_method = {"ripgrep": run_ripgrep(repos, specs, queries)}
    elif args.method == "semble":
        label, per_repo = run_semble(repos, specs, queries, args)
        per_method = {label: per_repo}
    else:
        rankings = args.ranking or ["hybrid"]
        results = run_codesearch(repos, specs, queries, rankings, args)
        per_method = {f"codesearch {ranking}": per_repo for ranking, per_repo in results.items()}
    repo_names = sorted(next(iter(per_method.values())))
    by_half = {half: sorted(set(repo_names) & names) for half, names in halves.items()}
    by_half = {half: names for half, names in by_half.items() if names}
    report = {half: {method: summary(per_repo, specs, queries, set(names)) for method, per_repo in per_method.items()}
              for half, names in by_half.items()}
    print(f"\nsemble benchmark: {len(repo_names)} repositories, {len(queries)} queries"
          + (f" (left out, no target in the copy: {', '.join(left_out)})" if left_out else "")
          + f". Headline: {METRICS['place']}, a file hit matching a target by its first place (the project's "
          f"span annotations, {args.spans}); {METRICS['file']} is semble's metric, the only one its published rows "
          "compare to.")
    for half, names in by_half.items():
        print_half(half, names, report[half], per_method, specs, args.data)
    figures = {**selection_fields(args), "repos": repo_names,
               "halves": by_half, "headline": f"halves' place overall ({METRICS['place']}), test first",
               "left_out": {name: f"none of its {targets} targets is a file of the copy"
                            for name, targets in left_out.items()},
               "spans": {"folder": portable_path(args.spans), "files": span_files(args.spans),
                         "annotated_repos": sorted({q.repo for q in queries if q.places is not None}),
                         "not_annotated": dict(sorted(Counter(q.repo for q in queries if q.places is None).items()))},
               "by_half": report,
               "summary": {method: summary(per_repo, specs, queries) for method, per_repo in per_method.items()},
               "published": published(args.data, repo_names),
               "published_languages": published_languages(args.data, repo_names, specs),
               "published_per_repo": published_scores(args.data, repo_names),
               "per_repo": {name: {repo: {k: v for k, v in r.items() if k != "per_query"} | repo_means(r["per_query"])
                                   for repo, r in per_repo.items()} for name, per_repo in per_method.items()}}
    loads.append(load_line("end"))
    argv = sys.argv if argv is None else [__file__, *argv]
    print(f"record: {write_record(args.record_name, figures, loads, args.record_dir, argv)}")


def repo_means(per_query: list[dict[str, float]]) -> dict[str, float]:
    """One repository's mean of each place-level metric over its annotated queries (none when none is)."""
    return {metric: statistics.fmean(q[metric] for q in per_query if metric in q)
            for metric in METRICS if metric != "file" and any(metric in q for q in per_query)}


def span_files(folder: Path) -> dict[str, str]:
    """{file name: sha256} of the span files the run read: which version of each annotation the figures are of."""
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(folder.glob("*.json"))}


def portable_path(path: Path) -> str:
    """`path` from the repository root when it is inside it: a record reads the same on every machine."""
    resolved = path.resolve()
    return resolved.relative_to(REPO_ROOT).as_posix() if resolved.is_relative_to(REPO_ROOT) else str(path)


def cell(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def print_half(half: str, names: list[str], report: dict[str, dict], per_method: dict[str, dict],
               specs: dict[str, dict], data: Path) -> None:
    """The tables of one half: every metric overall with the run's costs, then place and file level per language
    and per category; semble's published rows in the file column only."""
    first = next(iter(report.values()))
    not_annotated = first["not_annotated"]
    print(f"\n## {half} half: {len(names)} repositories ({', '.join(names)}), {first['queries']} queries"
          + (f"; not annotated with places, so out of the place level: {sum(not_annotated.values())} queries of "
             + ", ".join(f"{name} ({count})" for name, count in not_annotated.items()) if not_annotated else "")
          + "\n")
    print("| method | " + " | ".join(METRICS.values()) + " | distinct files | index CPU-s | p50 ms |")
    print("| --- |" + " ---: |" * (len(METRICS) + 3))
    for method, figures in report.items():
        per_repo = [per_method[method][name] for name in names]
        extra = ["", "", ""]
        if "distinct_files" in per_repo[0]:
            extra = [f"{statistics.fmean(r['distinct_files'] for r in per_repo):.2f}",
                     f"{sum(r['index_cpu_s'] for r in per_repo):.0f}",
                     f"{statistics.median(r['p50_ms'] for r in per_repo):.1f}"]
        print(f"| {method} | " + " | ".join([cell(figures[metric]["overall"]) for metric in METRICS] + extra) + " |")
    published_rows = published(data, names)
    for label, score in published_rows.items():
        print(f"| {label}, file level only | " + " | ".join([""] * (len(METRICS) - 1) + [cell(score)]) + " |" * 4)
    by_language = published_languages(data, names, specs)
    for part in ("languages", "categories"):
        keys = sorted({key for figures in report.values() for key in figures["place"][part] | figures["file"][part]})
        columns = [f"{method} {level}" for method in report for level in ("place", "file")]
        columns += [f"{label} (file)" for label in published_rows] if part == "languages" else []
        print(f"\n| {part[:-1] if part == 'languages' else 'category'} | " + " | ".join(columns) + " |")
        print("| --- |" + " ---: |" * len(columns))
        for key in keys:
            cells = [cell(figures[level][part].get(key)) for figures in report.values() for level in ("place", "file")]
            cells += [cell(by_language[label].get(key)) for label in published_rows] if part == "languages" else []
            print(f"| {key} | " + " | ".join(cells) + " |")


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from statistics import mean, median  # noqa: E402

from benchmarks.tables import FUSION_SWEEP, markdown_table, number, quality_set  # noqa: E402

# semble's query categories as its annotations name them, in the order the tables show them
SEMBLE_CATEGORIES = ("symbol", "architecture", "semantic")


def semble_row(record: dict, method: str) -> dict:
    """One method's summary in a semble-benchmark record, with its mean of distinct files in a top 10."""
    metrics = record["metrics"]
    per_repo = metrics["per_repo"][method].values()
    return {**metrics["summary"][method], "distinct_files": mean(repo["distinct_files"] for repo in per_repo)}


def codesearch_semble(default: dict, priors_off: dict, listed_places: dict, peer: dict) -> str:
    """NDCG@10 overall and per query category of each ranking, with and without the code priors, beside semble run
    here (`--method semble`) and semble's published hybrid on the same repositories; the last codesearch row credits
    any place a file hit lists."""
    runs = [("dense", default, "codesearch dense"), ("BM25, no priors", priors_off, "codesearch bm25"),
            ("hybrid, no priors", priors_off, "codesearch hybrid"), ("BM25", default, "codesearch bm25"),
            ("**hybrid (default)**", default, "codesearch hybrid"),
            ("hybrid, a file hit matched by any place it lists", listed_places, "codesearch hybrid")]
    rows = []
    for title, record, method in runs:
        row = semble_row(record, method)
        categories = row["categories"]
        rows.append([title, number(row["overall"]), *(number(categories[name]) for name in SEMBLE_CATEGORIES),
                     number(row["distinct_files"], 2)])
    for method in peer["metrics"]["summary"]:
        row = semble_row(peer, method)
        rows.append([method, number(row["overall"]), *(number(row["categories"][name]) for name in SEMBLE_CATEGORIES),
                     number(row["distinct_files"], 2)])
    for title, score in default["metrics"]["published"].items():
        rows.append([f"{title}, same repositories", number(score), *[""] * (len(SEMBLE_CATEGORIES) + 1)])
    return markdown_table(["ranking", "NDCG@10", *SEMBLE_CATEGORIES, "distinct files in a top 10"], rows,
                          "l" + "r" * (len(SEMBLE_CATEGORIES) + 2))


def codesearch_semble_places(record: dict) -> str:
    """Per half of the fixed split (test first, the headline): each ranking's place-level NDCG@10 and MRR@10 (the
    first place of each file hit against the project's span annotations), listed-places NDCG@10 and semble's
    file-level NDCG@10, semble's published rows in the file column only; then which queries were annotated."""
    metrics = record["metrics"]
    levels = ("place", "place_rr", "listed_places", "file")
    rows = []
    for half, summaries in metrics["by_half"].items():
        repos = metrics["halves"][half]
        for method, summary in summaries.items():
            rows.append([f"{half} ({len(repos)} repositories)", method.removeprefix("codesearch "),
                         *(number(summary[level]["overall"]) if summary[level]["overall"] is not None else ""
                           for level in levels)])
        published = {label: mean(scores[name] for name in repos)
                     for label, scores in metrics["published_per_repo"].items()}
        rows += [[f"{half} ({len(repos)} repositories)", f"{label}, file level only", "", "", "", number(score)]
                 for label, score in published.items()]
    table = markdown_table(["half", "ranking", "place NDCG@10", "place MRR@10", "listed places NDCG@10",
                            "file NDCG@10 (semble's)"], rows, "llrrrr")
    spans = metrics["spans"]
    missing = ", ".join(f"{name} ({count})" for name, count in spans["not_annotated"].items())
    return (f"{table}\n\nAnnotated with places: {len(spans['annotated_repos'])} repositories "
            f"({', '.join(spans['annotated_repos'])}); queries not annotated, out of the place level: "
            f"{missing or 'none'}. Used to choose: {metrics['used_to_choose'] or 'nothing (a report)'}.")



def codesearch_semble_test_half(record: dict) -> str:
    """codesearch_semble_places on the test half alone: the headline, the half no choice was made on."""
    metrics = record["metrics"]
    test_half = {half: summaries for half, summaries in metrics["by_half"].items() if half == "test"}
    return codesearch_semble_places({**record, "metrics": {**metrics, "by_half": test_half}})

def codesearch_semble_precision(float32: dict, binary: dict) -> str:
    """Dense and hybrid NDCG@10 at float32 and at binary precision (Hamming search, the best rows rescored), the same
    indexes and crediting, with the language whose score moves most and the repositories' median query p50."""
    rows = []
    for precision, record in (("float32", float32), ("binary, rescored", binary)):
        for method in ("codesearch dense", "codesearch hybrid"):
            summary, reference = record["metrics"]["summary"][method], float32["metrics"]["summary"][method]
            moved = max(summary["languages"], key=lambda name: abs(summary["languages"][name]
                                                                    - reference["languages"][name]))
            change = summary["languages"][moved] - reference["languages"][moved]
            rows.append([precision, method.removeprefix("codesearch "), number(summary["overall"]),
                         f"{moved} {change:+.3f}" if record is not float32 else "",
                         number(median(repo["p50_ms"] for repo in record["metrics"]["per_repo"][method].values()), 1)])
    return markdown_table(["precision", "ranking", "NDCG@10", "language that moves most",
                           "query p50 ms, median over repositories"], rows, "llrlr")


def codesearch_semble_languages(record: dict, *peers: dict) -> str:
    """NDCG@10 per language (the mean of its repositories) of each ranking (not the fusion sweep's weights), then of
    each method of the `peers` records (semble run here) and the published rows they carry."""
    summaries = {method.removeprefix("codesearch "): summary for one in (record, *peers)
                 for method, summary in one["metrics"]["summary"].items() if FUSION_SWEEP not in method}
    summaries |= {label: {"languages": languages} for peer in peers
                  for label, languages in peer["metrics"].get("published_languages", {}).items()
                  if label.startswith("semble")}
    languages = next(iter(summaries.values()))["languages"]
    rows = [[language, *(number(summary["languages"][language]) for summary in summaries.values())]
            for language in languages]
    return markdown_table(["language", *summaries], rows, "l" + "r" * len(summaries))


def codesearch_fusion(semble: dict, python_set: dict) -> str:
    """The fusion sweep (`--dense-weight`): per dense weight, semble's NDCG@10 overall and per category, the language
    furthest below the better of dense and BM25 there, and the Python set's MRR@10 / hit@10 (one hit per file, tests
    and non-code demoted); the default ranking's row in bold."""
    summaries = semble["metrics"]["summary"]
    python_all = quality_set(python_set, "All packages")[1]
    dense, bm25 = summaries["codesearch dense"]["languages"], summaries["codesearch bm25"]["languages"]
    weighted = sorted((name for name in summaries if FUSION_SWEEP in name), key=lambda name: float(name.split()[-1]))
    rows = []
    for method in [*weighted, "codesearch hybrid"]:
        summary = summaries[method]
        trailing = {language: score - max(dense[language], bm25[language])
                    for language, score in summary["languages"].items()}
        worst = min(trailing, key=trailing.get)
        python = python_all[f"{method.removeprefix('codesearch ')} / demote / demote"]
        cells = [method.rsplit(" ", 1)[-1] if method in weighted else "default", number(summary["overall"]),
                 *(number(summary["categories"][name]) for name in SEMBLE_CATEGORIES),
                 f"{worst} {trailing[worst]:+.3f}", number(python["mrr@10"]), number(python["hit@10"])]
        rows.append(cells if method in weighted else [f"**{cell}**" for cell in cells])
    return markdown_table(["dense weight", "semble NDCG@10", *SEMBLE_CATEGORIES,
                           "language furthest below the better of dense and BM25", "Python set MRR@10", "hit@10"],
                          rows, "l" + "r" * (len(SEMBLE_CATEGORIES) + 4))


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "codesearch_semble": (("codesearch_semble", "codesearch_semble_priors_off", "codesearch_semble_listed_places",
                           "codesearch_semble_peer"), codesearch_semble),
    "codesearch_semble_languages": (("codesearch_semble", "codesearch_semble_peer"), codesearch_semble_languages),
    "codesearch_semble_places": (("codesearch_semble_places",), codesearch_semble_places),
    "codesearch_semble_test_half": (("codesearch_semble_places",), codesearch_semble_test_half),
    "codesearch_semble_precision": (("codesearch_semble_listed_places", "codesearch_semble_binary"),
                                    codesearch_semble_precision),
    "codesearch_fusion": (("codesearch_semble", "codesearch_quality"), codesearch_fusion),
}


if __name__ == "__main__":
    main()
