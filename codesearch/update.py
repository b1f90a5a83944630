"""One update of an index: bring it in line with a folder's files, embedding only what it does not hold.

Incremental by content: a file whose size and mtime are unchanged is trusted; otherwise its bytes are hashed and
only a new hash re-embeds its pieces, and of those only the texts the index holds no vector for (an edit keeps the
vectors of its untouched pieces; copied code embeds once). Each batch of whole files is one transaction, so a killed
build keeps the files it finished and the next run resumes; then every file with pieces and no path vector gets one.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from codesearch.chunking import ChunkingError, CodePiece, split_file
from codesearch.files import LINK_OUTSIDE, FolderReader, LeavesFolder
from codesearch.store import IndexStore
from codesearch.vectors import IndexVectors

EMBED_BATCH_PIECES = 512  # pieces per transaction: a kill loses at most this much work
PROGRESS_PIECES = 128  # pieces per model call (each call sorts its texts by length, so not much smaller)
PROGRESS_FILES = 50  # fewer changed files parse in well under a second: no progress lines for them
# A new or changed file after parsing: (path, sha256, size, mtime_ns), its pieces, "ok" or "unparsable"
ParsedFile = tuple[tuple[str, str, int, int], list[CodePiece], str]
Embed = Callable[[list[str]], np.ndarray]  # texts -> (len(texts), d) float32 unit vectors


@dataclass
class KnownVectors:
    """Vectors a build need not embed again (a first answer's): piece vectors by text, path vectors by path."""

    texts: dict[str, np.ndarray] = field(default_factory=dict)
    paths: dict[str, np.ndarray] = field(default_factory=dict)


# called before a build embeds its parsed files; returns vectors it already has (or None)
BeforeEmbedding = Callable[[list[ParsedFile]], KnownVectors | None]


@dataclass
class UpdateReport:
    embedded_files: int = 0
    embedded_pieces: int = 0
    model_inputs: int = 0  # distinct texts the model read (embedded_pieces minus copies)
    embedded_paths: int = 0  # file paths the model read (codesearch.loaded.PathVectors)
    removed_files: int = 0
    unchanged_files: int = 0
    skipped: Counter = field(default_factory=Counter)
    rebuilt_because: str = ""


class Progress:
    """Periodic progress lines on stderr (at most one per `every` seconds, plus the last), each ended by a newline.
    Not tqdm: it writes every refresh as a carriage return and the redrawn bar, whatever its file (a tty or not)
    and `mininterval`, and has no public option to end one with a newline, so a log of stderr (an MCP client's)
    keeps the whole run as one line; benchmarks/codesearch_speed.py also reads the rate from these lines."""

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


class IndexUpdate:
    """One update of the index behind `store` and `vectors` with the embedding function `embed`; the caller holds
    the index's update lock (codesearch.index.SearchIndex.update)."""

    def __init__(self, store: IndexStore, vectors: IndexVectors, embed: Embed, progress: bool):
        self.store, self.vectors, self.embed, self.progress = store, vectors, embed, progress
        self.report = UpdateReport(rebuilt_because=store.rebuilt_because)

    def run(self, root: Path, files: list[str], before_embedding: BeforeEmbedding | None) -> UpdateReport:
        """Embed new or changed `files` (relative to root), drop the rest; see codesearch.index.SearchIndex.update
        for `before_embedding`."""
        report = self.report
        stored = self.store.files()
        wanted = set(files)
        gone = [path for path in stored if path not in wanted]
        changed, touched = read_changes(root, files, stored, gone, report)
        self.store.touch(touched)
        if gone:
            self.store.remove(gone)
            report.removed_files = len(gone)

        # parse every changed file first (fast), then embed in batches of whole files
        parsed = parse(changed, Progress("parsing", len(changed)) if self.progress and len(changed) > PROGRESS_FILES
                       else None)
        # text -> vector: copied code (vendored files, generated twins) embeds once; a first answer's texts, not again
        seen: dict[str, np.ndarray] = {}
        known = before_embedding(parsed) if before_embedding is not None and parsed else None
        known = known or KnownVectors()
        seen.update(known.texts)
        total = sum(len(pieces) for _, pieces, _ in parsed)
        embed_progress = Progress("embedding pieces", total) if self.progress and total > PROGRESS_PIECES else None
        batch: list[ParsedFile] = []
        for item in parsed:
            batch.append(item)
            if sum(len(p) for _, p, _ in batch) >= EMBED_BATCH_PIECES:
                self._store_batch(batch, embed_progress, seen)
                batch = []
        if batch:
            self._store_batch(batch, embed_progress, seen)
        if not self.vectors.paths_complete():
            self._store_path_vectors(known.paths)  # not on an update that changed nothing
        if unparsable := self.store.unparsable_files():
            report.skipped["could not be parsed"] += unparsable
        return report

    def _store_batch(self, batch: list[ParsedFile], progress: Progress | None, seen: dict[str, np.ndarray]) -> None:
        """Embed the piece texts of these files that `seen` (text -> vector) lacks, then store the files."""
        texts = [piece.text for _, pieces, _ in batch for piece in pieces]
        self.store.vectors_by_text([info[0] for info, _, _ in batch], seen)
        # Longest first, so each model call (and each batch inside it) pads to similar lengths.
        new = sorted({text for text in texts if text not in seen}, key=len, reverse=True)
        if progress:
            progress.advance(len(texts) - len(new))  # copies of text embedded before cost nothing
        for start in range(0, len(new), PROGRESS_PIECES):  # smaller calls only to report progress more often
            chunk = new[start:start + PROGRESS_PIECES]
            vectors = np.asarray(self.embed(chunk), dtype=np.float32)  # (len(chunk), d)
            if len(vectors) != len(chunk):
                raise RuntimeError(f"the embedding function returned {len(vectors)} vectors for {len(chunk)} texts")
            seen.update(zip(chunk, vectors))
            if progress:
                progress.advance(len(chunk))
        rows = [(path, piece.line, piece.end_line, piece.title, piece.text, seen[piece.text].tobytes())
                for (path, _, _, _), pieces, _ in batch for piece in pieces]
        self.store.replace_files([(*info, status) for info, _, status in batch], rows)
        self.report.embedded_files += len(batch)
        self.report.embedded_pieces += len(texts)
        self.report.model_inputs += len(new)

    def _store_path_vectors(self, known: dict[str, np.ndarray]) -> None:
        """Give every file with pieces that has no path vector yet (new files, or every file of an index written
        before path vectors) one, from `known` or the model, and drop those of files without pieces now; then say
        so, so an update that changes nothing skips this step."""
        missing = self.vectors.paths_without_vectors()
        for start in range(0, len(missing), EMBED_BATCH_PIECES):
            chunk = missing[start:start + EMBED_BATCH_PIECES]
            new = [path for path in chunk if path not in known]
            # (len(new), d)
            vectors = np.asarray(self.embed(new), dtype=np.float32) if new else np.zeros((0, 1), np.float32)
            if len(vectors) != len(new):
                raise RuntimeError(f"the embedding function returned {len(vectors)} vectors for {len(new)} texts")
            embedded = dict(zip(new, vectors))
            self.vectors.store_path_vectors({path: embedded[path] if path in embedded else known[path]
                                             for path in chunk})
            self.report.embedded_paths += len(new)
        self.vectors.mark_paths_complete()


def read_changes(root: Path, files: list[str], stored: dict, gone: list[str],
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


def parse(changed: list[tuple[str, str, int, int, str]], progress: Progress | None) -> list[ParsedFile]:
    """Split each changed file (path, sha256, size, mtime_ns, text) into pieces; a file the chunker refuses has
    none and the status "unparsable"."""
    parsed: list[ParsedFile] = []
    for path, sha, size, mtime, text in changed:
        try:
            pieces, status = split_file(path, text), "ok"
        except ChunkingError:
            pieces, status = [], "unparsable"
        parsed.append(((path, sha, size, mtime), pieces, status))
        if progress:
            progress.advance()
    return parsed
