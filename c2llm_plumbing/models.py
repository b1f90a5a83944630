"""The model folder a `--model` option names, checked before any work starts; its prompts; loading it.

Used by every front door that takes a model folder: codesearch (the command and its MCP server), serving (the
embeddings server and the corpus job), and the benchmarks of both.
"""

from __future__ import annotations

import json
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# The default model is package data of codesearch once installed (codesearch/default_model, see pyproject.toml), a
# sibling of this package in site-packages; a clone has it at the repository root. Paths, not an import: this
# package imports no app, and serving needs no codesearch to find it.
DEFAULT_MODEL_CANDIDATES = (PACKAGE_DIR.parent / "codesearch" / "default_model", PACKAGE_DIR.parent / "default_model")


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


def prompts(folder: Path) -> dict:
    """The model's prompts as saved in config_sentence_transformers.json ({} when it has none)."""
    try:
        return json.loads((folder / "config_sentence_transformers.json").read_text()).get("prompts") or {}
    except (OSError, ValueError):
        return {}


def load_model(folder: Path, max_seq_length: int | None, device: str = "cpu"):
    """The SentenceTransformer, its max_seq_length capped at `max_seq_length` (None: the model's own)."""
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # stderr is for our own progress and summary lines
    model = SentenceTransformer(str(folder), trust_remote_code=True, device=device)
    if max_seq_length is not None:
        model.max_seq_length = min(max_seq_length, model.max_seq_length or max_seq_length)
    return model
