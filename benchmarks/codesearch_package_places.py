"""Place-level code search in every language: doc comments of packages kept out of training, answered by their function.

    python -m benchmarks.codesearch_package_places --build [DIR]     # the trees and the queries (needs apt, npm)
    python -m benchmarks.codesearch_package_places [--trees DIR] [--model default] [--index-root DIR]

`benchmarks/data/codesearch_package_places.json` pins one package per language (registry, name, version, the
sha256 of every archive its registry's client downloads; how they were chosen is written there). The miner
(`train.mining_packages`) refuses every package named there, so no model trained on its pairs saw them.

`--build` fetches each package through the miner's own fetch code (apt with its own configuration under
DIR/.cache, `npm pack`), checks the version and every sha256, and keeps as the package's tree the files the miner
reads (its language's source files; built copies under dist/, build/ and the like dropped where the package ships
its sources beside them). The miner's extractor and filters give its (doc comment, function) pairs: the query is
the doc's first paragraph without the function's name, duplicate, templated and out-of-bounds pairs dropped, at most
`queries_per_package` per package (a fixed pseudo-random sample). The answer is the function's line span, 1-based
and inclusive, from its signature (attributes and annotations above it included) to its end, the doc comment
excluded. Every doc comment that became a query is then removed from the tree copy (its characters deleted, its
line breaks kept, so every line number holds), and so is any other doc of the tree that gives the same query text;
a query whose words still occur in the tree after that (a declaration's doc in a header, another comment) is
dropped: no query is found by its own words. Trees are made in a staging folder and renamed into place, the
previous `queries.jsonl` removed first and the new one written last (a temporary name, then a rename): a killed
build leaves no half-written tree, and no queries file the scoring would take for a finished build.

Scoring indexes each tree with codesearch's own index (under --index-root: a second run embeds nothing) and ranks
every query as codesearch prints its answer, a list of files each with its places (codesearch.ranking.rank, tests
and non-code demoted as by default). The headline is place-level: a query is answered at
rank r when the r-th file listed is the answer's file and its FIRST place overlaps the answer's lines (MRR@10,
hit@1, hit@10); file-level (the answer's file at rank r, whatever its places) is beside it. Dense, BM25 and hybrid,
per language and per half (dev, test), written as the record `codesearch_package_places`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/codesearch_package_places.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from c2llm_plumbing.atomic import write_atomically  # noqa: E402
from train.mining_packages.extract import LANGUAGES  # noqa: E402
from train.mining_packages.fetch import DEBIAN_MIRROR, TARBALL, FetchError, PackageInfo, PackageSpec  # noqa: E402
from train.mining_packages.filters import (norm_text, pair_drop_reason, query_from_doc, select_pairs,  # noqa: E402
                                           stable_order_key)
from train.mining_packages.run import Registries, documented_in_tree, is_build_output, source_files  # noqa: E402

PLACES_SET = REPO_ROOT / "benchmarks" / "data" / "codesearch_package_places.json"
DEFAULT_TREES = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "c2llm-benchmarks" / "package-places"
QUERIES_FILE = "queries.jsonl"
CACHE_FOLDER = ".cache"  # the miner's registry clients' cache (apt lists, npm), kept between builds
BUILD_FILE = "build.json"  # the set's sha256 the trees were built from: a changed set asks for a new build
HALVES = ("dev", "test")
DEBIAN_RELEASE = "bookworm"  # the release whose package versions the set pins, whatever the system runs
K = 10


class Source(BaseModel):
    """One registry package, pinned."""

    model_config = ConfigDict(extra="forbid", strict=True)
    registry: Literal["debian", "debian-source", "npm"]
    name: str
    version: str
    archives: dict[str, str] = Field(min_length=1, description="file name -> sha256 of each archive downloaded")

    @model_validator(mode="after")
    def digests_are_sha256(self) -> Source:
        for name, digest in self.archives.items():
            if len(digest) != 64 or any(character not in "0123456789abcdef" for character in digest):
                raise ValueError(f"{self.name}: archive {name}: {digest!r} is not a sha256 (64 lowercase hex digits)")
        return self


class Tree(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    language: str
    half: Literal["dev", "test", "by hash"] = Field(description="where its queries go; `by hash`: per function")
    about: str = ""
    # one package a tree: the per-package cap and the split by package read the tree as the package
    sources: list[Source] = Field(min_length=1, max_length=1)


class PlacesSet(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    about: str
    split: str
    queries_per_package: int = Field(ge=1)
    trees: dict[str, Tree] = Field(min_length=1)

    @model_validator(mode="after")
    def languages_and_halves(self) -> PlacesSet:
        by_language = defaultdict(list)
        for name, tree in self.trees.items():
            if tree.language not in LANGUAGES:
                raise ValueError(f"tree {name}: unknown language {tree.language!r}; choose one of "
                                 f"{', '.join(LANGUAGES)}")
            by_language[tree.language].append(tree.half)
            if not name or name.startswith(".") or "/" in name:
                raise ValueError(f"tree {name!r}: give a plain folder name (no '/', not starting with '.')")
        for language, halves in by_language.items():
            wanted = {"by hash"} if len(halves) == 1 else set(HALVES)
            if set(halves) != wanted:
                raise ValueError(f"{language}: halves {sorted(set(halves))}; a language with one package splits "
                                 "`by hash`, one with more gives each package `dev` or `test`, both present")
        return self


def load_set(path: Path = PLACES_SET) -> PlacesSet:
    """The set at ``path``, checked (pydantic names the field) before anything is fetched or indexed."""
    return PlacesSet.model_validate_json(path.read_text(encoding="utf-8"))


def sha256_of(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def half_of(tree: Tree, path: str, name: str) -> str:
    """The fixed half of a query: its package's, or by the first byte of sha1(path NUL name) (even: dev)."""
    if tree.half != "by hash":
        return tree.half
    return HALVES[hashlib.sha1(f"{path}\0{name}".encode("utf-8")).digest()[0] % 2]


