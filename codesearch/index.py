"""The on-disk index of one searched folder: pieces, their vectors, and what they were made from.

Layout of an index folder (default `$XDG_CACHE_HOME/c2llm-codesearch/<sha256 of the folder's absolute path>`):

    index.sqlite    tables meta (settings, generation), files (path, sha256, size, mtime_ns, status) and
                    pieces (path, line, end_line, title, text, float32 vector): the source of truth,
                    paths (path, float32 vector of the path's text: codesearch.ranking.PathVectors) of every
                    file with pieces, and queries (text, vector) of the last QUERY_CACHE_SIZE queries
    vectors.npz     every vector as one matrix plus the piece ids, for a fast load; rebuilt from the database
                    when its generation differs, it is damaged or its matrix has the wrong shape. At precision int8
                    or binary it is vectors-int8.npz (codes and calibration ranges) or vectors-binary.npz (packed
                    bits) instead, made from the database's float32 vectors (codesearch.quantization)
    bm25-t<tokenizer version>-<gen>/  the bm25s index of the same generation, built on the first BM25/hybrid query
                    after a change
    update.lock     held while a process updates the index: a second one waits, then finds the work done

Why SQLite + numpy (benchmarks/codesearch_store.py; its record, benchmarks/results/codesearch_store.json, is
rendered in codesearch/README.md, Vector store): exact brute-force search over 100k x 384 float32 is one matmul of
tens of ms, so no approximate index is needed; SQLite gives atomic, resumable incremental updates with no extra
dependency; the .npz snapshot loads faster than reading 100k BLOB rows.

Incremental by content: a file whose size and mtime are unchanged is trusted; otherwise its bytes are hashed
and only a new hash re-embeds its pieces. Each batch of files is one transaction, so a killed build keeps the
files it finished and the next run resumes. The settings (model folder and fingerprint, max_seq_length,
chunking version, document prompt, precision) are stored in `meta`; any difference rebuilds from scratch, except
the precision (the stored float32 vectors are quantized again) and the model folder's path (the same files found
elsewhere, as their fingerprint says): nothing is re-embedded; and the chunking version: every file is split again
and only the piece texts the old chunking did not make are embedded. A database
SQLite cannot read, that fails its integrity check, lost a table or holds vectors of different widths is deleted
and rebuilt, with a message. An index written before the paths table existed gets it, and its files' path vectors,
on its next update (paths are short: seconds, where the pieces took minutes).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.abc
import json
import os
import shutil
import sqlite3
import sys
import threading
import time
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from c2llm_data.tokens import TOKENIZER_VERSION, code_tokens
from c2llm_plumbing.atomic import atomic_target
from codesearch.chunking import ChunkingError, CodePiece, split_file
from codesearch.files import LINK_OUTSIDE, FolderReader, LeavesFolder
from codesearch.quantization import DEFAULT_PRECISION, DEFAULT_RESCORE_MULTIPLIER, DenseVectors, check_precision
from codesearch.ranking import PathVectors

INDEX_FORMAT = 1
TABLES = ("meta", "files", "pieces", "queries")
DB_NAME = "index.sqlite"
SNAPSHOT_NAMES = {"float32": "vectors.npz", "int8": "vectors-int8.npz", "binary": "vectors-binary.npz"}
# Settings no stored float32 vector depends on: a new precision re-quantizes them instead of rebuilding, and the
# model folder's path may change (a moved folder, another checkout) while its fingerprint, which stands for the
# files the vectors come from, stays the same.
VECTOR_NEUTRAL_SETTINGS = ("precision", "model")
# The setting whose change alone splits every file again instead of rebuilding: a piece's vector depends on its
# text only, so a new chunking (codesearch.chunking.CHUNKING_VERSION) embeds only the texts it newly makes.
RESPLIT_SETTING = "chunking_version"
LOCK_NAME = "update.lock"
QUERY_CACHE_SIZE = 1000
EMBED_BATCH_PIECES = 512  # pieces per transaction: a kill loses at most this much work
SQL_VARIABLES = 500  # paths per `IN (...)` query, below SQLite's oldest limit of 999 bound variables
PROGRESS_PIECES = 128  # pieces per model call (each call sorts its texts by length, so not much smaller)
FLOAT_BYTES = np.dtype(np.float32).itemsize
# A new or changed file after parsing: (path, sha256, size, mtime_ns), its pieces, "ok" or "unparsable"
ParsedFile = tuple[tuple[str, str, int, int], list[CodePiece], str]


@dataclass
class KnownVectors:
    """Vectors a build need not embed again (a first answer's): piece vectors by text, path vectors by path."""

    texts: dict[str, np.ndarray] = field(default_factory=dict)
    paths: dict[str, np.ndarray] = field(default_factory=dict)


# called before a build embeds its parsed files; returns vectors it already has (or None)
BeforeEmbedding = Callable[[list[ParsedFile]], KnownVectors | None]


def default_index_dir(root: Path) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
    return cache / "c2llm-codesearch" / key


# bm25s imports these when installed, for retrieval backends codesearch never calls (it ranks with get_scores); jax
# also runs a top-k at import, which starts its GPU backend: seconds and gigabytes on every query of a GPU machine.
BM25S_UNUSED_BACKENDS = ("jax", "numba")


class _HiddenModules(importlib.abc.MetaPathFinder):
    """Makes `import NAME` (and its submodules) fail for the given top-level names, in the creating thread only:
    another thread of the process importing them meanwhile is not affected."""

    def __init__(self, names):
        self.names, self.thread = frozenset(names), threading.get_ident()

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in self.names and threading.get_ident() == self.thread:
            raise ModuleNotFoundError(f"{fullname} is hidden while bm25s loads", name=fullname)
        return None


def import_bm25s():
    """The bm25s module, loaded without its jax and numba backends (unless this process has loaded them already, in
    which case they cost nothing more). The hiding lasts for the one import; bm25s then uses numpy for everything."""
    hidden = _HiddenModules(name for name in BM25S_UNUSED_BACKENDS if name not in sys.modules)
    sys.meta_path.insert(0, hidden)
    try:
        import bm25s  # a loaded bm25s returns at once; one another thread is loading is waited for
    finally:
        sys.meta_path.remove(hidden)
    return bm25s


class Progress:
    """Periodic progress lines on stderr (at most one per `every` seconds, plus the last). Not tqdm: its bar redraws
    one line with carriage returns, which a log of stderr (an MCP client's) keeps as one unreadable line."""

    def __init__(self, what: str, total: int, every: float = 2.0, stream=None):
        self.what, self.total, self.every = what, total, every
        self.stream = stream or sys.stderr
        self.start = self.last = time.monotonic()
        self.done = 0

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= self.every or self.done >= self.total:
            self.last = now
            rate = self.done / max(now - self.start, 1e-9)
            left = (self.total - self.done) / rate if rate else 0
            print(f"{self.what}: {self.done}/{self.total} ({rate:.0f}/s, ~{left:.0f} s left)",
                  file=self.stream, flush=True)


@dataclass
class UpdateReport:
    embedded_files: int = 0
    embedded_pieces: int = 0
    model_inputs: int = 0  # distinct texts the model read (embedded_pieces minus copies)
    embedded_paths: int = 0  # file paths the model read (codesearch.ranking.PathVectors)
    removed_files: int = 0
    unchanged_files: int = 0
    skipped: Counter = field(default_factory=Counter)
    rebuilt_because: str = ""


@dataclass
class LoadedIndex:
    ids: np.ndarray  # (n,) int64 piece ids, row order of `vectors`
    vectors: DenseVectors  # n unit vectors at the index's precision (float32 (n, d), int8 (n, d), bits (n, d/8))
    paths: list[str]
    lines: list[int]
    end_lines: list[int]
    titles: list[str]
    generation: int
    file_keys: dict[str, str] = field(default_factory=dict)  # path -> sha256: byte-identical files share it
    path_vectors: PathVectors | None = None  # the vector of each row's file path (None: no path term)


class IndexLocationError(OSError):
    """The index folder cannot be created or written; the message names the fix."""


class SearchIndex:
    def __init__(self, folder: Path, settings: dict, log=None):
        self.folder = Path(folder)
        self.settings = dict(settings, index_format=INDEX_FORMAT)
        self.precision = check_precision(self.settings.setdefault("precision", DEFAULT_PRECISION))
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            probe = self.folder / f".write-test-{os.getpid()}"
            probe.touch()
            probe.unlink()
        except OSError as error:
            raise IndexLocationError(f"cannot write the index at {self.folder} ({error.strerror}); pass --index-dir "
                                     "with a writable folder") from error
        self.db = self._open()

    # opening and invalidation ---------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        # any thread may use it (a server's calls run on worker threads); its user serialises them
        # (codesearch.searcher.FolderSearch.lock)
        db = sqlite3.connect(self.folder / DB_NAME, timeout=60, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")  # readers never see a half-written batch
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def _open(self) -> sqlite3.Connection:
        self.rebuilt_because = ""
        try:
            db = self._connect()
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            stored = dict(db.execute("SELECT key, value FROM meta"))
        except sqlite3.DatabaseError as error:
            self.log(f"index at {self.folder} is unreadable ({error}); rebuilding it")
            self.rebuilt_because = "unreadable"
            self._delete_files()
            db = self._connect()
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            stored = {}
        wanted = json.dumps(self.settings, sort_keys=True)
        problem = _meta_problem(stored)
        if problem:
            db.close()
            self.log(f"index at {self.folder} is damaged ({problem}); rebuilding it")
            self.rebuilt_because = "damaged"
            self._delete_files()
            return self._open()
        old = json.loads(stored["settings"]) if stored.get("settings") else None
        resplit = old is not None and _changed_keys(_vector_settings(old), _vector_settings(self.settings)) == [
            RESPLIT_SETTING]
        if resplit:  # the vectors hold for every piece text the new chunking still makes: keep them (below)
            self.log(f"index chunking changed (version {old.get(RESPLIT_SETTING)} -> "
                     f"{self.settings[RESPLIT_SETTING]}); splitting every file again, embedding only new piece texts")
        elif old is not None and _vector_settings(old) != _vector_settings(self.settings):
            changed = _changed_keys(_vector_settings(old), _vector_settings(self.settings))
            self.log(f"index settings changed ({', '.join(changed)}); rebuilding the index")
            self.rebuilt_because = "settings: " + ", ".join(changed)
            db.close()
            self._delete_files()
            db = self._connect()
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            stored = {}
        elif old is not None and old != self.settings:  # the precision or the model's path alone changed
            was = old.get("precision", DEFAULT_PRECISION)
            if was != self.precision:
                self.log(f"index precision changed ({was} -> {self.precision}); quantizing the stored float32 "
                         "vectors again, nothing is re-embedded")
            with db:
                db.execute("INSERT OR REPLACE INTO meta VALUES ('settings', ?)", (wanted,))
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        missing = sorted(set(TABLES) - tables)
        if stored and missing:  # a written index lost tables: recreating them empty would say "no code" forever
            db.close()
            self.log(f"index at {self.folder} is damaged (tables {', '.join(missing)} missing); rebuilding it")
            self.rebuilt_because = "damaged"
            self._delete_files()
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
        if resplit:  # every file counts as changed, so the next update splits it; its old pieces lend their vectors.
            with db:  # one transaction: new settings never stand over files the old chunking split
                db.execute("UPDATE files SET sha256 = '', size = -1, mtime_ns = -1")
                db.execute("INSERT OR REPLACE INTO meta VALUES ('settings', ?)", (wanted,))
        try:
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
        except sqlite3.DatabaseError as error:
            db.close()
            self.log(f"index at {self.folder} is damaged ({error}); rebuilding it")
            self.rebuilt_because = "damaged"
            self._delete_files()
            return self._open()
        return db

    def _delete_files(self) -> None:
        for path in self.folder.iterdir():
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    def close(self) -> None:
        self.db.close()

    @property
    def generation(self) -> int:
        return int(self.db.execute("SELECT value FROM meta WHERE key='generation'").fetchone()[0])

    # updating -------------------------------------------------------------------------------------------------

    def update(self, root: Path, files: list[str], embed: Callable[[list[str]], np.ndarray],
               progress: bool = True, before_embedding: BeforeEmbedding | None = None) -> UpdateReport:
        """Bring the index in line with `files` (relative to root): embed new or changed files, drop the rest.
        One process updates an index at a time: a second one waits, then finds the work done.
        `before_embedding(parsed)`: called with the new or changed files, parsed, before any of them is embedded
        (only when there are some); the index then holds every other file's pieces (a first answer's corpus). It
        may return vectors it has (KnownVectors: those a first answer embedded): the build uses them, not the model."""
        with self._update_lock():
            return self._update(root, files, embed, progress, before_embedding)

    @contextlib.contextmanager
    def _update_lock(self):
        """An exclusive lock on the index folder for the length of an update (POSIX flock; released by the OS
        when a process dies). Without fcntl (Windows) updates are not serialised: double work, never damage."""
        try:
            import fcntl
        except ImportError:
            yield
            return
        with open(self.folder / LOCK_NAME, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self.log(f"another codesearch is updating the index at {self.folder}; waiting for it")
                fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _update(self, root: Path, files: list[str], embed: Callable[[list[str]], np.ndarray],
                progress: bool, before_embedding: BeforeEmbedding | None) -> UpdateReport:
        report = UpdateReport(rebuilt_because=self.rebuilt_because)
        stored = {path: (sha, size, mtime, status) for path, sha, size, mtime, status
                  in self.db.execute("SELECT path, sha256, size, mtime_ns, status FROM files")}
        wanted = set(files)
        gone = [path for path in stored if path not in wanted]
        changed: list[tuple[str, str, int, int, str]] = []  # path, sha, size, mtime, text
        touched: list[tuple[str, int, int]] = []  # same content, new mtime
        leaving_links: set[str] = set()
        with FolderReader(root) as reader:  # never reads outside root, also when a link is swapped in meanwhile
            for path in files:
                try:
                    fd = reader.open(path)
                except OSError as error:  # vanished, forbidden or made a link since it was listed
                    if isinstance(error, LeavesFolder):
                        leaving_links.add(error.link)
                    else:
                        report.skipped["unreadable"] += 1
                    if path in stored:
                        gone.append(path)
                    continue
                with os.fdopen(fd, "rb") as handle:
                    stat = os.fstat(fd)
                    old = stored.get(path)
                    if old and old[1] == stat.st_size and old[2] == stat.st_mtime_ns:
                        report.unchanged_files += 1
                        continue
                    data = handle.read()
                sha = hashlib.sha256(data).hexdigest()
                if old and old[0] == sha:
                    touched.append((path, stat.st_size, stat.st_mtime_ns))
                    report.unchanged_files += 1
                    continue
                changed.append((path, sha, stat.st_size, stat.st_mtime_ns, data.decode("utf-8", errors="replace")))
        if leaving_links:
            report.skipped[LINK_OUTSIDE] += len(leaving_links)
        with self.db:
            self.db.executemany("UPDATE files SET size=?, mtime_ns=? WHERE path=?",
                                [(size, mtime, path) for path, size, mtime in touched])
        if gone:
            with self.db:
                self.db.executemany("DELETE FROM pieces WHERE path=?", [(p,) for p in gone])
                self.db.executemany("DELETE FROM files WHERE path=?", [(p,) for p in gone])
                self.db.executemany("DELETE FROM paths WHERE path=?", [(p,) for p in gone])
                self._bump()
            report.removed_files = len(gone)

        # parse every changed file first (fast), then embed in batches of whole files
        parsed: list[ParsedFile] = []
        parse_progress = Progress("parsing", len(changed)) if progress and len(changed) > 50 else None
        for path, sha, size, mtime, text in changed:
            try:
                pieces, status = split_file(path, text), "ok"
            except ChunkingError:
                pieces, status = [], "unparsable"
            parsed.append(((path, sha, size, mtime), pieces, status))
            if parse_progress:
                parse_progress.advance()
        # text -> vector: copied code (vendored files, generated twins) embeds once; a first answer's texts, not again
        seen: dict[str, np.ndarray] = {}
        known = before_embedding(parsed) if before_embedding is not None and parsed else None
        known = known or KnownVectors()
        seen.update(known.texts)
        total = sum(len(pieces) for _, pieces, _ in parsed)
        embed_progress = Progress("embedding pieces", total) if progress and total > PROGRESS_PIECES else None
        batch: list[tuple[tuple, list[CodePiece], str]] = []
        for item in parsed:
            batch.append(item)
            if sum(len(p) for _, p, _ in batch) >= EMBED_BATCH_PIECES:
                self._store_batch(batch, embed, report, embed_progress, seen)
                batch = []
        if batch:
            self._store_batch(batch, embed, report, embed_progress, seen)
        if self.db.execute("SELECT value FROM meta WHERE key='path_vectors'").fetchone() != ("complete",):
            self._store_path_vectors(embed, report, known.paths)  # not on an update that changed nothing
        report.skipped.update(dict(self.db.execute(
            "SELECT 'could not be parsed', count(*) FROM files WHERE status='unparsable' HAVING count(*) > 0")))
        return report

    def _store_batch(self, batch, embed, report: UpdateReport, progress: Progress | None,
                     seen: dict[str, np.ndarray]) -> None:
        texts = [piece.text for _, pieces, _ in batch for piece in pieces]
        self._reuse_vectors([info[0] for info, _, _ in batch], seen)
        # Longest first, so each model call (and each batch inside it) pads to similar lengths.
        new = sorted({text for text in texts if text not in seen}, key=len, reverse=True)
        if progress:
            progress.advance(len(texts) - len(new))  # copies of text embedded before cost nothing
        for start in range(0, len(new), PROGRESS_PIECES):  # smaller calls only to report progress more often
            chunk = new[start:start + PROGRESS_PIECES]
            vectors = np.asarray(embed(chunk), dtype=np.float32)  # (len(chunk), d)
            if len(vectors) != len(chunk):
                raise RuntimeError(f"the embedding function returned {len(vectors)} vectors for {len(chunk)} texts")
            seen.update(zip(chunk, vectors))
            if progress:
                progress.advance(len(chunk))
        rows = [(path, piece.line, piece.end_line, piece.title, piece.text, seen[piece.text].tobytes())
                for (path, _, _, _), pieces, _ in batch for piece in pieces]
        with self.db:  # one transaction: the files and their pieces appear together or not at all
            # their paths may have no vector yet: the next step (or a later update, if this one is killed) gives one
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('path_vectors', 'incomplete')")
            self.db.executemany("DELETE FROM pieces WHERE path=?", [(info[0],) for info, _, _ in batch])
            self.db.executemany("INSERT INTO pieces (path, line, end_line, title, text, vector) VALUES (?,?,?,?,?,?)",
                                rows)
            self.db.executemany("INSERT OR REPLACE INTO files VALUES (?,?,?,?,?)",
                                [(*info, status) for info, _, status in batch])
            self._bump()
        report.embedded_files += len(batch)
        report.embedded_pieces += len(texts)
        report.model_inputs += len(new)

    def _store_path_vectors(self, embed: Callable[[list[str]], np.ndarray], report: UpdateReport,
                            known: dict[str, np.ndarray]) -> None:
        """Give every file with pieces that has no path vector yet (new files, or every file of an index written
        before path vectors) one, from `known` or the model, and drop those of files without pieces now; then say
        so in `meta`, so an update that changes nothing skips this step."""
        with self.db:
            self.db.execute("DELETE FROM paths WHERE path NOT IN (SELECT path FROM pieces)")
        missing = [row[0] for row in self.db.execute(
            "SELECT DISTINCT path FROM pieces WHERE path NOT IN (SELECT path FROM paths) ORDER BY path")]
        for start in range(0, len(missing), EMBED_BATCH_PIECES):
            chunk = missing[start:start + EMBED_BATCH_PIECES]
            new = [path for path in chunk if path not in known]
            vectors = np.asarray(embed(new), dtype=np.float32) if new else np.zeros((0, 1), np.float32)  # (new, d)
            if len(vectors) != len(new):
                raise RuntimeError(f"the embedding function returned {len(vectors)} vectors for {len(new)} texts")
            embedded = dict(zip(new, vectors))
            rows = [(path, np.asarray(embedded[path] if path in embedded else known[path], np.float32).tobytes())
                    for path in chunk]
            with self.db:
                self.db.executemany("INSERT OR REPLACE INTO paths VALUES (?, ?)", rows)
                self._bump()
            report.embedded_paths += len(new)
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('path_vectors', 'complete')")

    def path_vectors(self) -> dict[str, np.ndarray]:
        """Path -> (d,) float32 vector of the path, for every file that has one."""
        return {path: np.frombuffer(blob, dtype=np.float32) for path, blob in
                self.db.execute("SELECT path, vector FROM paths")}

    def _reuse_vectors(self, paths: list[str], seen: dict[str, np.ndarray]) -> None:
        """The stored vectors of these files' current pieces, by text: an edit re-embeds only the pieces whose
        text changed (the index settings, model included, are the same, or the index would have been rebuilt)."""
        for start in range(0, len(paths), SQL_VARIABLES):
            chunk = paths[start:start + SQL_VARIABLES]
            rows = self.db.execute(f"SELECT text, vector FROM pieces WHERE path IN ({','.join('?' * len(chunk))})",
                                   chunk)
            for text, blob in rows:
                seen.setdefault(text, np.frombuffer(blob, dtype=np.float32))

    def _bump(self) -> None:
        self.db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='generation'")

    # reading --------------------------------------------------------------------------------------------------

    def load(self, rescore_multiplier: int = DEFAULT_RESCORE_MULTIPLIER) -> LoadedIndex:
        """The pieces and their vectors at the index's precision; `rescore_multiplier`: binary precision's rows
        rescored per hit wanted (codesearch.quantization)."""
        generation = self.generation
        rows = self.db.execute("SELECT id, path, line, end_line, title FROM pieces ORDER BY id").fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        vectors = self._snapshot(generation, ids)
        if vectors.precision == "binary":  # a new object: the snapshot's vectors are never changed in place
            dimension = vectors.dimension
            vectors = replace(vectors, rescore_multiplier=rescore_multiplier,
                              read_float=lambda picked: self.float_vectors(ids[picked], dimension))
        paths = [r[1] for r in rows]
        return LoadedIndex(ids, vectors, paths, [r[2] for r in rows], [r[3] for r in rows], [r[4] for r in rows],
                           generation, self.file_keys(),
                           PathVectors.of_rows(paths, self.path_vectors(), self.precision))

    def _snapshot(self, generation: int, ids: np.ndarray) -> DenseVectors:
        """The vectors at this index's precision: the snapshot when it is this generation's and well-formed, else
        made again from the database's float32 vectors (a missing, stale or damaged snapshot is never fatal)."""
        path = self.folder / SNAPSHOT_NAMES[self.precision]
        row = self.db.execute("SELECT length(vector) FROM pieces LIMIT 1").fetchone()
        width = row[0] // FLOAT_BYTES if row else 1  # no pieces: a (0, 1) matrix
        try:
            with np.load(path) as saved:
                if int(saved["generation"]) == generation and np.array_equal(saved["ids"], ids):
                    vectors = saved["vectors"]
                    ranges = saved["ranges"] if self.precision == "int8" else None
                    # flipped bytes fail the zip's CRC (BadZipFile below); what is left to check is the shape
                    dtype, shape = _snapshot_layout(self.precision, len(ids), width)
                    if (vectors.dtype == dtype and vectors.shape == shape
                            and (ranges is None or (ranges.dtype == np.float32 and ranges.shape == (2, width)))):
                        return DenseVectors(self.precision, vectors, width, ranges)
                    self.log(f"{path} holds a {vectors.dtype} matrix of shape {vectors.shape}, not this index's "
                             f"{np.dtype(dtype)} {shape}; rebuilding it from the database")
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error) as error:
            self.log(f"{path} is damaged ({type(error).__name__}: {error}); rebuilding it from the database")
        blob = b"".join(row[0] for row in self.db.execute("SELECT vector FROM pieces ORDER BY id"))
        floats = np.frombuffer(blob, dtype=np.float32).reshape(len(ids), width)  # (n, d)
        vectors = DenseVectors.from_float(floats, self.precision)  # int8: calibrated on this corpus
        arrays = {"vectors": vectors.matrix} if vectors.ranges is None else {"vectors": vectors.matrix,
                                                                             "ranges": vectors.ranges}
        with atomic_target(path, suffix=".npz") as temporary:  # readers see the old or the new snapshot, never half
            np.savez(temporary, generation=np.int64(generation), ids=ids, **arrays)  # (".npz": else savez adds it)
        for name in SNAPSHOT_NAMES.values():  # another precision's snapshot: stale disk, made again if needed
            if name != path.name:
                (self.folder / name).unlink(missing_ok=True)
        return vectors

    def float_vectors(self, ids: np.ndarray, dimension: int) -> np.ndarray:
        """(len(ids), dimension) float32 vectors of these pieces, read from the database (binary precision's
        rescoring reads only its candidates); NaN rows for pieces deleted since the index was loaded."""
        out = np.full((len(ids), dimension), np.nan, dtype=np.float32)
        row_of = {int(piece_id): row for row, piece_id in enumerate(ids)}
        wanted = list(row_of)
        for start in range(0, len(wanted), SQL_VARIABLES):
            chunk = wanted[start:start + SQL_VARIABLES]
            query = f"SELECT id, vector FROM pieces WHERE id IN ({','.join('?' * len(chunk))})"
            for piece_id, blob in self.db.execute(query, chunk):
                out[row_of[piece_id]] = np.frombuffer(blob, dtype=np.float32)
        return out

    def texts(self, ids) -> dict[int, str]:
        ids = [int(i) for i in ids]
        query = f"SELECT id, text FROM pieces WHERE id IN ({','.join('?' * len(ids))})"
        return dict(self.db.execute(query, ids)) if ids else {}

    def all_texts(self) -> list[str]:
        return [row[0] for row in self.db.execute("SELECT text FROM pieces ORDER BY id")]

    def stored_pieces(self) -> list[tuple[str, int, int, str, str, bytes]]:
        """Every piece as (path, line, end_line, title, text, float32 vector bytes), in id order."""
        return self.db.execute("SELECT path, line, end_line, title, text, vector FROM pieces ORDER BY id").fetchall()

    def file_keys(self) -> dict[str, str]:
        """Path -> sha256 of every indexed file (byte-identical files share it)."""
        return dict(self.db.execute("SELECT path, sha256 FROM files"))

    # query vectors: a repeated query needs no model (loading it is most of a query's time)

    def cached_query(self, text: str) -> np.ndarray | None:
        row = self.db.execute("SELECT vector FROM queries WHERE text=?", (text,)).fetchone()
        return np.frombuffer(row[0], dtype=np.float32) if row else None

    def store_query(self, text: str, vector: np.ndarray) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO queries VALUES (?, ?)",
                            (text, np.asarray(vector, dtype=np.float32).tobytes()))
            self.db.execute(f"DELETE FROM queries WHERE rowid NOT IN (SELECT rowid FROM queries ORDER BY rowid DESC "
                            f"LIMIT {QUERY_CACHE_SIZE})")

    # BM25 -----------------------------------------------------------------------------------------------------

    def bm25(self, generation: int, tokenize: Callable[[str], list[str]] = code_tokens):
        """The bm25s retriever for this generation of the pieces (built and saved on first use). `tokenize`: a
        long-lived caller passes code_tokens behind its own cache of unchanged texts."""
        bm25s = import_bm25s()

        target = self.folder / f"bm25-t{TOKENIZER_VERSION}-{generation}"
        if target.is_dir():
            try:
                return bm25s.BM25.load(str(target), show_progress=False, verbosity=0)
            except Exception:  # damaged: rebuild below
                shutil.rmtree(target, ignore_errors=True)
        retriever = bm25s.BM25()
        retriever.index([tokenize(text) or ["<empty>"] for text in self.all_texts()], show_progress=False)
        with atomic_target(target) as temporary:
            retriever.save(str(temporary), show_progress=False)
            # older generations, and what a killed build left under its temporary name (".bm25-*")
            for old in [*self.folder.glob("bm25-*"), *self.folder.glob(".bm25-*")]:
                if old != temporary:
                    shutil.rmtree(old, ignore_errors=True)
        return retriever


def _meta_problem(stored: dict) -> str:
    """What is wrong with the meta table's values ("" when nothing): settings that are not a JSON object, a
    generation that is not a whole number."""
    try:
        settings = json.loads(stored["settings"]) if stored.get("settings") else {}
    except (TypeError, ValueError):
        return f"settings are not JSON: {str(stored['settings'])[:40]!r}"
    if not isinstance(settings, dict):
        return f"settings are not a JSON object: {str(stored['settings'])[:40]!r}"
    if stored and "generation" not in stored:
        return "no generation"
    try:
        int(stored.get("generation", 0))
    except (TypeError, ValueError):
        return f"generation is not a number: {str(stored['generation'])[:40]!r}"
    return ""


def _snapshot_layout(precision: str, rows: int, width: int) -> tuple[type, tuple[int, int]]:
    """The dtype and shape of a snapshot's matrix at `precision` for `rows` vectors of `width` floats."""
    if precision == "binary":
        return np.uint8, (rows, (width + 7) // 8)
    return (np.int8 if precision == "int8" else np.float32), (rows, width)


def _vector_settings(settings: dict) -> dict:
    return {key: value for key, value in settings.items() if key not in VECTOR_NEUTRAL_SETTINGS}


def _changed_keys(old: dict, new: dict) -> list[str]:
    return sorted(key for key in set(old) | set(new) if old.get(key) != new.get(key))
