"""Rank the pieces of a loaded index for one query: dense, BM25, or both fused by reciprocal rank.

- dense: cosine similarity of the query vector with every piece vector (exact, one matmul).
- bm25: bm25s over code-aware tokens (identifiers split at `_` and camelCase, see index.code_tokens).
- hybrid: reciprocal rank fusion of the two, score = sum over lists of 1 / (RRF_K + rank), ranks from 1, each
  list cut at FUSION_DEPTH. The default; measured against the others by benchmarks/codesearch_quality.py.
- tests: "demote" multiplies the score of pieces in test files (a `test`/`tests` folder, `test_*.py`,
  `*_test.py`, `conftest.py`) by TEST_WEIGHT (dense scores are shifted down by DENSE_TEST_SHIFT instead, as
  cosines can be negative), so a function ranks above the tests that call it.
"""

from __future__ import annotations

import re

import numpy as np

RANKINGS = ("dense", "bm25", "hybrid")
DEFAULT_RANKING = "hybrid"
RRF_K = 60  # the constant of Cormack et al. (2009)
FUSION_DEPTH = 100
TEST_WEIGHT = 0.5
DENSE_TEST_SHIFT = 0.1
_TEST_PATH = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*$|_tests?\.[^/]*$|(^|/)conftest\.py$")


def is_test_path(path: str) -> bool:
    return bool(_TEST_PATH.search(path))


def rank(query_vector: np.ndarray | None, vectors: np.ndarray, bm25_scores: np.ndarray | None, paths: list[str],
         ranking: str, top_k: int, demote_tests: bool) -> list[tuple[int, float]]:
    """(row, score) of the best top_k rows, best first. `bm25_scores` holds one score per row."""
    n = len(paths)
    if n == 0:
        return []
    if ranking == "dense":
        scores = vectors @ query_vector
    elif ranking == "bm25":
        scores = np.asarray(bm25_scores, dtype=np.float64)
    elif ranking == "hybrid":
        scores = np.zeros(n)
        lexical = np.asarray(bm25_scores, dtype=np.float64)
        for list_scores, floor in ((vectors @ query_vector, -np.inf), (lexical, 0.0)):
            best = _top(list_scores, min(FUSION_DEPTH, n))
            best = best[list_scores[best] > floor]  # BM25 lists only pieces sharing a word with the query
            scores[best] += 1.0 / (RRF_K + np.arange(1, len(best) + 1))
    else:
        raise ValueError(f"unknown ranking {ranking!r}; valid: {', '.join(RANKINGS)}")
    scores = np.asarray(scores, dtype=np.float64)
    if demote_tests:
        tests = np.fromiter((is_test_path(p) for p in paths), dtype=bool, count=n)
        if tests.any():
            scores = scores.copy()
            if ranking == "dense":
                scores[tests] -= DENSE_TEST_SHIFT
            else:
                scores[tests] *= TEST_WEIGHT
    best = _top(scores, min(top_k, n))
    if ranking != "dense":
        best = best[scores[best] > 0]  # a piece no list found is not a hit
    return [(int(row), float(scores[row])) for row in best]


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Rows of the k largest scores, best first (ties: lower row first)."""
    if k >= len(scores):
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.lexsort((part, -scores[part]))]
