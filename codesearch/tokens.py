"""The BM25 tokenizer of code and queries, shared by codesearch's index and the evaluation's BM25 baseline
(evaluation/baselines.py imports it), so both rank with the same words.

Chosen between the two the project had (measured in codesearch/README.md, Ranking quality): this one, the
evaluation's, gave codesearch's hybrid ranking MRR@10 0.756 against 0.743 on the Python quality set and the same
0.837 on the JavaScript/Go set.
"""

from __future__ import annotations

import functools
import re

TOKENIZER_VERSION = 2  # in the name of the saved BM25 index: a change here rebuilds it
# Runs of letters/digits; "_" and every other symbol separate words (so snake_case splits here).
_WORD = re.compile(r"[A-Za-z0-9]+")
# camelCase / PascalCase / ACRONYMWords / digits: "parseHTTPResponse2" -> parse, HTTP, Response, 2.
_SUBWORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_SNAKE_CASE_IDENTIFIER = re.compile(r"[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+")
WORD_CACHE_SIZE = 1 << 16  # code repeats its words: splitting each once makes re-indexing faster


def code_tokens(text: str) -> list[str]:
    """Lowercased tokens for BM25 that match identifiers with the words in them.

    Splits on punctuation and whitespace, then splits identifiers at snake_case and camelCase boundaries; a
    compound identifier is also kept whole, so exact identifier matches still score higher than matches of their
    parts. Example: "getUserName(user_id)" -> [getusername, get, user, name, user, id, user_id].
    """
    tokens = []
    for word in _WORD.findall(text):
        tokens.extend(_word_tokens(word))
    # Identifiers such as user_id were split by _WORD already; keep them whole as well.
    tokens.extend(identifier.lower() for identifier in _SNAKE_CASE_IDENTIFIER.findall(text))
    return tokens


@functools.lru_cache(maxsize=WORD_CACHE_SIZE)
def _word_tokens(word: str) -> tuple[str, ...]:
    parts = _SUBWORD.findall(word)
    return ((word.lower(),) if len(parts) > 1 else ()) + tuple(part.lower() for part in parts)
