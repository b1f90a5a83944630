"""A first answer on a folder whose index is not built yet: BM25 over every piece, the model over BM25's best.

Embedding every piece of a fresh folder is what a cold search waits for: a few dozen pieces per CPU-second, minutes
for a few hundred files. Parsing and BM25 take seconds. So `--first-answer fast` answers before the build:

1. every piece of the folder (those the index holds, and the just-parsed pieces of new or changed files) is ranked
   by BM25 with the code priors, as `--ranking bm25` ranks (codesearch.ranking.adjusted);
2. only the best `candidates` rows of that list are embedded (a vector the index already holds, or one this stage
   embedded for an earlier query, is reused by text), and the paths of their files (codesearch.loaded.PathVectors);
3. those rows, as a loaded index of their own (`view`), are ranked as the full index is (codesearch.ranking.rank,
   the same request and config), among themselves, and grouped into file hits as usual.

With `candidates` >= FUSION_DEPTH the BM25 list fused is the full index's own (its best FUSION_DEPTH rows); what
differs is the dense list, which ranks the candidates only: a piece BM25 misses cannot be found. The first answer is
therefore a bounded rescoring, never the final one: once the index is built, searches rank every piece as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from c2llm_data.tokens import code_tokens
from codesearch.chunking import CodePiece
from codesearch.index import import_bm25s
from codesearch.loaded import LoadedIndex, PathVectors
from codesearch.quantization import DenseVectors
from codesearch.ranking import DEFAULT_RANKING_CONFIG, FUSION_DEPTH, RankingConfig, adjusted, allowed_rows
from codesearch.request import SearchRequest

# BM25's best rows embedded per query: the rows hybrid fusion reads from the BM25 list (measured against 50, 200 and
# 400 in codesearch/reports/first-answer.md).
DEFAULT_CANDIDATES = FUSION_DEPTH
FIRST_ANSWER_MODES = ("wait", "fast")


class FirstStage:
    """Every piece of a folder in memory with its BM25 index; `view` embeds a query's candidates on demand.

    `known_vectors` maps a piece text to its float32 vector (those the index already holds), `known_paths` a file
    path to its path's vector; `file_keys` maps a path to its content hash, as a loaded index does (byte-identical
    files are one place)."""

    def __init__(self, pieces: Sequence[CodePiece], file_keys: dict[str, str],
                 known_vectors: dict[str, np.ndarray] | None = None,
                 known_paths: dict[str, np.ndarray] | None = None):
        bm25s = import_bm25s()

        self.pieces = list(pieces)
        self.paths = [piece.path for piece in self.pieces]
        self.titles = [piece.title for piece in self.pieces]
        self.file_keys = dict(file_keys)
        self.vectors: dict[str, np.ndarray] = dict(known_vectors or {})  # text -> (d,) float32
        self.path_vectors: dict[str, np.ndarray] = dict(known_paths or {})  # file path -> (d,) float32
        self.embedded_texts = 0  # piece texts this stage sent to the model (file paths not counted)
        self.retriever = bm25s.BM25()
        if self.pieces:
            self.retriever.index([code_tokens(piece.text) or ["<empty>"] for piece in self.pieces],
                                 show_progress=False)

    @classmethod
    def from_rows(cls, rows: Sequence[tuple], file_keys: dict[str, str], new_pieces: Sequence[CodePiece] = (),
                  path_vectors: dict[str, np.ndarray] | None = None) -> FirstStage:
        """The stage of index rows (path, line, end_line, title, text, float32 vector bytes: SearchIndex.stored_pieces)
        with their vectors, and of `new_pieces`, which have none yet; `path_vectors`: the index's
        (SearchIndex.path_vectors)."""
        return cls([*(CodePiece(*row[:5]) for row in rows), *new_pieces], file_keys,
                   {row[4]: np.frombuffer(row[5], dtype=np.float32) for row in rows}, path_vectors)

    def __len__(self) -> int:
        return len(self.pieces)

    def bm25_scores(self, query: str) -> np.ndarray:
        """(n,) BM25 scores of every piece (0: no word in common with the query)."""
        tokens = code_tokens(query)
        return self.retriever.get_scores(tokens) if tokens and self.pieces else np.zeros(len(self.pieces))

    def candidates(self, request: SearchRequest, bm25_scores: np.ndarray, candidates: int,
                   config: RankingConfig = DEFAULT_RANKING_CONFIG) -> np.ndarray:
        """Rows of the best `candidates` pieces by BM25 with the code priors (ranked as `--ranking bm25` ranks, with
        the request's demotions), best first, among those its include/exclude globs and path allow; rows no query
        word reaches are left out."""
        as_bm25 = request.model_copy(update={"ranking": "bm25"})  # BM25's list, whatever ranking answers
        scores = adjusted(bm25_scores, as_bm25, self.paths, self.titles, config)
        allowed = allowed_rows(self.paths, request)
        if allowed is not None:
            scores = np.where(allowed, scores, 0.0)
        order = np.argsort(-scores, kind="stable")[:candidates]
        return order[scores[order] > 0]

    def view(self, rows: np.ndarray, encode_document: Callable[[list[str]], np.ndarray] | None) -> LoadedIndex:
        """These rows as a loaded index of their own (row i of it is `rows[i]` here), with their vectors and their
        files' path vectors: reused where known, the others embedded now (each distinct text or path once, in one
        call) and kept for later queries. `encode_document` None: no vectors (a BM25 ranking never reads them), a
        zero per row."""
        picked = [self.pieces[row] for row in rows]
        paths = [piece.path for piece in picked]
        path_vectors = None
        if encode_document is None:
            matrix = np.zeros((len(picked), 1), dtype=np.float32)  # (n, 1)
        else:
            texts = [piece.text for piece in picked]
            new = list(dict.fromkeys(text for text in texts if text not in self.vectors))
            new_paths = [path for path in dict.fromkeys(paths) if path not in self.path_vectors]
            if new or new_paths:
                vectors = np.asarray(encode_document(new + new_paths), dtype=np.float32)  # (len(new + paths), d)
                if len(vectors) != len(new) + len(new_paths):
                    raise RuntimeError(f"the embedding function returned {len(vectors)} vectors for "
                                       f"{len(new) + len(new_paths)} texts")
                self.vectors.update(zip(new, vectors[:len(new)]))
                self.path_vectors.update(zip(new_paths, vectors[len(new):]))
                self.embedded_texts += len(new)
            width = len(next(iter(self.vectors.values()))) if self.vectors else 1
            matrix = np.stack([self.vectors[text] for text in texts]) if texts else np.zeros((0, width), np.float32)
            path_vectors = PathVectors.of_rows(paths, self.path_vectors)
        return LoadedIndex(np.asarray(rows, dtype=np.int64), DenseVectors.from_float(matrix, "float32"), paths,
                           [piece.line for piece in picked], [piece.end_line for piece in picked],
                           [piece.title for piece in picked], generation=-1, file_keys=self.file_keys,
                           path_vectors=path_vectors)

    def texts(self, rows) -> dict[int, str]:
        """Row -> text, as SearchIndex.texts gives piece id -> text (a view's ids are this stage's rows)."""
        return {int(row): self.pieces[int(row)].text for row in rows}
