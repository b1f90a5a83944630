"""Text every store can keep: a lone surrogate (from a bad JSON escape or undecodable bytes in a command line) cannot
be encoded as UTF-8, so SQLite, the file system and tokenizers refuse it."""

from __future__ import annotations


def valid_unicode(text: str) -> str:
    """`text` unchanged, or a ValueError naming the bad character, where it is and what to pass instead."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"holds {text[error.start:error.end]!r} at character {error.start}, which is not valid "
                         "Unicode (a lone surrogate); pass UTF-8 text") from None
    return text
