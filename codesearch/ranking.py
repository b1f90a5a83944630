"""Rank the pieces of a loaded index for one query: dense, BM25, or both fused by their scaled scores.

- dense: cosine similarity of the query vector with every piece vector (exact, one matmul; int8 and binary
  precisions approximate it, codesearch.quantization), plus PATH_WEIGHT times its cosine with the vector of the
  piece's file path (`PathVectors`): a path names what a file is about (`runtime/time/wheel.rs`,
  `middleware/cors.go`) where a piece of it may not.
- bm25: bm25s over code-aware tokens (identifiers split at `_` and camelCase, see index.code_tokens).
- hybrid: each list cut at FUSION_DEPTH, its scores scaled to [FUSION_FLOOR, 1 + FUSION_FLOOR] over the rows it
  keeps (its last row to its first), then summed with weights DENSE_WEIGHT and 1 - DENSE_WEIGHT. Unlike reciprocal
  rank fusion, a piece far ahead in one list keeps that lead: dense's clear first with BM25's 85th outranks a piece
  20th in both. The default; measured against the others by benchmarks/codesearch_quality.py and
  benchmarks/codesearch_semble.py (codesearch/README.md, Ranking quality).
- tests: "demote" (after semble's path penalties, `ranking/penalties.py`, whose test-file and examples-folder
  patterns these extend; our weights are our own) multiplies the score of pieces in test files (a
  `test`/`tests`/`testing`/`__tests__` folder,
  `test_*`, `*_test.*`, `*.test.*`, `*.spec.*`, `*_spec.*`, `FooTest.java`-style classes, `conftest.py`) by
  TEST_WEIGHT (dense scores are shifted down by DENSE_TEST_SHIFT instead, as
  cosines can be negative), so a function ranks above the tests that call it.
- non-code: "demote" does the same with NON_CODE_WEIGHT / DENSE_NON_CODE_SHIFT to documentation (`.md .rst .txt
  .adoc`, a `doc`/`docs`/`documentation` folder), examples (`example(s)` or Go's `_examples`, `sample(s)`,
  `demo(s)`, `tutorial(s)` folders) and generated files (`*_pb2.py`, `*.pb.go`, `*.min.js`, `*_generated.*`,
  `*.generated.*`, a `generated` folder), so source wins ties (`path_kind`; measured in codesearch/README.md
  before it became the default).
- headers: a piece titled by a file's package or import lines (`package middleware`, `import ...`, `use ...;`,
  `#include`, `require`) says where code lives, not what it does; in a file that has other pieces, its fused or
  BM25 score is multiplied by HEADER_WEIGHT, so a folder's or a word's many file headers do not crowd out the code
  (a file that is only a header, such as a forwarding `#include`, keeps its score).
- files (`group_by_file`): one hit per file, listing its places best first; files rank by their best place plus
  a small share for the file's other good places (FILE_COHERENCE, BM25 and hybrid: semble's file-coherence boost
  and its 0.2, MinishLab/semble `ranking/boosting.py`, MIT, NOTICE).
- places (`rank_places`): one place per definition. Pieces of one file with the same title whose lines overlap (the
  windows of a long definition) become one place with the best piece's score and the union of their lines; pieces
  of byte-identical files (same sha256) are one place, the other paths listed in `also`. A class piece spans its
  methods' lines but not their text (they are holes in it), so the title must match too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from codesearch.priors import apply_priors
from codesearch.quantization import DenseVectors

RANKINGS = ("dense", "bm25", "hybrid")
DEFAULT_RANKING = "hybrid"
FUSION_DEPTH = 100
# the dense share of a fused score, chosen on semble's benchmark and the Python and JavaScript/Go quality sets
DENSE_WEIGHT = 0.6
# a piece's dense score gains this times the query's cosine with its file's path; chosen on semble's benchmark, the
# held-out trees and the Python and JavaScript/Go sets (codesearch/README.md, Ranking quality)
PATH_WEIGHT = 0.2
FUSION_FLOOR = 0.01  # a list's last kept row still counts as found (score > 0)
TEST_WEIGHT = 0.5
DENSE_TEST_SHIFT = 0.1
# rows read per wanted place at first: a place rarely holds more than two windows plus one identical copy
PLACE_DEPTH_FACTOR = 3
PLACE_DEPTH_SLACK = 20
NON_CODE_WEIGHT = 0.5
HEADER_WEIGHT = 0.5
# One hit per file: places read per wanted file, the places a file hit lists, and the weight of the file's other
# candidates in its rank (times the best score, scaled by the file's share of the most any file sums)
FILE_DEPTH_FACTOR = 10
PLACES_PER_FILE = 7  # an 8th place lifts the dev halves' mean score by < 0.01 (benchmarks/codesearch_place_order.py)
FILE_COHERENCE = 0.2
DENSE_NON_CODE_SHIFT = 0.1
# test folders (`__tests__`: Jest), `test_*` files, and a `_test`/`.test`/`.spec` suffix (Go, Rust, C; JavaScript
# and TypeScript); Java, Kotlin, Swift, C# and Scala name a test class `FooTest`/`FooTests`/`FooSpec`/`FooSuite`
_TEST_PATH = re.compile(r"(^|/)(tests?|testing|__tests__)/|(^|/)test_[^/]*$|[_.](tests?|spec)\.[^/]*$"
                        r"|[a-z0-9](Tests?|Spec|Suite)\.(java|kt|swift|cs|scala)$|(^|/)conftest\.py$")
_GENERATED_PATH = re.compile(r"_pb2(_grpc)?\.pyi?$|\.pb(\.gw)?\.(go|cc|h)$|\.min\.js$|[._]generated\.[^/]*$"
                             r"|(^|/)generated/", re.IGNORECASE)
_DOCS_PATH = re.compile(r"\.(md|rst|txt|adoc)$|(^|/)(docs?|documentation)/", re.IGNORECASE)
_EXAMPLE_PATH = re.compile(r"(^|/)_?(examples?|samples?|demos?|tutorials?)/", re.IGNORECASE)  # Go: _examples
# what a path is, tried in this order: a test under docs/ is a test, a generated file in examples/ is generated
PATH_KINDS = (("generated", _GENERATED_PATH), ("test", _TEST_PATH), ("docs", _DOCS_PATH), ("example", _EXAMPLE_PATH))
NON_CODE_KINDS = ("docs", "example", "generated")
# a title that is a file's package, import or include lines, after an owner ("Cache: ", codesearch.chunking), or
# the licence comment a file opens with (`// Copyright(c) 2016`, ` * Licensed to the Apache Software Foundation`,
# `# SPDX-License-Identifier: MIT`): the first line of a block of comments and imports
_HEADER_TITLE = re.compile(r"^(?:[\w.$]+: )?(?:package\s|import\s|from\s+\S+\s+import\s|use\s|#include\b|require\b"
                           r"|using\s|@file:|(?://+|/\*+|\*|#+|--|;+)\s*(?:copyright\b|\(c\)|©|spdx-license-identifier"
                           r"|licensed\b|@license\b))", re.IGNORECASE)


def is_test_path(path: str) -> bool:
    return bool(_TEST_PATH.search(path))


@functools.lru_cache(maxsize=65536)  # asked for every candidate's file on every query
def path_kind(path: str) -> str:
    """"source", "test", "docs", "example" or "generated" (see the module docstring)."""
    return next((kind for kind, pattern in PATH_KINDS if pattern.search(path)), "source")


@dataclass(frozen=True)
class PathVectors:
    """The model's vector of each file's path (as the index stores it, relative to the searched folder) and the file
    of each row: `vectors` (f, d) at float32, or int8 where the index's own vectors are quantized (so the paths do
    not outweigh binary pieces in memory: d bytes a file against d/8 a piece); `row_files` (n,) int32, a row's index
    into `vectors`."""

    vectors: DenseVectors
    row_files: np.ndarray

    @classmethod
    def of_rows(cls, paths: Sequence[str], vector_of: Mapping[str, np.ndarray],
                precision: str = "float32") -> PathVectors | None:
        """The path vectors of rows in files `paths`, from `vector_of` (path -> (d,) float32 vector), for an index
        at `precision`; a file it lacks scores 0 (no path term). None when it has none of them."""
        files = list(dict.fromkeys(paths))
        known = [vector_of.get(path) for path in files]
        width = next((len(vector) for vector in known if vector is not None), 0)
        if not width:
            return None
        matrix = np.stack([np.zeros(width, np.float32) if vector is None else np.asarray(vector, np.float32)
                           for vector in known])  # (f, d)
        file_row = {path: row for row, path in enumerate(files)}
        return cls(DenseVectors.from_float(matrix, "float32" if precision == "float32" else "int8"),
                   np.fromiter((file_row[path] for path in paths), dtype=np.int32, count=len(paths)))

    @property
    def resident_bytes(self) -> int:
        """f*d*4 (float32) or f*d (int8) for the path vectors, plus n*4 for the rows' files."""
        return int(self.vectors.resident_bytes + self.row_files.nbytes)

    def scores(self, query_vector: np.ndarray) -> np.ndarray:
        """(n,) float64: each row's cosine of its file's path with the query (int8: approximate)."""
        return self.vectors.scores(query_vector, 0)[self.row_files]


