"""Release folder and Hub upload for a trained C2LLM model.

- ``export_release``: the model core's release layout (config with auto_map, code files, tokenizer with left
  padding, sentence-transformers files), written by ``tools.release.write_release_folder``, with the run's model
  card (``train.card``).
- ``find_local_paths``: absolute paths of this machine left in a folder's JSON files (a Hub repo must not have them).
- ``push_to_hub``: create the repo and upload the folder with huggingface_hub; a thin, separately testable step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TOKEN_TABLES = ("tokenizer.json", "vocab.json")  # vocabularies hold tokens such as "/usr", not settings


def export_release(model, folder: Path, tokenizer_dir: Path, max_seq_length: int, card) -> Path:
    """Write ``model`` (a SentenceTransformer wrapping a plain C2LLM model) in the release layout, with ``card``
    (a ``huggingface_hub.ModelCard``, see ``train.card.model_card``) as its README.md."""
    from tools.release import write_release_folder

    backbone = model.transformers_model
    if getattr(backbone, "peft_config", None):
        raise ValueError(
            "Merge the LoRA adapters into the base weights before exporting (train.merge.load_checkpoint)."
        )
    return write_release_folder(
        backbone, folder, tokenizer_dir=tokenizer_dir, max_seq_length=max_seq_length, model_card=str(card),
        overwrite=True,
    )  # fmt: skip


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
