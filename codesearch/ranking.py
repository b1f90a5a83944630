"""Rank the pieces of a loaded index for one query: dense, BM25, or both fused by their scaled scores.

- dense: cosine similarity of the query vector with every piece vector (exact, one matmul; int8 and binary
  precisions approximate it, codesearch.quantization), plus a term for the piece's file path: the loaded index
  scores it (codesearch.loaded.LoadedIndex.dense_scores).
- bm25: bm25s over code-aware tokens (identifiers split at `_` and camelCase, see index.code_tokens).
- hybrid: each list cut at FUSION_DEPTH, its scores scaled to [FUSION_FLOOR, 1 + FUSION_FLOOR] over the rows it
  keeps (its last row to its first), then summed with weights DENSE_WEIGHT and 1 - DENSE_WEIGHT. Unlike reciprocal
  rank fusion, a piece far ahead in one list keeps that lead: dense's clear first with BM25's 85th outranks a piece
  20th in both (DENSE_WEIGHT: RankingConfig.dense_weight's default). The default; measured against the others by
  benchmarks/codesearch_quality.py and benchmarks/codesearch_semble.py (codesearch/reports/ranking.md).
- tests: "demote" (after semble's path penalties, `ranking/penalties.py`, whose test-file and examples-folder
  patterns these extend; our weights are our own) multiplies the score of pieces in test files (a
  `test`/`tests`/`testing`/`__tests__` folder,
  `test_*`, `*_test.*`, `*.test.*`, `*.spec.*`, `*_spec.*`, `FooTest.java`-style classes, `conftest.py`) by
  TEST_WEIGHT (dense scores are shifted down by DENSE_TEST_SHIFT instead, as
  cosines can be negative), so a function ranks above the tests that call it.
- non-code: "demote" does the same with NON_CODE_WEIGHT / DENSE_NON_CODE_SHIFT to documentation (`.md .rst .txt
  .adoc`, a `doc`/`docs`/`documentation` folder), examples (`example(s)` or Go's `_examples`, `sample(s)`,
  `demo(s)`, `tutorial(s)` folders) and generated files (`*_pb2.py`, `*.pb.go`, `*.min.js`, `*_generated.*`,
  `*.generated.*`, a `generated` folder), so source wins ties (`path_kind`; measured in codesearch/reports/ranking.md
  before it became the default).
- headers: a piece titled by a file's package or import lines (`package middleware`, `import ...`, `use ...;`,
  `#include`, `require`) says where code lives, not what it does; in a file that has other pieces, its fused or
  BM25 score is multiplied by HEADER_WEIGHT, so a folder's or a word's many file headers do not crowd out the code
  (a file that is only a header, such as a forwarding `#include`, keeps its score).
- files (`group_by_file`): one hit per file, listing its places best first; files rank by their best place plus
  a small share for the file's other good places (FILE_COHERENCE, BM25 and hybrid: semble's file-coherence boost
  and its 0.2, MinishLab/semble `ranking/boosting.py`, MIT, NOTICE).
- one entry point: `rank(request, index, signals, config)` scores the rows (`score_rows`), merges them into places
  (`rank_places`) and groups those into file hits (`group_by_file`). `RankingConfig` holds the values a benchmark
  sweeps or ablates, at the product's defaults (DEFAULT_RANKING_CONFIG).
- places (`rank_places`): one place per definition. Pieces of one file with the same title whose lines overlap (the
  windows of a long definition) become one place with the best piece's score and the union of their lines; pieces
  of byte-identical files (same sha256) are one place, the other paths listed in `also`. A class piece spans its
  methods' lines but not their text (they are holes in it), so the title must match too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from c2llm_data.tokens import code_tokens
from codesearch.files import is_under, matches_glob
from codesearch.priors import PRIOR_RULES, apply_priors

if TYPE_CHECKING:  # codesearch.request reads this module's rankings: a type only, imported for checkers
    from codesearch.loaded import LoadedIndex
    from codesearch.request import SearchRequest

RANKINGS = ("dense", "bm25", "hybrid")
DEFAULT_RANKING = "hybrid"
FUSION_DEPTH = 100
# the dense share of a fused score, chosen on semble's benchmark and the Python and JavaScript/Go quality sets
DENSE_WEIGHT = 0.6
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
# the place order's defaults (PlaceOrder: what each weighs and how they were chosen)
DEFAULT_LENGTH_WEIGHT = 0.2
DEFAULT_DENSE_SHARE = 0.75
DEFAULT_TITLE_WEIGHT = 1.0
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


_TITLE_OWNER = re.compile(r"^[\w.$]+: ")  # the owner a member's title starts with (codesearch.chunking)


def is_test_path(path: str) -> bool:
    return bool(_TEST_PATH.search(path))


@functools.lru_cache(maxsize=65536)  # asked for every candidate's file on every query
def path_kind(path: str) -> str:
    """"source", "test", "docs", "example" or "generated" (see the module docstring)."""
    return next((kind for kind, pattern in PATH_KINDS if pattern.search(path)), "source")


@dataclass(frozen=True)
class PlaceOrder:
    """How a file hit orders its places once the file is ranked (group_by_file); the file's rank still comes from
    its best-scored place. A header (its package, import or licence lines) comes after every other place of its
    file; the others by their order score:
    ((1 - dense_share) x score + dense_share x dense) x (1 + title_weight x title_match) x (1 + length_weight x
    ln(lines)).
    - `dense_share`: the place's own dense score (its cosine with the query plus the path term, `Place.dense`)
      beside its fused one. Within a file the fused score's BM25 half rewards the piece that repeats the query's
      words most (a class declaration, a neighbouring overload); the model's own judgement says which of them does
      what the query says. Ignored where the ranking read no query vector (bm25).
    - `title_weight`: the share of the place's declaration words that the query holds (`Place.title_match`), so
      of two neighbours the one whose name the query describes (`isAscii` for "only ASCII characters") goes first.
    - `length_weight`: of a file's places that the query reaches about equally, the longer one (the function that
      does the work) comes before a short neighbour (a getter, a builder step, an enum constant, a struct's
      fields), while a place scored far higher keeps its lead.
    Chosen on both dev halves by the mean of their first-place headlines: semble's (span annotations, NDCG@10; it
    favours long places, its spans often cover a whole class) and the package place-level set's (doc comment ->
    function, MRR@10): 0.2 / 0.75 / 1 the best of 60 combinations (length 0, 0.2, 0.5, 1; dense 0 to 1 by 0.25;
    title 0, 1, 2), 0.491 against 0.463 for the order by length alone (0.5 / 0 / 0), file level unchanged
    (benchmarks/codesearch_place_order.py, its record; codesearch/reports/ranking.md)."""

    length_weight: float = DEFAULT_LENGTH_WEIGHT
    dense_share: float = DEFAULT_DENSE_SHARE
    title_weight: float = DEFAULT_TITLE_WEIGHT

    def __post_init__(self):
        if not self.length_weight >= 0:  # also refuses nan
            raise ValueError(f"length_weight {self.length_weight} would put short places first; pass 0 (places by "
                             f"score alone) or more, the product's is {DEFAULT_LENGTH_WEIGHT}")
        if not 0.0 <= self.dense_share <= 1.0:
            raise ValueError(f"dense_share {self.dense_share} is a share of the order score; pass one from 0 (the "
                             f"fused score alone) to 1 (the dense score alone), the product's is "
                             f"{DEFAULT_DENSE_SHARE}")
        if not self.title_weight >= 0:
            raise ValueError(f"title_weight {self.title_weight} would put a place whose name the query describes "
                             f"later; pass 0 (titles ignored) or more, the product's is {DEFAULT_TITLE_WEIGHT}")

    def key(self, place: Place) -> tuple[bool, float]:
        score = place.score if place.dense is None else (
            (1.0 - self.dense_share) * place.score + self.dense_share * place.dense)
        return place.header, -(score * (1.0 + self.title_weight * place.title_match)
                               * (1.0 + self.length_weight * np.log(place.end_line - place.line + 1)))


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
    # what the place order reads beside the score (rank_places fills them where the order weighs them): the best
    # piece's dense score (None: the ranking read no query vector) and the share of its title's words in the query
    dense: float | None = None
    title_match: float = 0.0

    def overlaps(self, line: int, end_line: int) -> bool:
        return line <= self.end_line and end_line >= self.line


@dataclass(frozen=True)
class RankingConfig:
    """The ranking's values that a benchmark sweeps or ablates, at the product's defaults (DEFAULT_RANKING_CONFIG):
    a benchmark builds its own instead of passing loose values through the product's functions."""

    dense_weight: float = DENSE_WEIGHT  # hybrid's dense share of a fused score; BM25's is the rest
    file_coherence: float = FILE_COHERENCE  # the weight of a file's other places in its rank (bm25 and hybrid)
    place_order: PlaceOrder = PLACE_ORDER  # how a file hit orders its places
    # the rules of the code priors that bm25 and hybrid apply (codesearch.priors): fewer measure what one is worth
    priors: frozenset[str] = PRIOR_RULES

    def __post_init__(self):
        if not 0.0 <= self.dense_weight <= 1.0:
            raise ValueError(f"dense_weight {self.dense_weight} is a share of the fused score; pass one from 0 "
                             f"(BM25 alone) to 1 (dense alone), the product's is {DENSE_WEIGHT}")
        if unknown := set(self.priors) - PRIOR_RULES:
            raise ValueError(f"unknown prior rules {sorted(unknown)}; pass some of {', '.join(sorted(PRIOR_RULES))} "
                             "(none: rank without the code priors)")
        if self.file_coherence < 0:
            raise ValueError(f"file_coherence {self.file_coherence} would rank a file lower for its other good "
                             f"places; pass 0 (a file ranks by its best place alone) or more, the product's is "
                             f"{FILE_COHERENCE}")


