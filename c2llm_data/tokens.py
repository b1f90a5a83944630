"""The BM25 tokenizer of code and queries, shared by codesearch's index and the evaluation's BM25 baseline (mteb's
`BM25Search` in evaluation/suite.py), so both rank with the same words.

Chosen between the two the project had (measured in codesearch/reports/ranking.md): this one, the
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
# Every pattern here matches in time linear in its input: no pattern can fail after a run of letters and digits,
# so no match attempt re-reads a run (a snake_case pattern of the form `[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+` did, from
# every start inside the run: 64,000 letters took 42 s).
# Runs of letters, digits and "_": a snake_case identifier never crosses the end of one.
_IDENTIFIER_RUN = re.compile(r"[A-Za-z0-9_]+")
# Two or more "_" end a snake_case identifier (`__init__` is none, `a_b__c_d` holds a_b and c_d).
_IDENTIFIER_BREAK = re.compile(r"__+")
WORD_CACHE_SIZE = 1 << 16  # code repeats its words: splitting each once makes re-indexing faster
# Longer words (hex strings, base64) are split without the cache, so it holds at most WORD_CACHE_SIZE short words,
# never megabytes of one-off runs.
CACHED_WORD_CHARS = 64


def code_tokens(text: str) -> list[str]:
    """Lowercased tokens for BM25 that match identifiers with the words in them.

    Splits on punctuation and whitespace, then splits identifiers at snake_case and camelCase boundaries; a
    compound identifier is also kept whole, so exact identifier matches still score higher than matches of their
    parts. Example: "getUserName(user_id)" -> [getusername, get, user, name, user, id, user_id].
    """
    tokens = []
    for word in _WORD.findall(text):
        tokens.extend(_cached_word_tokens(word) if len(word) <= CACHED_WORD_CHARS else _word_tokens(word))
    # Identifiers such as user_id were split by _WORD already; keep them whole as well.
    tokens.extend(identifier.lower() for identifier in snake_case_identifiers(text))
    return tokens


def snake_case_identifiers(text: str) -> list[str]:
    """Letters/digits joined by single "_" ("load_json_file", "a_b" in "_a_b__c"), in the order of the text."""
    found = []
    for run in _IDENTIFIER_RUN.findall(text):
        if "_" in run:
            found.extend(part for part in (piece.strip("_") for piece in _IDENTIFIER_BREAK.split(run)) if "_" in part)
    return found


def _word_tokens(word: str) -> tuple[str, ...]:
    parts = _SUBWORD.findall(word)
    return ((word.lower(),) if len(parts) > 1 else ()) + tuple(part.lower() for part in parts)


_cached_word_tokens = functools.lru_cache(maxsize=WORD_CACHE_SIZE)(_word_tokens)
