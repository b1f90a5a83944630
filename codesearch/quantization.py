"""The index's vectors held at a lower precision, for less resident memory: int8 (1/4 of float32) or bits (1/32).

The float32 vectors in index.sqlite stay the source of truth: a quantized matrix is made from them (never by
re-embedding), saved in the snapshot of its precision, and made again whenever the pieces change.

- float32: the vectors as stored; score = cosine, one matmul.
- int8: sentence-transformers' int8 buckets calibrated on the indexed corpus: `ranges` holds each dimension's
  min and max over the corpus's float vectors (what `quantize_embeddings(..., "int8", calibration_embeddings=
  corpus)` computes) and is saved with the codes, so every query meets the buckets its documents were cut with.
  The query itself stays float32 and is scored against the bucket centres (asymmetric): the cosine up to half a
  bucket per dimension. Quantizing the query too (int8 x int8 codes, as an int8 vector index scores) ranked worse
  on the quality set (dense MRR@10 0.718 against 0.725) and would buy nothing here: numpy has no int8 matmul.
- binary: one bit per dimension (x > 0) packed 8 to a byte, sentence-transformers' "ubinary". A query ranks every
  row by the Hamming distance between its bits and theirs, then the best `rescore_multiplier * top_k` rows are
  rescored exactly: the float32 query against their float32 vectors, read from index.sqlite for those rows only,
  so only the bits stay in memory. The other rows keep their Hamming order below the rescored ones. Hamming is
  numpy (xor + popcount) rather than faiss's binary index: faiss is not a dependency, and an exact scan of n*d/8
  bytes is a few milliseconds at the sizes codesearch indexes (benchmarks/codesearch_precision.py).

The codes are those of sentence-transformers' `quantize_embeddings` (tests/test_codesearch_quantization.py compares
them with the installed version's), computed here with numpy because importing it imports sentence-transformers
and torch: 6 s and 464 MiB more peak RSS in a query process that otherwise never loads torch (the ONNX backend),
five times the float32 vectors of a 61,538-piece index (codesearch/reports/vectors.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

PRECISIONS = ("float32", "int8", "binary")
DEFAULT_PRECISION = "float32"
# Binary rescoring depth: 10 x top_k rows, so 100 for the default 10 hits: the whole dense list hybrid fusion reads
# (ranking.FUSION_DEPTH). On the quality set 4 x did as well and 2 x lost 0.005 dense MRR@10; 100 rows read back
# cost well under a millisecond (codesearch/reports/vectors.md).
DEFAULT_RESCORE_MULTIPLIER = 10
INT8_LEVELS = 255  # buckets per dimension, as sentence-transformers cuts them: codes -128..127
SCORE_CHUNK_ROWS = 8192  # int8 rows upcast per matmul: a query never holds a float32 copy of the whole matrix
# set bits of every byte value, for numpy < 2 (no np.bitwise_count)
POPCOUNT = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1).astype(np.uint8)


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}; pass one of {', '.join(PRECISIONS)}")
    return precision


def int8_ranges(vectors: np.ndarray) -> np.ndarray:
    """(2, d) float32: each dimension's min and max over `vectors` (n, d), the corpus the buckets are cut for."""
    return np.vstack((vectors.min(axis=0), vectors.max(axis=0))).astype(np.float32)


def quantize_int8(vectors: np.ndarray, ranges: np.ndarray) -> np.ndarray:
    """(n, d) float -> (n, d) int8 codes, sentence-transformers' `quantize_embeddings(vectors, "int8", ranges)`
    (6.x: values outside the ranges are clipped to the first or last bucket)."""
    starts = ranges[0]
    steps = (ranges[1] - starts) / INT8_LEVELS
    steps = np.where(steps == 0, 1, steps)  # a dimension constant over the corpus: every value in bucket 0
    return (np.clip(np.floor((vectors - starts) / steps), 0, INT8_LEVELS) - 128).astype(np.int8)


def quantize_binary(vectors: np.ndarray) -> np.ndarray:
    """(n, d) float -> (n, ceil(d / 8)) uint8, the signs packed 8 to a byte (`quantize_embeddings(..., "ubinary")`)."""
    return np.packbits(np.asarray(vectors) > 0, axis=-1)


def hamming_distances(bits: np.ndarray, query_bits: np.ndarray) -> np.ndarray:
    """(n, b) uint8 packed rows, (b,) packed query -> (n,) int64 differing bits."""
    if not hasattr(np, "bitwise_count"):  # numpy < 2
        return POPCOUNT[np.bitwise_xor(bits, query_bits)].sum(axis=1, dtype=np.int64)
    if bits.shape[1] % 8 == 0 and bits.flags.c_contiguous:  # 8 bytes per word: a third faster than byte by byte
        bits, query_bits = bits.view(np.uint64), np.ascontiguousarray(query_bits).view(np.uint64)  # (n, b / 8)
    return np.bitwise_count(np.bitwise_xor(bits, query_bits)).sum(axis=1, dtype=np.int64)


