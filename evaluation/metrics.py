"""The suite's metrics, computed by sentence-transformers' `InformationRetrievalEvaluator`.

Dense models go through the evaluator as a whole (it encodes, scores and ranks); rankings made
elsewhere (BM25) go through its `compute_metrics`, so every number comes from the same library code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator

    from evaluation.beir import BeirDataset

NDCG_CUTOFF = 10
MRR_CUTOFF = 10
RECALL_CUTOFF = 100
# Every ranking is cut at this depth: the deepest cutoff of the metrics above.
RANKING_DEPTH = max(NDCG_CUTOFF, MRR_CUTOFF, RECALL_CUTOFF)
# Output keys, in table order; nDCG@10 is the headline number.
METRIC_NAMES = (f"ndcg@{NDCG_CUTOFF}", f"mrr@{MRR_CUTOFF}", f"recall@{RECALL_CUTOFF}")


def build_evaluator(
    dataset: BeirDataset,
    *,
    batch_size: int = 32,
    show_progress_bar: bool = False,
    query_prompt_name: str | None = None,
    document_prompt_name: str | None = None,
    score_functions: dict | None = None,
    truncate_dim: int | None = None,
) -> InformationRetrievalEvaluator:
    """An evaluator computing only the suite's metrics on `dataset`, with the given prompt names.

    `score_functions` (name -> similarity function) defaults to the evaluated model's own similarity.
    """
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator

    return InformationRetrievalEvaluator(
        queries=dataset.queries,
        corpus=dataset.corpus,
        relevant_docs=dataset.relevant_docs(),
        ndcg_at_k=[NDCG_CUTOFF],
        mrr_at_k=[MRR_CUTOFF],
        precision_recall_at_k=[RECALL_CUTOFF],
        accuracy_at_k=[NDCG_CUTOFF],
        map_at_k=[NDCG_CUTOFF],
        batch_size=batch_size,
        show_progress_bar=show_progress_bar,
        name=dataset.name,
        write_csv=False,
        query_prompt_name=query_prompt_name,
        corpus_prompt_name=document_prompt_name,
        score_functions=score_functions,
        truncate_dim=truncate_dim,
    )


def headline_metrics(scores: dict[str, dict[int, float]]) -> dict[str, float]:
    """The suite's three numbers from one score function's result of `compute_metrics`."""
    return {
        METRIC_NAMES[0]: float(scores["ndcg@k"][NDCG_CUTOFF]),
        METRIC_NAMES[1]: float(scores["mrr@k"][MRR_CUTOFF]),
        METRIC_NAMES[2]: float(scores["recall@k"][RECALL_CUTOFF]),
    }


def metrics_of_rankings(evaluator: InformationRetrievalEvaluator, rankings: dict[str, list[tuple[str, float]]]):
    """Metrics of externally made rankings: query id -> [(corpus id, score), ...], best first.

    Queries the evaluator keeps (those with a relevant document) and have no ranking count as misses.
    """
    hits = [
        [{"corpus_id": cid, "score": score} for cid, score in rankings.get(qid, [])[:RANKING_DEPTH]]
        for qid in evaluator.queries_ids
    ]
    return headline_metrics(evaluator.compute_metrics(hits))