def fetch_tree(tree_name: str, tree: Tree, registries, work: Path) -> Path:
    """The package's tree, fetched by the miner's client into ``work``, its version and archives checked."""
    source = tree.sources[0]
    spec = PackageSpec(tree.language, source.registry, source.name)
    client = registries.client(spec)
    if source.registry != "npm":  # apt fetches the version it lists: refuse another before downloading
        listed = client.lookup(spec).version
        if listed != source.version:
            raise SystemExit(f"{tree_name}: Debian now lists {source.name} {listed}, the set pins {source.version}; "
                             f"pin the new version and its archives' sha256 in {PLACES_SET.name}")
    root = client.fetch(spec, work, tuple(LANGUAGES[tree.language].grammars), PackageInfo(version=source.version))
    downloaded = {path.name: sha256_of(path) for path in sorted((work / "download").iterdir())
                  if path.is_file() and (TARBALL.search(path.name) or path.suffix in (".deb", ".dsc"))}
    for name, digest in source.archives.items():
        if downloaded.get(name) != digest:
            raise SystemExit(f"{tree_name}: {name} has sha256 {downloaded.get(name, 'none (not downloaded)')}, the "
                             f"set pins {digest}: the registry serves another build; check it and update the pin")
    unpinned = sorted(set(downloaded) - set(source.archives))
    if unpinned:
        raise SystemExit(f"{tree_name}: {', '.join(unpinned)} came too and is not pinned; pin it in "
                         f"{PLACES_SET.name} (its sha256: {downloaded[unpinned[0]]})")
    return root


def keep_miner_files(root: Path, language: str) -> None:
    """Leave in ``root`` only the files the miner reads; built copies (dist/, build/, ...) go too when the package
    ships sources beside them, so a function is not listed twice, once as its built copy."""
    kept = {path.relative_to(root).as_posix() for path in source_files(root, tuple(LANGUAGES[language].grammars))}
    if any(not is_build_output(path) for path in kept):
        kept = {path for path in kept if not is_build_output(path)}
    for path in sorted(root.rglob("*"), reverse=True):  # a folder's files before the folder
        if path.is_dir() and not path.is_symlink():
            if not any(path.iterdir()):
                path.rmdir()
        elif path.relative_to(root).as_posix() not in kept:
            path.unlink()


def blank_docs(text: str, doc_spans: list[tuple[int, int]]) -> str:
    """``text`` without the characters of each [start, end) byte span of its UTF-8 encoding, line breaks kept."""
    data = bytearray(text.encode("utf-8", errors="replace"))
    for start, end in sorted(set(doc_spans), reverse=True):
        data[start:end] = b"\n" * data[start:end].count(b"\n")
    return data.decode("utf-8", errors="replace")