@dataclass
class DenseVectors:
    """A loaded index's vectors at one precision, and how a query vector scores them.

    `matrix`: float32 (n, d) unit vectors, int8 (n, d) codes, or uint8 (n, ceil(d / 8)) packed bits; it is all
    that stays in memory (`resident_bytes`). `ranges`: int8 only, (2, d) float32 calibration ranges.
    `read_float`: binary only, rows -> (len(rows), d) float32 vectors from the database (NaN rows: gone since)."""

    precision: str
    matrix: np.ndarray
    dimension: int
    ranges: np.ndarray | None = None
    read_float: Callable[[np.ndarray], np.ndarray] | None = None
    rescore_multiplier: int = DEFAULT_RESCORE_MULTIPLIER

    @classmethod
    def from_float(cls, vectors: np.ndarray, precision: str, read_float=None,
                   rescore_multiplier: int = DEFAULT_RESCORE_MULTIPLIER) -> DenseVectors:
        """`vectors` (n, d) float32 at `precision` (int8: calibrated on these vectors)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        dimension = vectors.shape[1]
        if check_precision(precision) == "float32":
            return cls(precision, vectors, dimension)
        if precision == "int8":
            ranges = int8_ranges(vectors) if len(vectors) else np.zeros((2, dimension), np.float32)
            return cls(precision, quantize_int8(vectors, ranges), dimension, ranges=ranges)
        return cls(precision, quantize_binary(vectors), dimension, read_float=read_float,
                   rescore_multiplier=rescore_multiplier)

    def __len__(self) -> int:
        return len(self.matrix)

    @property
    def resident_bytes(self) -> int:
        """Bytes of vectors a loaded index keeps in memory: n*d*4 (float32), n*d (int8), n*d/8 (binary)."""
        return int(self.matrix.nbytes)

    def scores(self, query: np.ndarray, top_k: int, offsets: np.ndarray | None = None) -> np.ndarray:
        """(n,) float64, higher is better: cosines (int8: approximate; binary: exact for the rescored rows), plus
        `offsets` (n,) where given (a term the ranking adds to every row, codesearch.loaded.PathVectors): binary
        picks the rows it rescores by Hamming cosine plus offset, so a row it does not rescore stays below them."""
        query = np.asarray(query, dtype=np.float32)
        if self.precision == "binary":
            return self._binary_scores(query, top_k, offsets)
        scores = (self.matrix @ query).astype(np.float64) if self.precision == "float32" else self._int8_scores(query)
        return scores if offsets is None else scores + offsets

    def _int8_scores(self, query: np.ndarray) -> np.ndarray:
        # a code c stands for the centre of its bucket: start + (c + 128 + 0.5) * width / 255 (width 0: start)
        steps = (self.ranges[1] - self.ranges[0]) / INT8_LEVELS
        weights = query * steps  # (d,)
        offset = float(query @ (self.ranges[0] + 128.5 * steps))
        scores = np.empty(len(self.matrix))
        for start in range(0, len(self.matrix), SCORE_CHUNK_ROWS):
            block = self.matrix[start:start + SCORE_CHUNK_ROWS].astype(np.float32)  # (rows, d)
            scores[start:start + SCORE_CHUNK_ROWS] = block @ weights
        return scores + offset

    def _binary_scores(self, query: np.ndarray, top_k: int, offsets: np.ndarray | None = None) -> np.ndarray:
        distances = hamming_distances(self.matrix, quantize_binary(query[None])[0])  # (n,)
        if not len(distances):
            return np.zeros(0)
        # Hamming as a cosine-like score (1 at 0 bits, -1 at all bits; a bit costs 2/d), plus the offsets; replaced
        # by the exact cosine plus offset where rescored
        scores = 1.0 - 2.0 * distances / self.dimension
        if offsets is not None:
            scores = scores + offsets
        count = min(len(distances), max(1, self.rescore_multiplier * top_k))
        candidates = np.argpartition(-scores, count - 1)[:count] if count < len(distances) else \
            np.arange(len(distances))
        exact = self.read_float(candidates) @ query if self.read_float else np.full(count, np.nan)  # (count,)
        found = ~np.isnan(exact)
        if found.any():
            rescored = candidates[found]
            exact = exact[found] + (offsets[rescored] if offsets is not None else 0.0)
            others = np.ones(len(scores), dtype=bool)
            others[rescored] = False
            # the rows not rescored rank below every rescored row, in their approximate order
            floor = exact.min() - 2.0 / self.dimension
            best_other = scores[others].max() if others.any() else 0.0
            scores[others] = floor - (best_other - scores[others])
            scores[rescored] = exact
        return scores
