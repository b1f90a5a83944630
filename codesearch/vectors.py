"""An index's vectors beside its rows (codesearch.store): the snapshot at the index's precision, exact float32
vectors by piece id, and the vector of each file's path.

The snapshot (vectors.npz, or vectors-int8.npz / vectors-binary.npz: codesearch.quantization) is a cache of the
database's float32 vectors for a fast load: made again when its generation or piece ids differ, it is damaged or its
matrix has the wrong shape, so a missing, stale or damaged snapshot is never fatal. Path vectors (table paths,
codesearch.loaded.PathVectors) are kept for every file with pieces.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Callable

import numpy as np

from c2llm_plumbing.atomic import atomic_target
from codesearch.quantization import DenseVectors
from codesearch.store import PATH_VECTORS_KEY, SQL_VARIABLES, IndexStore
from codesearch.store_checks import FLOAT_BYTES

SNAPSHOT_NAMES = {"float32": "vectors.npz", "int8": "vectors-int8.npz", "binary": "vectors-binary.npz"}


class IndexVectors:
    """The vectors of one open index at `precision` ("float32", "int8" or "binary")."""

    def __init__(self, store: IndexStore, precision: str, log: Callable[[str], None]):
        self.store, self.precision, self.log = store, precision, log

    def snapshot(self, generation: int, ids: np.ndarray) -> DenseVectors:
        """The vectors of the pieces `ids` (in this order) at this index's precision: the snapshot when it is this
        generation's and well-formed, else made again from the database's float32 vectors and saved."""
        path = self.store.folder / SNAPSHOT_NAMES[self.precision]
        row = self.store.db.execute("SELECT length(vector) FROM pieces LIMIT 1").fetchone()
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
        blob = b"".join(row[0] for row in self.store.db.execute("SELECT vector FROM pieces ORDER BY id"))
        floats = np.frombuffer(blob, dtype=np.float32).reshape(len(ids), width)  # (n, d)
        vectors = DenseVectors.from_float(floats, self.precision)  # int8: calibrated on this corpus
        arrays = {"vectors": vectors.matrix} if vectors.ranges is None else {"vectors": vectors.matrix,
                                                                             "ranges": vectors.ranges}
        with atomic_target(path, suffix=".npz") as temporary:  # readers see the old or the new snapshot, never half
            np.savez(temporary, generation=np.int64(generation), ids=ids, **arrays)  # (".npz": else savez adds it)
        for name in SNAPSHOT_NAMES.values():  # another precision's snapshot: stale disk, made again if needed
            if name != path.name:
                (self.store.folder / name).unlink(missing_ok=True)
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
            for piece_id, blob in self.store.db.execute(query, chunk):
                out[row_of[piece_id]] = np.frombuffer(blob, dtype=np.float32)
        return out

    # path vectors ---------------------------------------------------------------------------------------------

    def path_vectors(self) -> dict[str, np.ndarray]:
        """Path -> (d,) float32 vector of the path, for every file that has one."""
        return {path: np.frombuffer(blob, dtype=np.float32) for path, blob in
                self.store.db.execute("SELECT path, vector FROM paths")}

    def paths_complete(self) -> bool:
        """Whether every file with pieces has its path vector (codesearch.store.IndexStore.replace_files says not
        when it stores new files), so an update that changed nothing skips the path step."""
        return self.store.meta(PATH_VECTORS_KEY) == "complete"

    def paths_without_vectors(self) -> list[str]:
        """Drop the vectors of paths without pieces now; the sorted paths with pieces and no vector."""
        db = self.store.db
        with db:
            db.execute("DELETE FROM paths WHERE path NOT IN (SELECT path FROM pieces)")
        return [row[0] for row in db.execute(
            "SELECT DISTINCT path FROM pieces WHERE path NOT IN (SELECT path FROM paths) ORDER BY path")]

    def store_path_vectors(self, vectors: dict[str, np.ndarray]) -> None:
        """Store these paths' (d,) float32 vectors, as one transaction and one generation."""
        with self.store.db:
            self.store.db.executemany("INSERT OR REPLACE INTO paths VALUES (?, ?)",
                                      [(path, np.asarray(vector, np.float32).tobytes())
                                       for path, vector in vectors.items()])
            self.store.bump()

    def mark_paths_complete(self) -> None:
        with self.store.db:
            self.store.set_meta(PATH_VECTORS_KEY, "complete")


def _snapshot_layout(precision: str, rows: int, width: int) -> tuple[type, tuple[int, int]]:
    """The dtype and shape of a snapshot's matrix at `precision` for `rows` vectors of `width` floats."""
    if precision == "binary":
        return np.uint8, (rows, (width + 7) // 8)
    return (np.int8 if precision == "int8" else np.float32), (rows, width)
