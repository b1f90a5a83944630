"""What opening an index's database (codesearch.store) checks: whether the stored settings still fit the wanted
ones, whether the meta values can be read, and whether the pieces' vectors can be read whole."""

from __future__ import annotations

import json
import sqlite3
from typing import Literal

import numpy as np

# Settings no stored float32 vector depends on: a new precision re-quantizes them instead of rebuilding, and the
# model folder's path may change (a moved folder, another checkout) while its fingerprint, which stands for the
# files the vectors come from, stays the same.
VECTOR_NEUTRAL_SETTINGS = ("precision", "model")
# The setting whose change alone splits every file again instead of rebuilding: a piece's vector depends on its
# text only, so a new chunking (codesearch.chunking.CHUNKING_VERSION) embeds only the texts it newly makes.
RESPLIT_SETTING = "chunking_version"
FLOAT_BYTES = np.dtype(np.float32).itemsize
SHOWN_CHARACTERS = 40  # of a damaged meta value, in the message: enough to recognise it, never a screenful
SettingsChange = Literal["keep", "rewrite", "resplit", "rebuild"]


def settings_change(old: dict | None, new: dict) -> tuple[SettingsChange, list[str]]:
    """What an index stored with settings `old` (None: nothing stored yet) needs to serve `new`, and the vector
    settings that differ: "keep" (the same, or nothing stored), "rewrite" (only the precision or the model's path:
    store `new`, keep every vector), "resplit" (only the chunking) or "rebuild" (anything else)."""
    if old is None or old == new:
        return "keep", []
    changed = _changed_keys(_vector_settings(old), _vector_settings(new))
    if changed == [RESPLIT_SETTING]:
        return "resplit", changed
    if _vector_settings(old) != _vector_settings(new):
        return "rebuild", changed
    return "rewrite", changed


def meta_problem(stored: dict) -> str:
    """What is wrong with the meta table's values ("" when nothing): settings that are not a JSON object, a
    generation that is not a whole number."""
    try:
        settings = json.loads(stored["settings"]) if stored.get("settings") else {}
    except (TypeError, ValueError):
        return f"settings are not JSON: {str(stored['settings'])[:SHOWN_CHARACTERS]!r}"
    if not isinstance(settings, dict):
        return f"settings are not a JSON object: {str(stored['settings'])[:SHOWN_CHARACTERS]!r}"
    if stored and "generation" not in stored:
        return "no generation"
    try:
        int(stored.get("generation", 0))
    except (TypeError, ValueError):
        return f"generation is not a number: {str(stored['generation'])[:SHOWN_CHARACTERS]!r}"
    return ""


def check_rows(db: sqlite3.Connection) -> None:
    """Raise sqlite3.DatabaseError when the pieces cannot be read whole: a failed integrity check, vectors of
    different widths or vectors that are not whole float32 rows."""
    db.execute("SELECT count(*) FROM pieces").fetchone()
    check = db.execute("PRAGMA quick_check").fetchone()[0]
    if check != "ok":
        raise sqlite3.DatabaseError(check)
    widths = db.execute("SELECT count(DISTINCT length(vector)) FROM pieces").fetchone()[0]
    if widths > 1:
        raise sqlite3.DatabaseError(f"vectors of {widths} different widths")
    bad = db.execute("SELECT count(*) FROM pieces WHERE typeof(vector) != 'blob' OR length(vector) % ? != 0 "
                     "OR length(vector) = 0", (FLOAT_BYTES,)).fetchone()[0]
    if bad:
        raise sqlite3.DatabaseError(f"{bad} vectors that are not whole float32 rows")


def _vector_settings(settings: dict) -> dict:
    return {key: value for key, value in settings.items() if key not in VECTOR_NEUTRAL_SETTINGS}


def _changed_keys(old: dict, new: dict) -> list[str]:
    return sorted(key for key in set(old) | set(new) if old.get(key) != new.get(key))