DEFAULT_RANKING_CONFIG = RankingConfig()


@dataclass(frozen=True, eq=False)  # arrays: compared or hashed by identity
class QuerySignals:
    """What one query brings to ranking beside its request, for the rows of one loaded index: its embedding (read by
    dense and hybrid) and every row's BM25 score (read by bm25 and hybrid); a ranking that reads neither leaves it
    None."""

    vector: np.ndarray | None = None  # (d,) the query's unit vector
    bm25: np.ndarray | None = None  # (n,) one score per row, 0 where the query shares no word with it
    # (n,) every row's dense score (`dense_rows`), once per query: the list scores and the place order both read it
    dense: np.ndarray | None = None


def dense_rows(request: SearchRequest, index: LoadedIndex, signals: QuerySignals, top_k: int) -> np.ndarray:
    """(n,) the rows' dense scores for a ranking that reads the query's vector: the signals' own when they carry
    them, else the index's (`LoadedIndex.dense_scores`) for `top_k` hits (hybrid: at least FUSION_DEPTH, the rows
    fusion reads, which binary vectors rescore exactly)."""
    if signals.dense is not None:
        return signals.dense
    return index.dense_scores(signals.vector, top_k if request.ranking == "dense" else max(top_k, FUSION_DEPTH))


def allowed_rows(paths: Sequence[str], request: SearchRequest) -> np.ndarray | None:
    """(n,) bool: the rows whose path the request's include/exclude globs and `path` (a file or folder relative to
    the searched folder) let through; None when it names none of them (every row)."""
    include, exclude, under = request.include, request.exclude, request.path or ""
    if not (include or exclude or under):
        return None
    wanted = {path: (not include or matches_glob(path, include)) and not (exclude and matches_glob(path, exclude))
              and is_under(path, under) for path in set(paths)}
    return np.fromiter((wanted[path] for path in paths), dtype=bool, count=len(paths))