def tree_queries(places: PlacesSet, documented: dict[str, list]) -> list[dict]:
    """The queries of every tree: ``documented`` maps a tree to its (path, DocumentedFunction) pairs. Per language,
    the miner's filters (per pair, then duplicates and templates across the language), then at most
    ``queries_per_package`` per tree, a fixed sample."""
    queries = []
    for language in dict.fromkeys(tree.language for tree in places.trees.values()):
        candidates = []
        for tree_name, tree in places.trees.items():
            if tree.language != language:
                continue
            found = sorted(documented[tree_name], key=lambda item: (is_build_output(item[0]), item[0], item[1].line))
            for path, function in found:
                query = query_from_doc(function.doc, function.name)
                if pair_drop_reason(query, function.code) is None:
                    candidates.append({"query": query, "positive": function.code, "package": tree_name,
                                       "path": path, "line": function.line, "end_line": function.end_line,
                                       "name": function.name})
        kept, _ = select_pairs(candidates)
        by_tree = defaultdict(list)
        for pair in kept:
            by_tree[pair["package"]].append(pair)
        for tree_name, pairs in by_tree.items():
            sample = {id(pair) for pair in sorted(pairs, key=stable_order_key)[:places.queries_per_package]}
            tree = places.trees[tree_name]
            queries.extend({"query": pair["query"], "tree": tree_name, "path": pair["path"], "line": pair["line"],
                            "end_line": pair["end_line"], "name": pair["name"], "language": language,
                            "half": half_of(tree, pair["path"], pair["name"])}
                           for pair in pairs if id(pair) in sample)
    return queries


def remove_query_docs(root: Path, functions: list, query_texts: set[str]) -> int:
    """Delete from the files under ``root`` every doc whose query text is one of ``query_texts``; returns how many."""
    spans = defaultdict(list)
    for path, function in functions:
        if norm_text(query_from_doc(function.doc, function.name)) in query_texts:
            spans[path].append(function.doc_bytes)
    for path, file_spans in spans.items():
        file = root / path
        write_atomically(file, blank_docs(file.read_text(encoding="utf-8", errors="replace"), file_spans))
    return sum(len(file_spans) for file_spans in spans.values())


def texts_in_tree(root: Path, texts: set[str]) -> set[str]:
    """Which of ``texts`` (normalised) still occur in a file under ``root``, as whole words."""
    found = set()
    for path in root.rglob("*"):
        if path.is_file():
            content = f" {norm_text(path.read_text(encoding='utf-8', errors='replace'))} "
            found.update(text for text in texts - found if f" {text} " in content)
    return found


def build(places: PlacesSet, trees_root: Path, registries, set_digest: str) -> list[dict]:
    """Fetch every tree, find its queries, remove their docs; write the trees and ``queries.jsonl`` under
    ``trees_root`` (a staging folder, then renamed into place), and ``build.json`` naming the set's sha256,
    ``set_digest``. Returns the queries."""
    trees_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=trees_root, prefix=".build-") as scratch:
        staging, documented = Path(scratch), {}
        for tree_name, tree in places.trees.items():
            fetched = fetch_tree(tree_name, tree, registries, staging / f".work-{tree_name}")
            keep_miner_files(fetched, tree.language)
            fetched.rename(staging / tree_name)
            shutil.rmtree(staging / f".work-{tree_name}")
            documented[tree_name], _ = documented_in_tree(tree.language, staging / tree_name)
            print(f"{tree_name}: {len(documented[tree_name])} documented functions", file=sys.stderr)
        queries = tree_queries(places, documented)
        for tree_name in places.trees:
            texts = {norm_text(query["query"]) for query in queries if query["tree"] == tree_name}
            removed = remove_query_docs(staging / tree_name, documented[tree_name], texts)
            still_there = texts_in_tree(staging / tree_name, texts)
            queries = [query for query in queries
                       if query["tree"] != tree_name or norm_text(query["query"]) not in still_there]
            print(f"{tree_name}: {len(texts) - len(still_there)} queries, {removed} doc comments removed, "
                  f"{len(still_there)} queries dropped (their text is still in the tree: a declaration's doc, "
                  "another comment)", file=sys.stderr)
        (trees_root / QUERIES_FILE).unlink(missing_ok=True)  # no queries file beside half-replaced trees
        for tree_name in places.trees:
            final = trees_root / tree_name
            if final.exists():
                stale = staging / f".stale-{tree_name}"
                final.rename(stale)
            (staging / tree_name).rename(final)
        write_atomically(trees_root / BUILD_FILE, json.dumps({"set_sha256": set_digest}) + "\n")
        write_atomically(trees_root / QUERIES_FILE, "".join(json.dumps(query) + "\n" for query in queries))
    return queries


