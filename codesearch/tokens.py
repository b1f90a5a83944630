"""The BM25 tokenizer of code and queries, shared by codesearch's index and the evaluation's BM25 baseline
(evaluation/baselines.py imports it), so both rank with the same words."""

from __future__ import annotations

import functools
import re

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
IDENTIFIER_CACHE_SIZE = 1 << 16  # code repeats its identifiers: splitting each once makes re-indexing ~2x faster


def code_tokens(text: str) -> list[str]:
    """BM25 tokens of code or a query: each identifier lower-cased, plus its snake_case and camelCase parts
    (`load_json_file` -> load_json_file, load, json, file); tokens of one character are dropped."""
    tokens = []
    for identifier in _IDENTIFIER.findall(text):
        tokens.extend(_identifier_tokens(identifier))
    return tokens


@functools.lru_cache(maxsize=IDENTIFIER_CACHE_SIZE)
def _identifier_tokens(identifier: str) -> tuple[str, ...]:
    tokens = [identifier.lower()]
    parts = [part.lower() for chunk in identifier.split("_") for part in _CAMEL.findall(chunk)]
    if len(parts) > 1:
        tokens.extend(parts)
    return tuple(token for token in tokens if len(token) > 1)
