"""What an index records about its model, so that other weights or another prompt rebuild it (the folder itself is
resolved and loaded by c2llm_plumbing.models)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from c2llm_plumbing.models import prompts

FINGERPRINT_FULL_HASH_BYTES = 64 * 2**20  # bigger files are fingerprinted by size and their first/last MiB


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
