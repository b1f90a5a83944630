"""Release folder and Hub upload for a trained C2LLM model.

- ``training_details``: the model-card section that records how the model was trained (recipe, data, metrics).
- ``export_release``: the model core's release layout (config with auto_map, code files, tokenizer with left
  padding, sentence-transformers files, model card), written by ``tools.release.write_release_folder``.
- ``find_local_paths``: absolute paths of this machine left in a folder's JSON files (a Hub repo must not have them).
- ``push_to_hub``: create the repo and upload the folder with huggingface_hub; a thin, separately testable step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .args import RecipeConfig

REPO_ROOT = Path(__file__).resolve().parents[1]
TOKEN_TABLES = ("tokenizer.json", "vocab.json")  # vocabularies hold tokens such as "/usr", not settings


def training_details(recipe: RecipeConfig, summary: dict[str, Any], metrics: dict[str, Any], merged: list[str]) -> str:
    """Markdown section for the model card: starting point, data, recipe, merge and held-out metrics."""
    model, lora, loss, training = recipe.model, recipe.lora, recipe.loss, recipe.training
    base = recipe.export.base_model_hub_id or model.base_model or "random initialisation (smoke test)"
    published = f", published as `{recipe.export.hub_model_id}`" if recipe.export.hub_model_id else ""
    lines = [
        "## Training details",
        "",
        f"{recipe.export.model_name}{published}: trained with this repository's recipe (`python -m train.train`).",
        "",
        f"- Base model: `{base}`; PMA head trained from scratch, backbone "
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
        ),
        (
            f"- Schedule: {training.num_train_epochs:g} epochs (max_steps {training.max_steps}), learning rate "
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


def base_model_card() -> str:
    """The repository README (it doubles as the model card), or a minimal card when it is missing."""
    readme = REPO_ROOT / "README.md"
    return readme.read_text(encoding="utf-8") if readme.is_file() else "# C2LLM\n"


def export_release(model, folder: Path, tokenizer_dir: Path, max_seq_length: int, details: str) -> Path:
    """Write ``model`` (a SentenceTransformer wrapping a plain C2LLM model) in the release layout."""
    from tools.release import write_release_folder

    backbone = model.transformers_model
    if getattr(backbone, "peft_config", None):
        raise ValueError("Merge the LoRA adapters into the base weights before exporting (train.model.merge_lora).")
    card = base_model_card().rstrip("\n") + "\n\n" + details
    return write_release_folder(
        backbone, folder, tokenizer_dir=tokenizer_dir, max_seq_length=max_seq_length, model_card=card, overwrite=True
    )


def find_local_paths(folder: Path) -> list[str]:
    """`file: key` for every setting (JSON string value) that is an absolute path existing on this machine."""
    found = []

    def walk(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{where}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{where}[{index}]")
        elif (
            isinstance(value, str) and Path(value).is_absolute() and len(Path(value).parts) > 2 and Path(value).exists()
        ):
            found.append(f"{where}: {value}")

    for path in sorted(Path(folder).rglob("*.json")):
        if path.name not in TOKEN_TABLES:
            walk(json.loads(path.read_text(encoding="utf-8")), str(path.relative_to(folder)))
    return found


def push_to_hub(folder: Path, repo_id: str, private: bool = True, api=None, commit_message: str | None = None) -> str:
    """Upload a release folder to the Hub model repo ``repo_id`` (created if missing); returns the commit URL.

    ``api`` defaults to ``huggingface_hub.HfApi()``, which reads the token from HF_TOKEN or `hf auth login`.
    Refuses folders that still mention local paths (e.g. an adapter's base model), which would not load
    for anyone else.
    """
    leaks = find_local_paths(folder)
    if leaks:
        raise ValueError(f"{folder} mentions local paths that will not exist for Hub users: {leaks}")
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
    commit = api.upload_folder(
        folder_path=str(folder), repo_id=repo_id, repo_type="model", commit_message=commit_message or "Upload C2LLM"
    )
    return str(getattr(commit, "commit_url", commit))