def rank(request: SearchRequest, index: LoadedIndex, signals: QuerySignals,
         config: RankingConfig = DEFAULT_RANKING_CONFIG) -> list[list[Place]]:
    """The request's best `top_k` file hits, best first, each the list of its places in the config's place order
    (at most PLACES_PER_FILE): the rows scored (`score_rows`), merged into places (`rank_places`, FILE_DEPTH_FACTOR
    places read per file wanted) and grouped by file (`group_by_file`)."""
    places = rank_places(request, index, signals, request.top_k * FILE_DEPTH_FACTOR, config)
    # cosines can be negative and say nothing summed: a dense file ranks by its best place alone
    coherence = 0.0 if request.ranking == "dense" else config.file_coherence
    return group_by_file(places, request.top_k, coherence, config.place_order)


def rank_places(request: SearchRequest, index: LoadedIndex, signals: QuerySignals, top_k: int,
                config: RankingConfig = DEFAULT_RANKING_CONFIG) -> list[Place]:
    """The best `top_k` places, best first (see the module docstring), from the rows the request's filters allow
    (`allowed_rows`)."""
    paths = index.paths
    if not paths:
        return []
    if request.ranking != "bm25" and signals.vector is not None:  # scored once, for the rows and their order
        signals = replace(signals, dense=dense_rows(request, index, signals, top_k))
    scores = score_rows(request, index, signals, top_k, config)
    allowed = allowed_rows(paths, request)
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf if request.ranking == "dense" else 0.0)
    # Merging only shrinks the list: read rows in growing slices until top_k places are found or rows run out.
    depth = min(len(paths), PLACE_DEPTH_FACTOR * top_k + PLACE_DEPTH_SLACK)
    while True:
        rows = _ranked_rows(scores, request.ranking, depth)
        places = merge_places(rows, paths, index.lines, index.end_lines, index.titles, index.file_keys)
        if len(places) >= top_k or len(rows) < depth or depth == len(paths):
            return fill_order_signals(places[:top_k], request, index, signals, config.place_order)
        depth = min(len(paths), depth * 2)