def rank(query_vector: np.ndarray | None, vectors: np.ndarray | DenseVectors, bm25_scores: np.ndarray | None,
         paths: list[str], ranking: str, top_k: int, demote_tests: bool,
         demote_non_code: bool = False, path_vectors: PathVectors | None = None) -> list[tuple[int, float]]:
    """(row, score) of the best top_k rows, best first. `bm25_scores` holds one score per row."""
    if not paths:
        return []
    scores = score_rows(query_vector, vectors, bm25_scores, paths, ranking, demote_tests, demote_non_code, top_k,
                        path_vectors=path_vectors)
    return _ranked_rows(scores, ranking, min(top_k, len(paths)))


def _ranked_rows(scores: np.ndarray, ranking: str, k: int) -> list[tuple[int, float]]:
    best = _top(scores, k)
    best = best[scores[best] > (-np.inf if ranking == "dense" else 0)]  # filtered out, or found by no list
    return [(int(row), float(scores[row])) for row in best]


def dense_scores(query_vector: np.ndarray, vectors: np.ndarray | DenseVectors, top_k: int,
                 path_vectors: PathVectors | None = None) -> np.ndarray:
    """(n,) cosines of the query with every row: a float32 matrix, or vectors at any precision (binary rescores
    its best rows for `top_k` hits, codesearch.quantization); plus PATH_WEIGHT x each row's path cosine."""
    offsets = PATH_WEIGHT * path_vectors.scores(query_vector) if path_vectors is not None else None
    if isinstance(vectors, DenseVectors):  # binary picks the rows it rescores with the path term in
        return vectors.scores(query_vector, top_k, offsets)
    scores = vectors @ query_vector
    return scores if offsets is None else scores + offsets


