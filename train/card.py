"""The model card of an exported run, built from the run itself with huggingface_hub's ``ModelCard``.

- ``card_base_model``: the Hub id the run started from (``export.base_model_hub_id``, else ``model.base_model``
  when it is a Hub id); None for a random start (smoke runs) or a local folder with no Hub id.
- ``card_datasets``: the Hub datasets of the registered sources the recipe trains on.
- ``card_eval_results``: the held-out retrieval of the final model per (source, language) group, as ``model-index``.
- ``training_details``: the markdown section that records the recipe, the data, the merge and the metrics.
- ``model_card``: all of it as a ``ModelCard`` whose front matter ``evaluation.model_meta`` reads (``base_model``
  -> mteb ``adapted_from``, ``datasets`` -> the mteb tasks the model trained on, ``license``, ``language``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .args import PACKAGED_BASE, RecipeConfig
from .model import REPO_ROOT, looks_like_local_path, resolve_model_path

PACKAGED_PREFIX = PACKAGED_BASE.split(":")[0] + ":"  # a start model read from a PyPI package
# The metrics of each held-out group that go into model-index, as InformationRetrievalEvaluator names them.
CARD_METRICS = ("ndcg@10", "mrr@10", "map@10", "accuracy@1", "accuracy@10", "recall@10")
TAGS = ["sentence-transformers", "feature-extraction", "code", "code-search", "retrieval", "c2llm"]
CITATION = """@misc{qin2025c2llmtechnicalreportnew,
  title={C2LLM Technical Report: A New Frontier in Code Retrieval via Adaptive Cross-Attention Pooling},
  author={Jin Qin and Zihan Liao and Ziyin Zhang and Hang Yu and Peng Di and Rui Wang},
  year={2025}, eprint={2512.21332}, archivePrefix={arXiv}, primaryClass={cs.CL},
  url={https://arxiv.org/abs/2512.21332}
}"""


def card_base_model(recipe: RecipeConfig) -> str | None:
    """The Hub id of the model the run started from; None for a random start or an unnamed local folder."""
    if recipe.export.base_model_hub_id:
        return recipe.export.base_model_hub_id
    base = recipe.model.base_model
    if base is None or base.startswith(PACKAGED_PREFIX) or looks_like_local_path(base):
        return None
    if Path(resolve_model_path(base)).exists():  # a local folder named like a Hub id
        return None
    return base


def card_datasets(recipe: RecipeConfig) -> list[str]:
    """Hub ids of the registered sources in ``data.datasets``, in recipe order (local files have none)."""
    from .data import SOURCES

    hub_ids = [SOURCES[spec.name].hub_id for spec in recipe.data.datasets if spec.name in SOURCES]
    return list(dict.fromkeys(hub_id for hub_id in hub_ids if hub_id))


def card_eval_results(groups: list[str], final_metrics: dict[str, float]) -> list:
    """One ``EvalResult`` per (group, metric) the final model was measured on (held-out queries of that group)."""
    from huggingface_hub import EvalResult

    results = []
    for group in groups:
        for metric in CARD_METRICS:
            value = final_metrics.get(f"{group}_cosine_{metric}")
            if value is not None:
                results.append(
                    EvalResult(
                        task_type="information-retrieval", task_name="Information Retrieval", dataset_type=group,
                        dataset_name=f"{group} (held-out queries)", dataset_split="heldout",
                        metric_type=f"cosine_{metric}", metric_value=float(value),
                    )
                )  # fmt: skip
    return results


def training_details(recipe: RecipeConfig, summary: dict[str, Any], metrics: dict[str, Any], merged: list[str]) -> str:
    """Markdown section for the model card: starting point, data, recipe, merge and held-out metrics."""
    model, lora, loss, training = recipe.model, recipe.lora, recipe.loss, recipe.training
    base = card_base_model(recipe) or model.base_model or "random initialisation (smoke test)"
    published = f", published as `{recipe.export.hub_model_id}`" if recipe.export.hub_model_id else ""
    # max_steps > 0 overrides the epoch count in transformers' Trainer
    schedule = f"{training.max_steps} steps" if training.max_steps > 0 else f"{training.num_train_epochs:g} epochs"
    head = ("started as layer-normalised mean pooling" if model.head_init == "mean"
            else "trained from scratch")
    lines = [
        "## Training details",
        "",
        f"{recipe.export.model_name}{published}: trained with this repository's recipe (`python -m train.train`).",
        "",
        f"- Base model: `{base}`; PMA head {head}, backbone "
        + (
            f"adapted with LoRA (r={lora.r}, alpha={lora.alpha}, targets {', '.join(lora.target_modules)})"
            if lora.enabled
            else f"fine-tuned in its top {model.train_top_layers} layers (the rest frozen)"
            if model.train_top_layers
            else "fully fine-tuned"
        )
        + ".",
        (
            f"- Loss: {'Cached' if loss.cached else ''}MultipleNegativesRankingLoss, scale {loss.scale} "
            f"(temperature {1 / loss.scale:g}), in-batch negatives gathered across devices: "
            f"{loss.gather_across_devices}; {recipe.mining.num_negatives if recipe.mining.enabled else 0} mined hard "
            "negatives per query."
            + (
                f" Matryoshka training (MatryoshkaLoss): the loss is also taken at "
                f"{', '.join(map(str, sorted(loss.matryoshka_dims, reverse=True)))} dimensions; embeddings truncated "
                "to those widths (`truncate_dim`) are what the model was trained for."
                if loss.matryoshka_dims
                else ""
            )
        ),
        (
            f"- Schedule: {schedule}, learning rate "
            f"{training.learning_rate:g} (head {training.head_learning_rate or training.learning_rate:g}), "
            f"{training.per_device_train_batch_size} rows per device per step, max length {model.max_seq_length}, "
            "one (source, language) group per batch."
        ),
        f"- Final weights: average of checkpoints {', '.join(merged)}"
        + (
            f", then {1 - recipe.merge.start_model_weight:g} x that + {recipe.merge.start_model_weight:g} x the start "
            f"model ({'backbone and head' if recipe.merge.start_model_merge_head else 'backbone; head as trained'})."
            if recipe.merge.start_model_weight
            else "."
        ),
        "",
        "| group | training rows | held-out queries | rows dropped by mining |",
        "| --- | ---: | ---: | ---: |",
    ]
    for group, stats in summary.get("groups", {}).items():
        lines.append(f"| {group} | {stats['train_rows']} | {stats['eval_queries']} | {stats['mining_dropped']} |")
    if metrics:
        lines += ["", "Held-out retrieval (queries of the training sources not used for training):", ""]
        lines += ["| metric | before training | final model |", "| --- | ---: | ---: |"]
        for name in sorted(metrics.get("final", {})):
            before = metrics.get("before", {}).get(name)
            before_text = f"{before:.4f}" if isinstance(before, float) else "-"
            lines.append(f"| {name} | {before_text} | {metrics['final'][name]:.4f} |")
    return "\n".join(lines) + "\n"


def card_opening(recipe: RecipeConfig, base_model: str | None) -> str:
    """What the card says first: the recipe's own text (``export.model_card``), else what a C2LLM model is and how
    to use it."""
    if recipe.export.model_card:
        return (REPO_ROOT / recipe.export.model_card).read_text(encoding="utf-8")
    repo = recipe.export.hub_model_id or "path/to/this/folder"
    start = f"`{base_model}`" if base_model else "a randomly initialised backbone (a smoke test, not a useful model)"
    return f"""# {recipe.export.model_name}

A C2LLM code-embedding model: a Qwen2 backbone whose last hidden states a Pooling-by-Multihead-Attention (PMA)
head turns into one embedding, trained from {start} with this repository's recipe.

```python
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("{repo}", trust_remote_code=True)
queries = model.encode_query(["read a jsonl file and return its lines"])
code = model.encode_document(["def read_jsonl(path):\\n    ..."])
print(model.similarity(queries, code))
```
"""


def model_card(recipe: RecipeConfig, summary: dict[str, Any], metrics: dict[str, Any], merged: list[str]):
    """The exported folder's README.md as a ``huggingface_hub.ModelCard``: front matter from the run, then usage,
    training details and the citation of the method."""
    from huggingface_hub import ModelCard, ModelCardData

    base_model = card_base_model(recipe)
    eval_results = card_eval_results(list(summary.get("groups", {})), metrics.get("final", {}))
    data = ModelCardData(
        model_name=recipe.export.model_name,
        base_model=base_model,
        datasets=card_datasets(recipe) or None,
        eval_results=eval_results or None,
        library_name="sentence-transformers",
        pipeline_tag="feature-extraction",
        license=recipe.export.license,
        language=["en", "code"],
        tags=list(TAGS),
    )
    body = f"""{card_opening(recipe, base_model).rstrip()}

{training_details(recipe, summary, metrics, merged)}
## Citation

```bibtex
{CITATION}
```
"""
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")