def fill_order_signals(places: list[Place], request: SearchRequest, index: LoadedIndex, signals: QuerySignals,
                       order: PlaceOrder) -> list[Place]:
    """`places` with what `order` weighs beside their scores filled in (PlaceOrder): each best piece's dense score
    (where the order has a dense share and the ranking reads the query's vector) and its title's match with the
    query (where it has a title weight)."""
    if not places:
        return places
    if order.dense_share and request.ranking != "bm25" and signals.vector is not None:
        dense = dense_rows(request, index, signals, len(places))  # the ranking's own: fused scores keep no cosines
        for place in places:
            place.dense = float(dense[place.row])
    if order.title_weight:
        query_words = frozenset(code_tokens(request.query))
        for place in places:
            words = title_words(index.titles[place.row])
            place.title_match = len(words & query_words) / len(words) if words else 0.0
    return places


@functools.lru_cache(maxsize=65536)  # asked for every listed place on every query
def title_words(title: str) -> frozenset[str]:
    """The words of a piece's declaration (code_tokens), its owner ("Cache: ", codesearch.chunking) left out."""
    return frozenset(code_tokens(_TITLE_OWNER.sub("", title, count=1)))


def rank_rows(request: SearchRequest, index: LoadedIndex, signals: QuerySignals, top_k: int,
              config: RankingConfig = DEFAULT_RANKING_CONFIG) -> list[tuple[int, float]]:
    """(row, score) of the best `top_k` raw pieces, best first: the ranking's list scores with test and non-code
    files demoted as the request asks, but no code priors, header rule, places or filters (what the quality
    benchmark's `--hits pieces` measures)."""
    if not index.paths:
        return []
    scores = demoted(list_scores(request, index, signals, top_k, config), request, index.paths)
    return _ranked_rows(scores, request.ranking, min(top_k, len(index.paths)))


def _ranked_rows(scores: np.ndarray, ranking: str, k: int) -> list[tuple[int, float]]:
    best = _top(scores, k)
    best = best[scores[best] > (-np.inf if ranking == "dense" else 0)]  # filtered out, or found by no list
    return [(int(row), float(scores[row])) for row in best]


