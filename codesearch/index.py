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
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from c2llm_data.tokens import code_tokens
from codesearch.bm25 import bm25_retriever, import_bm25s  # noqa: F401 (import_bm25s: codesearch.first_stage's)
from codesearch.chunking import ChunkingError, CodePiece, split_file
from codesearch.files import LINK_OUTSIDE, FolderReader, LeavesFolder
from codesearch.quantization import DEFAULT_PRECISION, DEFAULT_RESCORE_MULTIPLIER, DenseVectors, check_precision
from codesearch.ranking import PathVectors
from codesearch.store import INDEX_FORMAT, IndexStore
from codesearch.vectors import IndexVectors

LOCK_NAME = "update.lock"
EMBED_BATCH_PIECES = 512  # pieces per transaction: a kill loses at most this much work
PROGRESS_PIECES = 128  # pieces per model call (each call sorts its texts by length, so not much smaller)
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
        self.rebuilt_because = self.store.rebuilt_because  # "" when the stored index was kept

    @property
    def db(self):
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
        stored = self.store.files()
        wanted = set(files)
        gone = [path for path in stored if path not in wanted]
        changed, touched = self._read_changes(root, files, stored, gone, report)
        self.store.touch(touched)
        if gone:
            self.store.remove(gone)
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
        batch: list[ParsedFile] = []
        for item in parsed:
            batch.append(item)
            if sum(len(p) for _, p, _ in batch) >= EMBED_BATCH_PIECES:
                self._store_batch(batch, embed, report, embed_progress, seen)
                batch = []
        if batch:
            self._store_batch(batch, embed, report, embed_progress, seen)
        if not self.vectors.paths_complete():
            self._store_path_vectors(embed, report, known.paths)  # not on an update that changed nothing
        if unparsable := self.store.unparsable_files():
            report.skipped["could not be parsed"] += unparsable
        return report

    @staticmethod
    def _read_changes(root: Path, files: list[str], stored: dict, gone: list[str],
                      report: UpdateReport) -> tuple[list[tuple[str, str, int, int, str]], list[tuple[str, int, int]]]:
        """Read the files whose size or mtime differ from their stored row. Returns those with new bytes as (path,
        sha256, size, mtime_ns, text) and those with the same bytes as (path, size, mtime_ns); adds to `gone` the
        stored files that can no longer be read, and counts in `report` the unchanged and skipped ones."""
        changed: list[tuple[str, str, int, int, str]] = []
        touched: list[tuple[str, int, int]] = []
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
        return changed, touched

    def _store_batch(self, batch: list[ParsedFile], embed, report: UpdateReport, progress: Progress | None,
                     seen: dict[str, np.ndarray]) -> None:
        texts = [piece.text for _, pieces, _ in batch for piece in pieces]
        self.store.vectors_by_text([info[0] for info, _, _ in batch], seen)
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
        self.store.replace_files([(*info, status) for info, _, status in batch], rows)
        report.embedded_files += len(batch)
        report.embedded_pieces += len(texts)
        report.model_inputs += len(new)

    def _store_path_vectors(self, embed: Callable[[list[str]], np.ndarray], report: UpdateReport,
                            known: dict[str, np.ndarray]) -> None:
        """Give every file with pieces that has no path vector yet (new files, or every file of an index written
        before path vectors) one, from `known` or the model, and drop those of files without pieces now; then say
        so, so an update that changes nothing skips this step."""
        missing = self.vectors.paths_without_vectors()
        for start in range(0, len(missing), EMBED_BATCH_PIECES):
            chunk = missing[start:start + EMBED_BATCH_PIECES]
            new = [path for path in chunk if path not in known]
            vectors = np.asarray(embed(new), dtype=np.float32) if new else np.zeros((0, 1), np.float32)  # (new, d)
            if len(vectors) != len(new):
                raise RuntimeError(f"the embedding function returned {len(vectors)} vectors for {len(new)} texts")
            embedded = dict(zip(new, vectors))
            self.vectors.store_path_vectors({path: embedded[path] if path in embedded else known[path]
                                             for path in chunk})
            report.embedded_paths += len(new)
        self.vectors.mark_paths_complete()

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
