"""Which model `--model` names, checked before any work starts, and what the index records about it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# An installed package carries the model as codesearch/default_model (package data, see pyproject.toml);
# a clone has it at the repository root.
DEFAULT_MODEL_CANDIDATES = (PACKAGE_DIR / "default_model", PACKAGE_DIR.parent / "default_model")
FINGERPRINT_FULL_HASH_BYTES = 64 * 2**20  # bigger files are fingerprinted by size and their first/last MiB


class ModelError(ValueError):
    """--model names no usable model; the message says what to pass instead."""


def resolve_model(name: str) -> Path:
    """The model folder `--model` names ('default' or a sentence-transformers folder)."""
    if name == "default":
        for folder in DEFAULT_MODEL_CANDIDATES:
            if (folder / "modules.json").is_file():
                return folder
        raise ModelError("the default model (default_model/) is missing from this installation; reinstall "
                         "codesearch, or pass --model with a sentence-transformers folder")
    folder = Path(name).expanduser()
    if not folder.is_dir():
        raise ModelError(f"--model {name!r}: no such folder; pass 'default' or a sentence-transformers model folder")
    if not (folder / "modules.json").is_file():
        raise ModelError(f"--model {name!r} is not a sentence-transformers folder (no modules.json there); pass "
                         "'default' or a folder saved by SentenceTransformer.save")
    return folder.resolve()


def fingerprint(folder: Path) -> str:
    """sha256 over every file's relative name, size and content (large weight files: first and last MiB),
    so retraining or swapping the weights invalidates an index without hashing gigabytes per query."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                       and ".git" not in p.parts):
        size = path.stat().st_size
        digest.update(f"{path.relative_to(folder).as_posix()}\0{size}\0".encode())
        with open(path, "rb") as handle:
            if size <= FINGERPRINT_FULL_HASH_BYTES:
                digest.update(handle.read())
            else:
                digest.update(handle.read(2**20))
                handle.seek(size - 2**20)
                digest.update(handle.read())
    return digest.hexdigest()


def prompts(folder: Path) -> dict:
    """The model's prompts as saved in config_sentence_transformers.json ({} when it has none)."""
    try:
        return json.loads((folder / "config_sentence_transformers.json").read_text()).get("prompts") or {}
    except (OSError, ValueError):
        return {}


def index_settings(folder: Path, max_seq_length: int, model_fingerprint: str | None = None,
                   document_prompt: str | None = None) -> dict:
    """What an index's vectors depend on; any change rebuilds the index. The query prompt is left out: it does
    not change stored vectors. `model_fingerprint`/`document_prompt` override what the folder says (tests)."""
    from codesearch.chunking import CHUNKING_VERSION

    return {
        "model": str(folder),
        "model_fingerprint": model_fingerprint if model_fingerprint is not None else fingerprint(folder),
        "max_seq_length": max_seq_length,
        "chunking_version": CHUNKING_VERSION,
        "document_prompt": document_prompt if document_prompt is not None else prompts(folder).get("document"),
    }


def load_model(folder: Path, max_seq_length: int | None, device: str = "cpu"):
    """The SentenceTransformer, its max_seq_length capped at `max_seq_length` (None: the model's own)."""
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # stderr is for our own progress and summary lines
    model = SentenceTransformer(str(folder), trust_remote_code=True, device=device)
    if max_seq_length is not None:
        model.max_seq_length = min(max_seq_length, model.max_seq_length or max_seq_length)
    return model
