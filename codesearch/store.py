"""The SQLite side of an index (index.sqlite, the source of truth; layout in codesearch.index): opening it,
deciding from the stored settings whether it still holds, and the rows of its files, pieces, meta and queries.

The settings (model folder and fingerprint, max_seq_length, chunking version, document prompt, precision) are stored
in `meta`; any difference rebuilds from scratch, except the precision (the stored float32 vectors are quantized
again: codesearch.vectors) and the model folder's path (the same files found elsewhere, as their fingerprint says):
nothing is re-embedded; and the chunking version: every file counts as changed, so the next update splits it again
and embeds only the piece texts the old chunking did not make. A database SQLite cannot read, that fails its
integrity check, lost a table or holds vectors of different widths is deleted and rebuilt, with a message
(`rebuilt_because` says why). An index written before the paths table existed gets it, and its files' path vectors,
on its next update (paths are short: seconds, where the pieces took minutes).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np

from codesearch.quantization import DEFAULT_PRECISION
from codesearch.store_checks import RESPLIT_SETTING, check_rows, meta_problem, settings_change

INDEX_FORMAT = 1
TABLES = ("meta", "files", "pieces", "queries")
DB_NAME = "index.sqlite"
QUERY_CACHE_SIZE = 1000
PATH_VECTORS_KEY = "path_vectors"  # in meta: "complete" once every file with pieces has its path's vector
LOCKED_WAIT_S = 60  # how long a statement waits for another connection's transaction (one batch) before failing
SQL_VARIABLES = 500  # values per `IN (...)` query, below SQLite's oldest limit of 999 bound variables
# a file's row (path, sha256, size, mtime_ns, "ok" or "unparsable") and a piece's (path, line, end_line, title,
# text, float32 vector bytes)
FileRow = tuple[str, str, int, int, str]
PieceRow = tuple[str, int, int, str, str, bytes]


class IndexStore:
    """The open database of one index folder; `settings` (a JSON object) are what its vectors were made with."""

    def __init__(self, folder: Path, settings: dict, log: Callable[[str], None]):
        self.folder, self.settings, self.log = Path(folder), settings, log
        self.db = self._open()

    # opening and invalidation ---------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        # any thread may use it (a server's calls run on worker threads); its user serialises them
        # (codesearch.searcher.FolderSearch.lock)
        db = sqlite3.connect(self.folder / DB_NAME, timeout=LOCKED_WAIT_S, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")  # readers never see a half-written batch
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        return db

    def _rebuild(self, db: sqlite3.Connection | None, problem: str, because: str) -> None:
        """Log why the index cannot be kept, close it and delete every file of the folder."""
        if db is not None:
            db.close()
        self.log(f"index at {self.folder} is {problem}; rebuilding it")
        self.rebuilt_because = because
        self._delete_files()

    def _delete_files(self) -> None:
        for path in self.folder.iterdir():
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    def _open(self) -> sqlite3.Connection:
        self.rebuilt_because = ""
        try:
            db = self._connect()
            stored = dict(db.execute("SELECT key, value FROM meta"))
        except sqlite3.DatabaseError as error:
            self._rebuild(None, f"unreadable ({error})", "unreadable")
            db, stored = self._connect(), {}
        wanted = json.dumps(self.settings, sort_keys=True)
        problem = meta_problem(stored)
        if problem:
            self._rebuild(db, f"damaged ({problem})", "damaged")
            return self._open()
        old = json.loads(stored["settings"]) if stored.get("settings") else None
        change, changed = settings_change(old, self.settings)
        if change == "resplit":  # the vectors hold for every piece text the new chunking still makes: keep them
            self.log(f"index chunking changed (version {old.get(RESPLIT_SETTING)} -> "
                     f"{self.settings[RESPLIT_SETTING]}); splitting every file again, embedding only new piece texts")
        elif change == "rebuild":
            self.log(f"index settings changed ({', '.join(changed)}); rebuilding the index")
            self.rebuilt_because = "settings: " + ", ".join(changed)
            db.close()
            self._delete_files()
            db, stored = self._connect(), {}
        elif change == "rewrite":  # the precision or the model's path alone changed
            was, precision = old.get("precision", DEFAULT_PRECISION), self.settings["precision"]
            if was != precision:
                self.log(f"index precision changed ({was} -> {precision}); quantizing the stored float32 "
                         "vectors again, nothing is re-embedded")
            with db:
                db.execute("INSERT OR REPLACE INTO meta VALUES ('settings', ?)", (wanted,))
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        missing = sorted(set(TABLES) - tables)
        if stored and missing:  # a written index lost tables: recreating them empty would say "no code" forever
            self._rebuild(db, f"damaged (tables {', '.join(missing)} missing)", "damaged")
            return self._open()
        with db:
            db.execute("CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, sha256 TEXT, size INTEGER, "
                       "mtime_ns INTEGER, status TEXT)")
            db.execute("CREATE TABLE IF NOT EXISTS pieces (id INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT, "
                       "line INTEGER, end_line INTEGER, title TEXT, text TEXT, vector BLOB)")
            db.execute("CREATE INDEX IF NOT EXISTS pieces_path ON pieces (path)")
            db.execute("CREATE TABLE IF NOT EXISTS queries (text TEXT PRIMARY KEY, vector BLOB)")
            # not in TABLES: an index written before it existed gets it here and its rows on the next update
            db.execute("CREATE TABLE IF NOT EXISTS paths (path TEXT PRIMARY KEY, vector BLOB)")
            if not stored:
                db.execute("INSERT OR REPLACE INTO meta VALUES ('settings', ?)", (wanted,))
                db.execute("INSERT OR REPLACE INTO meta VALUES ('generation', '0')")
        if change == "resplit":  # every file counts as changed, so the next update splits it; old pieces lend vectors
            with db:  # one transaction: new settings never stand over files the old chunking split
                db.execute("UPDATE files SET sha256 = '', size = -1, mtime_ns = -1")
                db.execute("INSERT OR REPLACE INTO meta VALUES ('settings', ?)", (wanted,))
        try:
            check_rows(db)
        except sqlite3.DatabaseError as error:
            self._rebuild(db, f"damaged ({error})", "damaged")
            return self._open()
        return db

    def close(self) -> None:
        self.db.close()

    # meta -----------------------------------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        return int(self.db.execute("SELECT value FROM meta WHERE key='generation'").fetchone()[0])

    def bump(self) -> None:
        """One more generation; called inside the transaction that changes the pieces or paths."""
        self.db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='generation'")

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # files and pieces -----------------------------------------------------------------------------------------

    def files(self) -> dict[str, tuple[str, int, int, str]]:
        """Path -> (sha256, size, mtime_ns, status) of every indexed file."""
        return {path: (sha, size, mtime, status) for path, sha, size, mtime, status
                in self.db.execute("SELECT path, sha256, size, mtime_ns, status FROM files")}

    def touch(self, touched: list[tuple[str, int, int]]) -> None:
        """New (size, mtime_ns) of files (path, size, mtime_ns) whose bytes did not change."""
        with self.db:
            self.db.executemany("UPDATE files SET size=?, mtime_ns=? WHERE path=?",
                                [(size, mtime, path) for path, size, mtime in touched])

    def remove(self, gone: list[str]) -> None:
        """Drop these files, their pieces and their path vectors, in one transaction."""
        with self.db:
            for table in ("pieces", "files", "paths"):
                self.db.executemany(f"DELETE FROM {table} WHERE path=?", [(path,) for path in gone])
            self.bump()

    def replace_files(self, files: list[FileRow], pieces: list[PieceRow]) -> None:
        """Store these files with these pieces in place of their old ones, in one transaction: the files and their
        pieces appear together or not at all. Their paths may have no vector yet: meta says so until the next
        step (or a later update, if this one is killed) gives them one."""
        with self.db:
            self.set_meta(PATH_VECTORS_KEY, "incomplete")
            self.db.executemany("DELETE FROM pieces WHERE path=?", [(row[0],) for row in files])
            self.db.executemany("INSERT INTO pieces (path, line, end_line, title, text, vector) VALUES (?,?,?,?,?,?)",
                                pieces)
            self.db.executemany("INSERT OR REPLACE INTO files VALUES (?,?,?,?,?)", files)
            self.bump()

    def vectors_by_text(self, paths: list[str], seen: dict[str, np.ndarray]) -> None:
        """Add to `seen` the stored vectors of these files' current pieces, by text: an edit re-embeds only the
        pieces whose text changed (the settings, model included, are the same, or the index would be rebuilt)."""
        for start in range(0, len(paths), SQL_VARIABLES):
            chunk = paths[start:start + SQL_VARIABLES]
            rows = self.db.execute(f"SELECT text, vector FROM pieces WHERE path IN ({','.join('?' * len(chunk))})",
                                   chunk)
            for text, blob in rows:
                seen.setdefault(text, np.frombuffer(blob, dtype=np.float32))

    def unparsable_files(self) -> int:
        return self.db.execute("SELECT count(*) FROM files WHERE status='unparsable'").fetchone()[0]

    def piece_places(self) -> list[tuple[int, str, int, int, str]]:
        """Every piece as (id, path, line, end_line, title), in id order."""
        return self.db.execute("SELECT id, path, line, end_line, title FROM pieces ORDER BY id").fetchall()

    def texts(self, ids) -> dict[int, str]:
        ids = [int(i) for i in ids]
        query = f"SELECT id, text FROM pieces WHERE id IN ({','.join('?' * len(ids))})"
        return dict(self.db.execute(query, ids)) if ids else {}

    def all_texts(self) -> list[str]:
        return [row[0] for row in self.db.execute("SELECT text FROM pieces ORDER BY id")]

    def stored_pieces(self) -> list[PieceRow]:
        """Every piece as (path, line, end_line, title, text, float32 vector bytes), in id order."""
        return self.db.execute("SELECT path, line, end_line, title, text, vector FROM pieces ORDER BY id").fetchall()

    def file_keys(self) -> dict[str, str]:
        """Path -> sha256 of every indexed file (byte-identical files share it)."""
        return dict(self.db.execute("SELECT path, sha256 FROM files"))

    # query vectors: a repeated query needs no model (loading it is most of a query's time) ----------------------

    def cached_query(self, text: str) -> np.ndarray | None:
        row = self.db.execute("SELECT vector FROM queries WHERE text=?", (text,)).fetchone()
        return np.frombuffer(row[0], dtype=np.float32) if row else None

    def store_query(self, text: str, vector: np.ndarray) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO queries VALUES (?, ?)",
                            (text, np.asarray(vector, dtype=np.float32).tobytes()))
            self.db.execute(f"DELETE FROM queries WHERE rowid NOT IN (SELECT rowid FROM queries ORDER BY rowid DESC "
                            f"LIMIT {QUERY_CACHE_SIZE})")