def score_rows(query_vector: np.ndarray | None, vectors: np.ndarray | DenseVectors, bm25_scores: np.ndarray | None,
               paths: list[str], ranking: str, demote_tests: bool, demote_non_code: bool = False,
               top_k: int = 10, query: str = "", titles: Sequence[str] = (),
               dense_weight: float = DENSE_WEIGHT, path_vectors: PathVectors | None = None) -> np.ndarray:
    """One score per row (float64, higher is better); for bm25 and hybrid, 0 means no list found the row. With the
    query's text and the rows' titles, bm25 and hybrid scores get the code priors (codesearch.priors) before test
    and non-code files are demoted, so a boosted test still ranks below the code it tests. `dense_weight`: hybrid's
    dense share; `path_vectors`: the rows' file paths, for the dense score's path term (None: none)."""
    n = len(paths)
    if ranking == "dense":
        scores = dense_scores(query_vector, vectors, top_k, path_vectors)
    elif ranking == "bm25":
        scores = np.asarray(bm25_scores, dtype=np.float64)
    elif ranking == "hybrid":  # fusion reads dense's best FUSION_DEPTH rows: binary rescores for that many hits
        scores = fuse(dense_scores(query_vector, vectors, max(top_k, FUSION_DEPTH), path_vectors),
                      np.asarray(bm25_scores, dtype=np.float64), dense_weight)
    else:
        raise ValueError(f"unknown ranking {ranking!r}; valid: {', '.join(RANKINGS)}")
    scores = np.asarray(scores, dtype=np.float64)
    if query and ranking != "dense":
        scores = apply_priors(scores, query, paths, titles)
    headers = header_rows(scores, paths, titles) if len(titles) and ranking != "dense" else ()
    if len(headers):
        scores = scores.copy()  # BM25 scores may be the caller's array
        scores[headers] *= HEADER_WEIGHT
    demoted = {"test"} if demote_tests else set()
    if demote_non_code:
        demoted.update(NON_CODE_KINDS)
    # dense scores (cosines, possibly negative) move down by a shift, fused or BM25 scores shrink by a factor
    dense = ranking == "dense"
    change = {"test": DENSE_TEST_SHIFT if dense else TEST_WEIGHT}
    change.update(dict.fromkeys(NON_CODE_KINDS, DENSE_NON_CODE_SHIFT if dense else NON_CODE_WEIGHT))
    by_path = {path: change[kind] for path in set(paths) if (kind := path_kind(path)) in demoted}  # per file, once
    if not by_path:
        return scores
    if dense:
        return scores - np.fromiter((by_path.get(path, 0.0) for path in paths), dtype=np.float64, count=n)
    return scores * np.fromiter((by_path.get(path, 1.0) for path in paths), dtype=np.float64, count=n)