def read_build(trees_root: Path, places_path: Path = PLACES_SET) -> list[dict]:
    """The queries of a finished build made from the current set, or a SystemExit naming the build command."""
    command = f"python -m benchmarks.codesearch_package_places --build {trees_root}"
    queries_path, build_path = trees_root / QUERIES_FILE, trees_root / BUILD_FILE
    if not queries_path.exists() or not build_path.exists():
        raise SystemExit(f"{trees_root} holds no finished build: make it with `{command}`")
    if json.loads(build_path.read_text(encoding="utf-8")).get("set_sha256") != sha256_of(places_path):
        raise SystemExit(f"{trees_root} was built from another version of {places_path.name}: run `{command}`")
    return [json.loads(line) for line in queries_path.read_text(encoding="utf-8").splitlines() if line.strip()]


def place_and_file_rank(hits: list[list[tuple]], expected: dict) -> tuple[int | None, int | None]:
    """(place rank, file rank) of the answer in codesearch's output, ``hits``: the files, best first, each the list
    of its places (row, [path and identical files], (line, end_line)), best first. Place rank: the first file whose
    FIRST place is the answer (its path, lines overlapping the answer's); file rank: the first file that is the
    answer's, whatever its places. None: not in the list."""
    from benchmarks.codesearch_quality import is_answer

    place_rank = file_rank = None
    for number, places in enumerate(hits[:K], start=1):
        if file_rank is None and any(expected["path"] in paths for _, paths, _ in places):
            file_rank = number
        _, paths, lines = places[0]
        if place_rank is None and is_answer(paths, "", lines, expected):
            place_rank = number
    return place_rank, file_rank


def summary(ranks: list[tuple[int | None, int | None]]) -> dict:
    """MRR@10, hit@1, hit@10 of the place ranks; MRR@10 and hit@10 of the file ranks."""
    count = len(ranks)
    places, files = [rank for rank, _ in ranks], [rank for _, rank in ranks]
    return {"queries": count,
            "place_mrr@10": sum(1 / rank for rank in places if rank) / count,
            "place_hit@1": sum(rank == 1 for rank in places) / count,
            "place_hit@10": sum(rank is not None for rank in places) / count,
            "file_mrr@10": sum(1 / rank for rank in files if rank) / count,
            "file_hit@10": sum(rank is not None for rank in files) / count}


@dataclass
class IndexedTree:
    """One tree's loaded index and the queries it can answer, their vectors in query order."""

    name: str
    loaded: object  # codesearch.index.LoadedIndex
    retriever: object  # the index's BM25 retriever
    queries: list[dict]
    vectors: object  # (len(queries), d) query embeddings
    left_out: int  # queries whose answer no indexed piece holds (codesearch skipped the file)
    index_cpu_s: float


def indexed_trees(queries: list[dict], trees: Path, index_root: Path, model: str, max_seq_length: int,
                  backend: str, precision: str | None = None) -> Iterator[IndexedTree]:
    """Each tree with queries, indexed with codesearch's own index under ``index_root`` (a second run embeds
    nothing), its answerable queries embedded; the index is closed when the next tree is asked for. `precision`:
    the loaded vectors' (None: the default; another re-quantizes the stored float32 vectors, embeds nothing)."""
    from c2llm_plumbing.models import resolve_model
    from codesearch.encoders import open_embedder
    from codesearch.files import select_files
    from codesearch.index import SearchIndex
    from codesearch.models import index_settings

    folder = resolve_model(model)
    settings = index_settings(folder, max_seq_length)
    if precision is not None:
        settings["precision"] = precision
    embedder = open_embedder(folder, settings["model_fingerprint"], backend, max_seq_length, batch_size=32)
    by_tree = defaultdict(list)
    for query in queries:
        by_tree[query["tree"]].append(query)
    for tree_name, tree_query_list in by_tree.items():
        root = trees / tree_name
        started = time.process_time()
        index = SearchIndex(index_root / tree_name, settings)
        report = index.update(root, select_files(root).files, embedder.encode_document)
        index_cpu_s = round(time.process_time() - started, 1)
        loaded = index.load()
        print(f"{tree_name}: {len(loaded.ids)} pieces ({report.embedded_pieces} embedded now), "
              f"{len(tree_query_list)} queries", file=sys.stderr)
        indexed = set(zip(loaded.paths, loaded.lines, loaded.end_lines))
        answerable = [query for query in tree_query_list if any(
            path == query["path"] and line <= query["end_line"] and query["line"] <= end_line
            for path, line, end_line in indexed)]
        left_out = len(tree_query_list) - len(answerable)
        if left_out:
            print(f"{tree_name}: {left_out} queries left out, no indexed piece holds their answer", file=sys.stderr)
        vectors = embedder.encode_query([query["query"] for query in answerable]) if answerable else []
        try:
            yield IndexedTree(tree_name, loaded, index.bm25(loaded.generation), answerable, vectors, left_out,
                              index_cpu_s)
        finally:
            index.close()


