"""An index held in memory for searching: its rows (one a piece) and what scores them against a query's vector.

- `LoadedIndex`: the rows' ids, vectors, paths, lines and titles, the files' content keys, and the vector of each
  row's file path; `dense_scores` is the dense ranking's score of every row, path term included.
- `PathVectors`: the model's vector of each file's path. A path names what a file is about (`runtime/time/wheel.rs`,
  `middleware/cors.go`) where a piece of it may not, so a row's dense score gains PATH_WEIGHT times the query's
  cosine with its file's path.

codesearch.index.SearchIndex.load builds one from the index on disk, codesearch.first_stage.FirstStage.view one of a
query's candidates; codesearch.ranking ranks its rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from codesearch.quantization import DenseVectors

# a piece's dense score gains this times the query's cosine with its file's path; chosen on semble's benchmark, the
# held-out trees and the Python and JavaScript/Go sets (codesearch/reports/ranking.md)
PATH_WEIGHT = 0.2


@dataclass(frozen=True)
class PathVectors:
    """The model's vector of each file's path (as the index stores it, relative to the searched folder) and the file
    of each row: `vectors` (f, d) at float32, or int8 where the index's own vectors are quantized (so the paths do
    not outweigh binary pieces in memory: d bytes a file against d/8 a piece); `row_files` (n,) int32, a row's index
    into `vectors`."""

    vectors: DenseVectors
    row_files: np.ndarray

    @classmethod
    def of_rows(cls, paths: Sequence[str], vector_of: Mapping[str, np.ndarray],
                precision: str = "float32") -> PathVectors | None:
        """The path vectors of rows in files `paths`, from `vector_of` (path -> (d,) float32 vector), for an index
        at `precision`; a file it lacks scores 0 (no path term). None when it has none of them."""
        files = list(dict.fromkeys(paths))
        known = [vector_of.get(path) for path in files]
        width = next((len(vector) for vector in known if vector is not None), 0)
        if not width:
            return None
        matrix = np.stack([np.zeros(width, np.float32) if vector is None else np.asarray(vector, np.float32)
                           for vector in known])  # (f, d)
        file_row = {path: row for row, path in enumerate(files)}
        return cls(DenseVectors.from_float(matrix, "float32" if precision == "float32" else "int8"),
                   np.fromiter((file_row[path] for path in paths), dtype=np.int32, count=len(paths)))

    @property
    def resident_bytes(self) -> int:
        """f*d*4 (float32) or f*d (int8) for the path vectors, plus n*4 for the rows' files."""
        return int(self.vectors.resident_bytes + self.row_files.nbytes)

    def scores(self, query_vector: np.ndarray) -> np.ndarray:
        """(n,) float64: each row's cosine of its file's path with the query (int8: approximate)."""
        return self.vectors.scores(query_vector, 0)[self.row_files]


@dataclass
class LoadedIndex:
    """The rows of an index, in the order of `vectors`, with everything ranking reads of them."""

    ids: np.ndarray  # (n,) int64 piece ids, row order of `vectors`
    vectors: DenseVectors  # n unit vectors at the index's precision (float32 (n, d), int8 (n, d), bits (n, d/8))
    paths: list[str]
    lines: list[int]
    end_lines: list[int]
    titles: list[str]
    generation: int
    file_keys: dict[str, str] = field(default_factory=dict)  # path -> sha256: byte-identical files share it
    path_vectors: PathVectors | None = None  # the vector of each row's file path (None: no path term)

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def resident_bytes(self) -> int:
        """Bytes of vectors held in memory: the pieces' (DenseVectors.resident_bytes) and the paths'
        (PathVectors.resident_bytes)."""
        paths = self.path_vectors.resident_bytes if self.path_vectors is not None else 0
        return int(self.vectors.resident_bytes + paths)

    def dense_scores(self, query_vector: np.ndarray, top_k: int) -> np.ndarray:
        """(n,) float64 cosines of the query with every row (int8 and binary approximate them; binary rescores its
        best rows for `top_k` hits, codesearch.quantization), plus PATH_WEIGHT x each row's path cosine."""
        offsets = PATH_WEIGHT * self.path_vectors.scores(query_vector) if self.path_vectors is not None else None
        return self.vectors.scores(query_vector, top_k, offsets)  # binary picks its rows with the path term in