def header_rows(scores: np.ndarray, paths: Sequence[str], titles: Sequence[str]) -> np.ndarray:
    """The found rows (score > 0) titled by a file's package or import lines whose file has other pieces. A file's
    pieces are adjacent rows (the index writes each file's pieces together), so whether it has others is a look at
    a header's neighbours, not a count over every row on each query."""
    last = len(paths) - 1
    return np.array([row for row in np.flatnonzero(scores > 0) if _is_header(titles[row]) and (
        (row > 0 and paths[row - 1] == paths[row]) or (row < last and paths[row + 1] == paths[row]))], dtype=np.intp)


@functools.lru_cache(maxsize=65536)  # asked for every found row on every query
def _is_header(title: str) -> bool:
    return _HEADER_TITLE.match(title) is not None


def fuse(dense: np.ndarray, lexical: np.ndarray, dense_weight: float = DENSE_WEIGHT) -> np.ndarray:
    """(n,) dense cosines and (n,) BM25 scores -> (n,) fused scores (module docstring), 0 for rows neither list
    holds; `dense_weight` is dense's share, BM25's the rest."""
    scores = np.zeros(len(dense))
    for list_scores, floor, weight in ((dense, -np.inf, dense_weight), (lexical, 0.0, 1.0 - dense_weight)):
        best = _top(list_scores, min(FUSION_DEPTH, len(dense)))
        best = best[list_scores[best] > floor]  # BM25 lists only pieces sharing a word with the query
        if not len(best):
            continue
        kept = list_scores[best]
        spread = kept[0] - kept[-1]
        scaled = (kept - kept[-1]) / spread if spread > 0 else np.ones(len(best))  # (len(best),) in [0, 1]
        scores[best] += weight * (FUSION_FLOOR + scaled)
    return scores


@dataclass(frozen=True)
class PlaceOrder:
    """How a file hit orders its places once the file is ranked (group_by_file); the file's rank still comes from
    its best-scored place. A header (its package, import or licence lines) comes after every other place of its
    file; the others by score x (1 + length_weight x ln(lines)): of a file's places that the query reaches about
    equally, the longer one (the function that does the work) comes before a short neighbour (a getter, a builder
    step, an enum constant, a struct's fields), while a place scored far higher keeps its lead.
    `length_weight`: 0.5, the best of 0 (score alone), 0.1, 0.2, 0.3, 0.5, 1, 2, 5 and 100 on both dev halves by
    the mean of their first-place headlines: semble's (span annotations, NDCG@10; it favours long places, its spans
    often cover a whole class) and the package place-level set's (doc comment -> function, MRR@10; best at 0 to
    0.2), 0.463 against 0.461 at 1 and 0.440 by score alone (benchmarks/codesearch_place_order.py, its record)."""

    length_weight: float = 0.5

    def key(self, place: Place) -> tuple[bool, float]:
        return place.header, -place.score * (1.0 + self.length_weight * np.log(place.end_line - place.line + 1))


PLACE_ORDER = PlaceOrder()


@dataclass
class Place:
    """One hit: the best piece of a place (`row`, its score) and the lines every merged piece covers."""

    row: int
    score: float
    path: str
    line: int
    end_line: int
    also: list[str] = field(default_factory=list)  # the other paths of byte-identical files, in rank order
    header: bool = False  # titled by the file's package, import or licence lines (_HEADER_TITLE)

    def overlaps(self, line: int, end_line: int) -> bool:
        return line <= self.end_line and end_line >= self.line


def rank_places(query_vector: np.ndarray | None, vectors: np.ndarray | DenseVectors, bm25_scores: np.ndarray | None,
                paths: list[str], lines: Sequence[int], end_lines: Sequence[int], titles: Sequence[str],
                file_keys: dict[str, str], ranking: str, top_k: int, demote_tests: bool,
                demote_non_code: bool = False, allowed: np.ndarray | None = None, query: str = "",
                dense_weight: float = DENSE_WEIGHT, path_vectors: PathVectors | None = None) -> list[Place]:
    """The best top_k places, best first (see the module docstring). `file_keys` maps a path to its content hash;
    a path missing from it is a file of its own. `allowed`: (n,) bool, the rows a hit may come from (None: all).
    `query`: its text, for the code priors of BM25 and hybrid rankings (codesearch.priors); `dense_weight`:
    hybrid's dense share; `path_vectors`: the rows' file paths, for the dense score's path term."""
    if not paths:
        return []
    scores = score_rows(query_vector, vectors, bm25_scores, paths, ranking, demote_tests, demote_non_code, top_k,
                        query, titles, dense_weight, path_vectors)
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf if ranking == "dense" else 0.0)
    # Merging only shrinks the list: read rows in growing slices until top_k places are found or rows run out.
    depth = min(len(paths), PLACE_DEPTH_FACTOR * top_k + PLACE_DEPTH_SLACK)
    while True:
        rows = _ranked_rows(scores, ranking, depth)
        places = merge_places(rows, paths, lines, end_lines, titles, file_keys)
        if len(places) >= top_k or len(rows) < depth or depth == len(paths):
            return places[:top_k]
        depth = min(len(paths), depth * 2)



