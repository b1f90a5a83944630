"""The on-disk index of one searched folder: pieces, their vectors, and what they were made from.

Layout of an index folder (default `$XDG_CACHE_HOME/c2llm-codesearch/<sha256 of the folder's absolute path>`):

    index.sqlite    tables meta (settings, generation), files (path, sha256, size, mtime_ns, status) and
                    pieces (path, line, end_line, title, text, float32 vector): the source of truth,
                    paths (path, float32 vector of the path's text: codesearch.loaded.PathVectors) of every
                    file with pieces, and queries (text, vector) of the last codesearch.store.QUERY_CACHE_SIZE queries
    vectors.npz     every vector as one matrix plus the piece ids, for a fast load; rebuilt from the database
                    when its generation differs, it is damaged or its matrix has the wrong shape. At precision int8
                    or binary it is vectors-int8.npz (codes and calibration ranges) or vectors-binary.npz (packed
                    bits) instead, made from the database's float32 vectors (codesearch.quantization)
    bm25-t<tokenizer version>-<gen>/  the bm25s index of the same generation, built on the first BM25/hybrid query
                    after a change
    update.lock     held while a process updates the index: a second one waits, then finds the work done

Why SQLite + numpy (benchmarks/codesearch_store.py; its record, benchmarks/results/codesearch_store.json, is
rendered in codesearch/reports/vectors.md): exact brute-force search over 100k x 384 float32 is one matmul of
tens of ms, so no approximate index is needed; SQLite gives atomic, resumable incremental updates with no extra
dependency; the .npz snapshot loads faster than reading 100k BLOB rows.

Its parts, one job each, composed by SearchIndex below (which also holds the update lock):
- codesearch.store: the database: opening it (kept, re-quantized, split again or rebuilt, by the stored settings),
  the rows of files and pieces, the generation and the query cache;
- codesearch.vectors: the snapshot at the index's precision, float32 vectors by piece id, path vectors;
- codesearch.bm25: the bm25s retriever of a generation, and bm25s loaded without its unused backends;
- codesearch.update: one update: what changed, parsing, embedding only new piece texts, path vectors.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from c2llm_data.tokens import code_tokens
from codesearch.bm25 import bm25_retriever, import_bm25s  # noqa: F401 (import_bm25s: codesearch.first_stage's)
from codesearch.quantization import DEFAULT_PRECISION, DEFAULT_RESCORE_MULTIPLIER, check_precision
from codesearch.loaded import LoadedIndex, PathVectors
from codesearch.store import INDEX_FORMAT, IndexStore
# KnownVectors and ParsedFile: codesearch.searcher's, from here
from codesearch.update import BeforeEmbedding, IndexUpdate, KnownVectors, ParsedFile, UpdateReport  # noqa: F401
from codesearch.vectors import IndexVectors

LOCK_NAME = "update.lock"


def default_index_dir(root: Path) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
    return cache / "c2llm-codesearch" / key


class IndexLocationError(OSError):
    """The index folder cannot be created or written; the message names the fix."""


class SearchIndex:
    """One index folder: its database (codesearch.store), vectors (codesearch.vectors) and BM25 retriever
    (codesearch.bm25), and the update that brings them in line with a folder's files, one process at a time."""

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
        self.store = IndexStore(self.folder, self.settings, self.log)
        self.vectors = IndexVectors(self.store, self.precision, self.log)

    @property
    def rebuilt_because(self) -> str:
        """Why opening rebuilt the index ("" when the stored one was kept)."""
        return self.store.rebuilt_because

    @property
    def db(self):
        """The open sqlite3 connection (codesearch.store)."""
        return self.store.db

    @property
    def generation(self) -> int:
        return self.store.generation

    def close(self) -> None:
        self.store.close()

    # updating -------------------------------------------------------------------------------------------------

    def update(self, root: Path, files: list[str], embed: Callable[[list[str]], np.ndarray],
               progress: bool = True, before_embedding: BeforeEmbedding | None = None) -> UpdateReport:
        """Bring the index in line with `files` (relative to root): embed new or changed files, drop the rest.
        One process updates an index at a time: a second one waits, then finds the work done.
        `before_embedding(parsed)`: called with the new or changed files, parsed, before any of them is embedded
        (only when there are some); the index then holds every other file's pieces (a first answer's corpus). It
        may return vectors it has (KnownVectors: those a first answer embedded): the build uses them, not the model."""
        with self._update_lock():
            return IndexUpdate(self.store, self.vectors, embed, progress).run(root, files, before_embedding)

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

    # reading --------------------------------------------------------------------------------------------------

    def load(self, rescore_multiplier: int = DEFAULT_RESCORE_MULTIPLIER) -> LoadedIndex:
        """The pieces and their vectors at the index's precision; `rescore_multiplier`: binary precision's rows
        rescored per hit wanted (codesearch.quantization)."""
        generation = self.generation
        rows = self.store.piece_places()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        vectors = self.vectors.snapshot(generation, ids)
        if vectors.precision == "binary":  # a new object: the snapshot's vectors are never changed in place
            dimension = vectors.dimension
            vectors = replace(vectors, rescore_multiplier=rescore_multiplier,
                              read_float=lambda picked: self.float_vectors(ids[picked], dimension))
        paths = [r[1] for r in rows]
        return LoadedIndex(ids, vectors, paths, [r[2] for r in rows], [r[3] for r in rows], [r[4] for r in rows],
                           generation, self.file_keys(),
                           PathVectors.of_rows(paths, self.path_vectors(), self.precision))

    def bm25(self, generation: int, tokenize: Callable[[str], list[str]] = code_tokens):
        """The bm25s retriever for this generation of the pieces (built and saved on first use). `tokenize`: a
        long-lived caller passes code_tokens behind its own cache of unchanged texts."""
        return bm25_retriever(self.folder, generation, self.store.all_texts, tokenize)

    # what the store and the vectors answer (codesearch.store.IndexStore, codesearch.vectors.IndexVectors)

    def float_vectors(self, ids: np.ndarray, dimension: int) -> np.ndarray:
        return self.vectors.float_vectors(ids, dimension)

    def path_vectors(self) -> dict[str, np.ndarray]:
        return self.vectors.path_vectors()

    def texts(self, ids) -> dict[int, str]:
        return self.store.texts(ids)

    def all_texts(self) -> list[str]:
        return self.store.all_texts()

    def stored_pieces(self) -> list[tuple[str, int, int, str, str, bytes]]:
        return self.store.stored_pieces()

    def file_keys(self) -> dict[str, str]:
        return self.store.file_keys()

    def cached_query(self, text: str) -> np.ndarray | None:
        return self.store.cached_query(text)

    def store_query(self, text: str, vector: np.ndarray) -> None:
        self.store.store_query(text, vector)