def score(arguments: argparse.Namespace) -> None:
    from benchmarks.codesearch_quality import ranked_hits
    from benchmarks.common import commit_line, load_line, write_record
    from c2llm_data.tokens import code_tokens
    from codesearch.ranking import RANKINGS, QuerySignals
    from codesearch.request import SearchRequest

    import numpy as np

    loads, commit = [load_line("start")], commit_line()
    places = load_set()
    queries = read_build(arguments.trees)
    if arguments.language:
        queries = [query for query in queries if query["language"] in arguments.language]
    ranks = defaultdict(list)  # (ranking, tree) -> [(place rank, file rank)] in query order
    pieces, index_seconds, unanswerable, by_tree = {}, {}, {}, {}
    for tree in indexed_trees(queries, arguments.trees, arguments.index_root, arguments.model,
                              arguments.max_seq_length, arguments.backend):
        pieces[tree.name], index_seconds[tree.name], by_tree[tree.name] = (len(tree.loaded.ids), tree.index_cpu_s,
                                                                           tree.queries)
        if tree.left_out:
            unanswerable[tree.name] = tree.left_out
        for query, vector in zip(tree.queries, tree.vectors):
            tokens = code_tokens(query["query"])
            bm25_scores = tree.retriever.get_scores(tokens) if tokens else np.zeros(len(tree.loaded.ids))
            for ranking in RANKINGS:  # as codesearch ranks by default: tests and non-code demoted
                request = SearchRequest(query=query["query"], top_k=K, ranking=ranking)
                hits = ranked_hits(request, tree.loaded, QuerySignals(vector, bm25_scores), "files")
                ranks[ranking, tree.name].append(place_and_file_rank(hits, query))
    loads.append(load_line("end"))
    languages = list(dict.fromkeys(query["language"] for query in queries))
    figures = {}
    for language in [*languages, "all"]:
        for half in (*HALVES, "both"):
            for ranking in RANKINGS:
                selected = [rank for tree_name, tree_list in by_tree.items()
                            for query, rank in zip(tree_list, ranks[ranking, tree_name])
                            if language in ("all", query["language"]) and half in ("both", query["half"])]
                if selected:
                    figures.setdefault(language, {}).setdefault(half, {})[ranking] = summary(selected)
    record = {"half": "both", "used_to_choose": arguments.used_to_choose, "k": K, "hits": "files, first place",
              "tests": "demote", "non_code": "demote",
              "max_seq_length": arguments.max_seq_length, "set_sha256": sha256_of(PLACES_SET),
              "queries_sha256": sha256_of(arguments.trees / QUERIES_FILE),
              "trees": {name: {"language": places.trees[name].language, "queries": len(by_tree[name]),
                               "pieces": pieces[name], "index_cpu_s": index_seconds[name],
                               "left_out": unanswerable.get(name, 0)} for name in by_tree},
              "languages": figures,
              "per_query": {ranking: {name: [list(rank) for rank in ranks[ranking, name]] for name in by_tree}
                            for ranking in RANKINGS}}
    print(json.dumps({language: {half: {ranking: round(values["place_mrr@10"], 3) for ranking, values in
                                        rankings.items()} for half, rankings in halves.items()}
                      for language, halves in figures.items()}, indent=1), file=sys.stderr)
    path = write_record(arguments.record_name, record, loads, arguments.record_dir, commit=commit)
    print(f"record: {path}", file=sys.stderr)


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    from benchmarks.common import add_record_argument, add_used_to_choose_argument
    from codesearch.__main__ import DEFAULT_MAX_SEQ_LENGTH
    from codesearch.encoders import BACKENDS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, nargs="?", const=DEFAULT_TREES, default=None, metavar="DIR",
                        help=f"fetch the packages and make the trees and queries under DIR (default: {DEFAULT_TREES});"
                             " needs apt-get (Debian) and npm")
    parser.add_argument("--debian-mirror", default=DEBIAN_MIRROR, metavar="URL",
                        help=f"with --build: the Debian mirror (default: {DEBIAN_MIRROR})")
    parser.add_argument("--trees", type=Path, default=DEFAULT_TREES, metavar="DIR",
                        help="the build to score (default: %(default)s)")
    parser.add_argument("--language", action="append", choices=list(LANGUAGES), metavar="LANGUAGE",
                        help="score only these languages (repeatable; default: all)")
    parser.add_argument("--model", default="default", help="'default' or a sentence-transformers folder")
    parser.add_argument("--index-root", type=Path, default=Path("/tmp/codesearch-package-places-index"),
                        metavar="DIR", help="where the per-tree indexes are kept (default: %(default)s)")
    parser.add_argument("--max-seq-length", type=int, default=DEFAULT_MAX_SEQ_LENGTH,
                        help=f"as codesearch's option (default: {DEFAULT_MAX_SEQ_LENGTH})")
    parser.add_argument("--backend", choices=BACKENDS, default="auto", help="as codesearch's option (default: auto)")
    add_used_to_choose_argument(parser)
    add_record_argument(parser, "codesearch_package_places")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    arguments = parse_arguments(argv)
    places = load_set()  # checked before anything is fetched or indexed
    if arguments.build is None:
        score(arguments)
        return
    missing = sorted(tool for tool in ("apt-get", "npm", "dpkg-deb") if shutil.which(tool) is None)
    if missing:
        raise SystemExit(f"{', '.join(missing)} not found: the packages are fetched with Debian's apt-get and "
                         "dpkg-deb and with npm (Node.js); install them")
    registries = Registries(arguments.build / CACHE_FOLDER, DEBIAN_RELEASE, arguments.debian_mirror,
                            refresh_lists=False)
    try:
        queries = build(places, arguments.build, registries, sha256_of(PLACES_SET))
    except FetchError as error:
        raise SystemExit(f"fetching failed: {error}") from error
    counts = defaultdict(int)
    for query in queries:
        counts[query["language"], query["half"]] += 1
    for language in dict.fromkeys(query["language"] for query in queries):
        print(f"{language}: {counts[language, 'dev']} dev + {counts[language, 'test']} test queries", file=sys.stderr)
    print(f"queries: {arguments.build / QUERIES_FILE}", file=sys.stderr)


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from benchmarks.tables import markdown_table, number  # noqa: E402


PLACE_RANKINGS = {"dense": "dense", "bm25": "BM25", "hybrid": "hybrid (default)"}


def codesearch_package_places(record: dict) -> str:
    """Per language and half: place-level MRR@10 (hit@10) of codesearch's output, the answer counted only as the
    first place of its file, then file-level, for dense, BM25 and hybrid."""
    metrics = record["metrics"]
    rows = []
    for language, halves in metrics["languages"].items():
        for half in ("dev", "test", "both") if language == "all" else ("dev", "test"):
            if half not in halves:
                continue
            figures = halves[half]
            cells = [f"{number(figures[ranking][f'{level}_mrr@10'])} ({number(figures[ranking][f'{level}_hit@10'])})"
                     for level in ("place", "file") for ranking in PLACE_RANKINGS]
            title = f"**{language}**" if language == "all" else language
            rows.append([title, half, str(figures["hybrid"]["queries"]), *cells])
    names = list(PLACE_RANKINGS.values())
    return markdown_table(["language", "half", "queries", *(f"place: {name}" for name in names),
                           *(f"file: {name}" for name in names)], rows, "lllrrrrrr")


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "codesearch_package_places": (("codesearch_package_places",), codesearch_package_places),
}


if __name__ == "__main__":
    main()