def group_by_file(places: list[Place], top_k: int, coherence: float = FILE_COHERENCE,
                  order: PlaceOrder = PLACE_ORDER) -> list[list[Place]]:
    """Ranked places, best first -> the best `top_k` files, each the list of its places in `order` (at most
    PLACES_PER_FILE). A file ranks by its best place's score plus `coherence` x the best score x its places' summed
    score over the largest such sum (scores >= 0: BM25 and hybrid; pass 0 for dense cosines), so a file holding
    several good places outranks one lone place of equal score."""
    by_file: dict[str, list[Place]] = {}
    for place in places:
        by_file.setdefault(place.path, []).append(place)
    if not by_file:
        return []
    best = places[0].score
    summed = {path: sum(place.score for place in group) for path, group in by_file.items()}
    most = max(summed.values())
    lift = coherence * best / most if coherence and best > 0 and most > 0 else 0.0
    ranked = sorted(by_file, key=lambda path: -(by_file[path][0].score + lift * summed[path]))  # stable: ties keep rank
    return [sorted(by_file[path], key=order.key)[:PLACES_PER_FILE] for path in ranked[:top_k]]


def merge_places(rows: list[tuple[int, float]], paths: list[str], lines: Sequence[int], end_lines: Sequence[int],
                 titles: Sequence[str], file_keys: dict[str, str]) -> list[Place]:
    """Ranked (row, score) pairs, best first -> places, best first. A row joins the first place of the same file
    content and title whose lines it overlaps (widening them); a widened place that now overlaps a later place
    of that content and title absorbs it (a window bridging two others)."""
    places: list[Place] = []
    by_key: dict[tuple[str, str], list[Place]] = {}
    for row, score in rows:
        path = paths[row]
        key = (file_keys.get(path, path), titles[row])
        line, end_line = int(lines[row]), int(end_lines[row])
        same_content = by_key.setdefault(key, [])
        place = next((p for p in same_content if p.overlaps(line, end_line)), None)
        if place is None:
            place = Place(row, score, path, line, end_line, header=_is_header(titles[row]))
            places.append(place)
            same_content.append(place)
            continue
        _widen(place, path, line, end_line)
        for other in [p for p in same_content if p is not place and p.overlaps(place.line, place.end_line)]:
            _widen(place, other.path, other.line, other.end_line)
            for also in other.also:
                _widen(place, also, other.line, other.end_line)
            same_content.remove(other)
            places.remove(other)
    for same_content in by_key.values():
        if len(same_content) > 1:  # rare: a long declaration whose windows between two ranked ones did not rank
            _join_chained_windows(same_content, places, paths, lines, end_lines, titles)
    return places


def _join_chained_windows(same_content: list[Place], places: list[Place], paths: list[str], lines: Sequence[int],
                          end_lines: Sequence[int], titles: Sequence[str]) -> None:
    """Places of one file and title that the index's windows of that title chain together (each overlapping the
    next) are one declaration: the later places join the best one. Two declarations with one title (overloads)
    that no window joins stay apart."""
    path, title = same_content[0].path, titles[same_content[0].row]
    spans = sorted((int(lines[row]), int(end_lines[row])) for row, (other_path, other_title)
                   in enumerate(zip(paths, titles)) if other_path == path and other_title == title)
    chain_of, chain, reach = {}, 0, -1
    for line, end_line in spans:  # chains of overlapping windows, numbered in line order
        chain += line > reach
        reach = max(reach, end_line)
        chain_of[line] = chain
    kept: dict[int, Place] = {}
    for place in list(same_content):  # best first
        first = kept.setdefault(chain_of.get(place.line, -place.line), place)
        if first is not place:
            for other_path in (place.path, *place.also):
                _widen(first, other_path, place.line, place.end_line)
            same_content.remove(place)
            places.remove(place)


def _widen(place: Place, path: str, line: int, end_line: int) -> None:
    place.line, place.end_line = min(place.line, line), max(place.end_line, end_line)
    if path != place.path and path not in place.also:
        place.also.append(path)


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Rows of the k largest scores, best first (ties: lower row first)."""
    if k >= len(scores):
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.lexsort((part, -scores[part]))]