def list_scores(request: SearchRequest, index: LoadedIndex, signals: QuerySignals, top_k: int,
                config: RankingConfig = DEFAULT_RANKING_CONFIG) -> np.ndarray:
    """(n,) float64, one score per row from the request's ranking alone: dense cosines (path term in, the index's
    `dense_scores`), BM25 scores, or both fused (`fuse`, with the config's dense weight); `top_k`: the hits wanted,
    which binary vectors rescore exactly (hybrid: at least FUSION_DEPTH, the rows fusion reads)."""
    ranking = request.ranking
    if ranking not in RANKINGS:
        raise ValueError(f"unknown ranking {ranking!r}; valid: {', '.join(RANKINGS)}")
    if ranking != "bm25" and signals.vector is None:
        raise ValueError(f"ranking {ranking!r} reads the query's vector, and none was given; pass QuerySignals("
                         "vector=...) or rank with ranking 'bm25'")
    if ranking != "dense" and signals.bm25 is None:
        raise ValueError(f"ranking {ranking!r} reads every row's BM25 score, and none were given; pass "
                         "QuerySignals(bm25=...) or rank with ranking 'dense'")
    if ranking == "dense":
        scores = dense_rows(request, index, signals, top_k)
    elif ranking == "bm25":
        scores = signals.bm25
    else:  # hybrid
        scores = fuse(dense_rows(request, index, signals, top_k), np.asarray(signals.bm25, dtype=np.float64),
                      config.dense_weight)
    return np.asarray(scores, dtype=np.float64)


def score_rows(request: SearchRequest, index: LoadedIndex, signals: QuerySignals, top_k: int,
               config: RankingConfig = DEFAULT_RANKING_CONFIG) -> np.ndarray:
    """One score per row (float64, higher is better); for bm25 and hybrid, 0 means no list found the row: the list
    scores (`list_scores`), then `adjusted` (code priors, header rule, demotions)."""
    return adjusted(list_scores(request, index, signals, top_k, config), request, index.paths, index.titles, config)


def adjusted(scores: np.ndarray, request: SearchRequest, paths: Sequence[str], titles: Sequence[str],
             config: RankingConfig = DEFAULT_RANKING_CONFIG) -> np.ndarray:
    """(n,) list scores of rows with these paths and titles -> their final scores: for bm25 and hybrid the code
    priors (codesearch.priors, the config's rules of them) and the header rule, then test and non-code files
    demoted as the request asks, so a boosted test still ranks below the code it tests. The caller's array is left
    as it was."""
    scores = np.asarray(scores, dtype=np.float64)
    if request.ranking != "dense" and len(paths):
        if config.priors:
            scores = apply_priors(scores, request.query, paths, titles, frozenset(config.priors))
        headers = header_rows(scores, paths, titles)
        if len(headers):
            scores = scores.copy()  # BM25 scores may be the caller's array
            scores[headers] *= HEADER_WEIGHT
    return demoted(scores, request, paths)


def demoted(scores: np.ndarray, request: SearchRequest, paths: Sequence[str]) -> np.ndarray:
    """(n,) scores with test files and docs, examples and generated files moved down as the request's `tests` and
    `non_code` ask: dense scores (cosines, possibly negative) by a shift, fused or BM25 scores by a factor."""
    demoted_kinds = {"test"} if request.tests == "demote" else set()
    if request.non_code == "demote":
        demoted_kinds.update(NON_CODE_KINDS)
    dense = request.ranking == "dense"
    change = {"test": DENSE_TEST_SHIFT if dense else TEST_WEIGHT}
    change.update(dict.fromkeys(NON_CODE_KINDS, DENSE_NON_CODE_SHIFT if dense else NON_CODE_WEIGHT))
    by_path = {path: change[kind] for path in set(paths) if (kind := path_kind(path)) in demoted_kinds}  # per file
    if not by_path:
        return scores
    n = len(paths)
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
