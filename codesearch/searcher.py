"""One searched folder, kept open: the command line runs one query through it, the MCP server many.

`FolderSearch(root, options)` holds the folder's index open; `refresh()` brings the index in line with the files
(re-embedding only changed files, see codesearch.index) and `search(request)` ranks places (codesearch.ranking) for
one codesearch.request.SearchRequest, the command's and the MCP tool's alike. What a
long-lived caller saves between queries: the model (loaded on first need and kept), the SQLite connection, and the
loaded vectors and BM25 retriever, reused while the index's generation number is unchanged.

Threads: a server runs each call on a worker thread. `lock` serialises everything that touches the index (refresh,
the ranking, the SQLite connection); embedding a query (`query_vector`) holds it only to read and write the query
cache, so a slow model call never holds up another call's ranking. A server's refreshes run on a build thread of
their own (`refresh_in_background`, `first_stage`), and every wait of a call for the index (that thread, `lock`)
takes a `deadline`: past it the call gets `IndexBusy` while the build goes on, so no call waits longer than its
server allows however long a build takes.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from c2llm_data.tokens import code_tokens
from c2llm_plumbing.models import load_model as load_sentence_model, resolve_model
from codesearch.encoders import BackendError, TorchEmbedder, document_device, open_embedder
from codesearch.chunking import CodePiece
from codesearch.first_stage import DEFAULT_CANDIDATES, FirstStage
from codesearch.files import DEFAULT_MAX_FILE_BYTES, Selection, select_files
from codesearch.index import KnownVectors, ParsedFile, SearchIndex, UpdateReport, default_index_dir
from codesearch.loaded import LoadedIndex
from codesearch.models import index_settings
from codesearch.quantization import DEFAULT_PRECISION, DEFAULT_RESCORE_MULTIPLIER
from codesearch.ranking import DEFAULT_RANKING_CONFIG, QuerySignals, RankingConfig, rank
from codesearch.request import SearchRequest

SNIPPET_LINES = 3
# Tokens per piece: 128 ranks as well as 256 on the quality benchmark (codesearch/reports/ranking.md, Tokens per
# piece) and embeds twice as fast, the difference between indexing a 60,000-piece package in 14 or 27 minutes.
DEFAULT_MAX_SEQ_LENGTH = 128


@dataclass
class IndexOptions:
    """What decides the index of a folder and how the model runs (the command's options of the same names)."""

    model: str = "default"
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH
    batch_size: int = 32
    backend: str = "auto"  # how the model runs on the CPU (queries; the index's pieces unless `device` says cuda)
    device: str = "auto"  # where a build embeds the index's pieces: auto, cpu or cuda (encoders.document_device)
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    index_dir: Path | None = None
    quiet: bool = False
    precision: str = DEFAULT_PRECISION  # float32, int8 or binary: how the loaded vectors are held
    rescore_multiplier: int = DEFAULT_RESCORE_MULTIPLIER  # binary: rows rescored with float32 vectors per hit


def info(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Refresh:
    """What one refresh found: the files selected, the update's report, and the pieces now searchable."""

    selection: Selection
    report: UpdateReport
    pieces: int
    seconds: float
    skipped: dict = field(default_factory=dict)


class IndexBusy(Exception):  # not TimeoutError, an OSError that handlers of file errors would take for theirs
    """A call's deadline passed while the index was being built or refreshed (the build goes on without it)."""


def time_left(deadline: float | None) -> float | None:
    """Seconds until `deadline` (a time.monotonic() value), never below 0; None (no deadline) stays None."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


@dataclass
class BackgroundBuild:
    """A refresh running on a thread of its own; `ready` is set once its first stage exists or it ended, `done` once
    it ended (with `refresh` or `error`)."""

    answers_first: bool  # whether it hands out a first stage (`--first-answer fast`) before embedding
    thread: threading.Thread | None = None
    started: float = field(default_factory=time.monotonic)
    ready: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    stage: FirstStage | None = None  # while the build embeds: the first stage answering in its place
    refresh: Refresh | None = None
    error: BaseException | None = None


class FolderSearch:
    """The index of `root` (a folder or one code file) and the model that embeds it.

    `embedder` replaces the model in tests (encode_document/encode_query returning unit-length float32 rows);
    `load_model` lets several folders share one loaded model (called once, on first need)."""

    def __init__(self, root: Path, options: IndexOptions, embedder=None,
                 load_model: Callable[[], object] | None = None, log: Callable[[str], None] = info):
        self.root = Path(root).expanduser().resolve()
        self.options = options
        self.log = log
        if embedder is None:
            self.model_folder = resolve_model(options.model)
            self.settings = index_settings(self.model_folder, options.max_seq_length)
        else:
            self.model_folder = Path("<injected>")
            self.settings = index_settings(self.model_folder, options.max_seq_length,
                                           getattr(embedder, "fingerprint", ""), "")
        self.settings["precision"] = options.precision  # changing it re-quantizes, never re-embeds (index.py)
        self._model = embedder
        self._load_model = load_model
        self._injected = embedder is not None or load_model is not None  # tests, benchmarks: it embeds everything
        self._gpu_model = None  # the model on the GPU, loaded when a build first embeds there
        self.index_folder = options.index_dir or default_index_dir(self.root)
        self.index = SearchIndex(self.index_folder, self.settings, log=log)
        self._loaded: LoadedIndex | None = None
        self._retriever = None  # bm25s retriever of self._loaded's generation
        self._tokens: dict[str, list[str]] = {}  # piece text -> BM25 tokens, kept while the text is indexed
        self.last_refresh: Refresh | None = None
        self.lock = threading.RLock()  # the index, its SQLite connection and what is loaded from it
        self._model_lock = threading.Lock()  # one model load, whichever call needs it first
        self._gpu_model_lock = threading.Lock()  # its own: loading the GPU's (~14 s) never holds up a query
        self._build_lock = threading.Lock()  # one background build at a time (first_stage)
        self._build: BackgroundBuild | None = None

    @property
    def resident_vector_bytes(self) -> int:
        """Bytes of vectors the loaded index holds in memory: n*d*4 (float32), n*d (int8), n*d/8 (binary) for its n
        pieces, plus f*d*4 (float32) or f*d (int8, binary) + n*4 for its f files' path vectors
        (codesearch.loaded.LoadedIndex.resident_bytes)."""
        return self._loaded.resident_bytes if self._loaded is not None else 0

    @property
    def loaded_paths(self) -> list[str]:
        """The path of every piece the loaded index holds."""
        return self._loaded.paths if self._loaded is not None else []

    @property
    def model_loaded(self) -> bool:
        return self._model is not None

    def model(self):
        with self._model_lock:
            if self._model is None:
                started = time.monotonic()
                if self._load_model is not None:
                    self._model = self._load_model()
                else:
                    self._model = open_embedder(self.model_folder, self.settings["model_fingerprint"],
                                                self.options.backend, self.options.max_seq_length,
                                                self.options.batch_size)
                if not self.options.quiet:
                    self.log(f"loaded model {self.model_folder} ({self._model.backend}) in "
                             f"{time.monotonic() - started:.1f} s")
            return self._model

    def gpu_model(self) -> TorchEmbedder:
        """The model with torch on the CUDA GPU, for builds (loaded on first need and kept)."""
        with self._gpu_model_lock:
            if self._gpu_model is None:
                started = time.monotonic()
                model = load_sentence_model(self.model_folder, self.options.max_seq_length, "cuda")
                self._gpu_model = TorchEmbedder(model, self.options.batch_size)
                if not self.options.quiet:
                    self.log(f"loaded model {self.model_folder} (torch, cuda) in {time.monotonic() - started:.1f} s")
            return self._gpu_model

    def document_encoder(self, pieces: int) -> Callable[[list[str]], np.ndarray]:
        """encode_document of the model that embeds a build of `pieces` pieces: the GPU's where `--device` picks
        cuda (codesearch.encoders.document_device), else `model()`'s. An injected model always embeds. Under
        `auto`, a GPU that fails (out of memory, a driver that does not match torch) leaves the build to the CPU;
        under `cuda` it is an error naming the fix."""
        if self._injected or document_device(self.options.device, pieces) == "cpu":
            return lambda texts: self.model().encode_document(texts)
        on_gpu = True  # this build's: after a failure the rest of it stays on the CPU

        def encode(texts: list[str]) -> np.ndarray:
            nonlocal on_gpu
            if on_gpu:
                try:
                    return self.gpu_model().encode_document(texts)  # loaded only if something is embedded
                except (RuntimeError, OSError) as error:  # torch.cuda.OutOfMemoryError is a RuntimeError
                    if self.options.device == "cuda":
                        raise BackendError(f"--device cuda: the model could not embed on the GPU ({error}); pass "
                                           "--device cpu (the pieces embedded so far are kept)") from error
                    self.log(f"embedding on the CPU: the GPU failed ({error})")
                    on_gpu = False
            return self.model().encode_document(texts)

        return encode

    def refresh(self, first_answer: Callable[[FirstStage], None] | None = None,
                candidates: int = DEFAULT_CANDIDATES) -> Refresh:
        """Re-read the folder: embed new and changed files, drop deleted ones; reload only when something changed.
        `first_answer(stage)`: called before embedding when more than `candidates` pieces wait for the model, with a
        first stage over every piece (codesearch.first_stage), so the caller can answer before the build ends; the
        build reuses the vectors that answer embedded."""
        with self.lock:
            started = time.monotonic()
            options = self.options
            selection = select_files(self.root, options.max_file_bytes)
            base = self.root if self.root.is_dir() else self.root.parent

            encode = self.document_encoder(0)  # replaced below once the parsed pieces are counted

            def before_embedding(parsed: list[ParsedFile]) -> KnownVectors | None:
                nonlocal encode
                pieces = sum(len(file_pieces) for _, file_pieces, _ in parsed)  # at most this many get embedded
                known = None
                if first_answer is not None and pieces > candidates:
                    stage = self._first_stage(parsed)
                    first_answer(stage)
                    # what the answer embedded is not embedded again; a copy, as a server's stage goes on embedding
                    # for queries on other threads while the build runs
                    known = KnownVectors(dict(stage.vectors), dict(stage.path_vectors))
                encode = self.document_encoder(pieces)  # after the first answer: looking for a GPU may import torch
                return known

            report = self.index.update(base, selection.files, lambda texts: encode(texts),
                                       progress=not options.quiet, before_embedding=before_embedding)
            if self._loaded is None or self._loaded.generation != self.index.generation:
                self._loaded, self._retriever = self.index.load(options.rescore_multiplier), None
            self.last_refresh = Refresh(selection, report, len(self._loaded.ids), time.monotonic() - started,
                                        dict(selection.skipped + report.skipped))
            return self.last_refresh

    def first_stage(self, candidates: int = DEFAULT_CANDIDATES, deadline: float | None = None) -> FirstStage | None:
        """Refresh the index on a thread of its own and return its first stage as soon as it exists, while the
        build embeds behind it; None once the index is up to date (the refresh had `candidates` pieces or fewer to
        embed, and is done). A call while a build runs gets that build's first stage at once. For a server: no
        call waits for a build (`lock` is the build's until it ends). A refresh's error is raised here; IndexBusy
        if `deadline` (time.monotonic()) passes before the stage exists (reading a large folder)."""
        build = self._current_build(answers_first=True, candidates=candidates)
        if not build.ready.wait(time_left(deadline)):
            raise IndexBusy(self._busy(build))
        if build.error is not None:
            raise build.error
        return build.stage

    def refresh_in_background(self, deadline: float | None = None) -> Refresh:
        """`refresh()` on the build thread, waiting for it until `deadline` (time.monotonic(); None: as long as it
        takes), then IndexBusy while the build goes on. The refresh returned began after this call did, so it has
        seen every edit made before the call; a build already running is waited for, then followed by one."""
        arrived = time.monotonic()
        while True:
            build = self._current_build(answers_first=False)
            if not build.done.wait(time_left(deadline)):
                raise IndexBusy(self._busy(build))
            if build.started >= arrived:
                if build.error is not None:
                    raise build.error
                return build.refresh

    def _current_build(self, answers_first: bool, candidates: int = DEFAULT_CANDIDATES) -> BackgroundBuild:
        """The build running now, else a new one started (one at a time: it holds `lock` while it runs)."""
        with self._build_lock:
            build = self._build
            if build is None or build.done.is_set():
                build = self._build = BackgroundBuild(answers_first)
                build.thread = threading.Thread(target=self._run_build, args=(build, candidates), daemon=True,
                                                name=f"codesearch build {self.root}")
                build.thread.start()
            return build

    def _busy(self, build: BackgroundBuild) -> str:
        return (f"the index of {self.root} is still being built or refreshed (for "
                f"{time.monotonic() - build.started:.0f} s so far)")

    def _run_build(self, build: BackgroundBuild, candidates: int) -> None:
        def keep(stage: FirstStage) -> None:
            build.stage = stage
            build.ready.set()

        try:
            build.refresh = self.refresh(keep if build.answers_first else None, candidates)
        except Exception as error:  # raised in the callers that wait (first_stage, refresh_in_background)
            build.error = error
        finally:
            build.stage = None  # built: searches rank the whole index
            build.ready.set()
            build.done.set()

    @contextmanager
    def held(self, deadline: float | None = None) -> Iterator[None]:
        """`lock`, waited for until `deadline` (time.monotonic(); None: as long as it takes), then IndexBusy."""
        left = time_left(deadline)
        if not self.lock.acquire(timeout=-1 if left is None else left):
            raise IndexBusy(f"the index of {self.root} is being refreshed for another call")
        try:
            yield
        finally:
            self.lock.release()

    def _first_stage(self, parsed: list[ParsedFile]) -> FirstStage:
        """Every piece the folder has now: the index's (with their vectors) for files that did not change, and the
        parsed pieces of new or changed files (no vectors yet)."""
        changed = {info[0]: info[1] for info, _, _ in parsed}  # path -> sha256
        return FirstStage.from_rows([row for row in self.index.stored_pieces() if row[0] not in changed],
                                    {**self.index.file_keys(), **changed},
                                    [CodePiece(info[0], piece.line, piece.end_line, piece.title, piece.text)
                                     for info, file_pieces, _ in parsed for piece in file_pieces],
                                    self.index.path_vectors())

    def query_vector(self, query: str, deadline: float | None = None) -> np.ndarray:
        """The query's embedding: from the index's query cache, else from the model (outside `lock`). `deadline`:
        as `held`'s, for reading the cache (storing in it is skipped when the index is busy); the model call itself
        is not bounded."""
        with self.held(deadline):
            vector = self.index.cached_query(query)
        if vector is None:
            vector = self.model().encode_query([query])[0]
            try:
                with self.held(deadline):
                    self.index.store_query(query, vector)
            except IndexBusy:  # the vector is good: only the cache goes without it
                pass
        return vector

    def search(self, request: SearchRequest, query_vector: np.ndarray | None = None,
               config: RankingConfig = DEFAULT_RANKING_CONFIG) -> list[dict]:
        """The hits of `request` over the index as of the last refresh, as dicts (the JSON output's fields). Its
        include/exclude globs and `path` (a file or folder relative to the root, already confined by the caller:
        codesearch.mcp_server.ServedFolder.relative) select hits, never what is indexed; `query_vector`: the query's
        embedding when the caller already has it (see `query_vector`); `config`: the ranking's values (benchmarks
        sweep them)."""
        if query_vector is None and request.ranking != "bm25":
            query_vector = self.query_vector(request.query)
        with self.lock:
            return self._search(request, query_vector, config)

    def _search(self, request: SearchRequest, query_vector: np.ndarray | None, config: RankingConfig) -> list[dict]:
        if self._loaded is None:
            self.refresh()
        loaded = self._loaded
        if not loaded.ids.size:
            return []
        bm25_scores = None
        if request.ranking != "dense":
            if self._retriever is None:
                self._retriever = self.index.bm25(loaded.generation, self._tokenizer())
            tokens = code_tokens(request.query)
            bm25_scores = self._retriever.get_scores(tokens) if tokens else np.zeros(len(loaded.ids))
        signals = QuerySignals(None if request.ranking == "bm25" else query_vector, bm25_scores)
        return self._hits(request, loaded, signals, config, self.index.texts)

    def first_search(self, stage: FirstStage, request: SearchRequest, candidates: int = DEFAULT_CANDIDATES,
                     config: RankingConfig = DEFAULT_RANKING_CONFIG) -> list[dict]:
        """The hits of `request` from a first stage (codesearch.first_stage): BM25 over every piece, the model over
        the best `candidates` of it, ranked as `search` ranks. BM25 ranks every piece without the model, as the
        full index does. Each hit says `"stage": "first"` (the full index's hits have no such field)."""
        bm25_scores = stage.bm25_scores(request.query)
        if request.ranking == "bm25":  # every piece: ranking applies the request's filters, as for the full index
            rows = np.arange(len(stage))
            view, query_vector = stage.view(rows, None), None
        else:
            rows = stage.candidates(request, bm25_scores, candidates, config)
            view = stage.view(rows, self.model().encode_document)
            query_vector = self.model().encode_query([request.query])[0]  # no cache: the index may be busy building
        if not rows.size:
            return []
        hits = self._hits(request, view, QuerySignals(query_vector, bm25_scores[rows]), config, stage.texts)
        return [dict(hit, stage="first") for hit in hits]

    def _hits(self, request: SearchRequest, loaded: LoadedIndex, signals: QuerySignals, config: RankingConfig,
              text_of: Callable[[object], dict[int, str]]) -> list[dict]:
        """The ranked file hits of `loaded` as the JSON output's dicts; `text_of` maps loaded ids to piece texts."""
        files = rank(request, loaded, signals, config)
        texts = text_of(loaded.ids[group[0].row] for group in files)
        hits = []
        for best, *others in files:
            text = texts[int(loaded.ids[best.row])]
            snippet = [line for line in text.splitlines()[1:] if line.strip()][:SNIPPET_LINES]
            hits.append({"path": best.path if self.root.is_dir() else self.root.name, "line": best.line,
                         "end_line": best.end_line, "score": round(best.score, 4),
                         "title": loaded.titles[best.row], "snippet": "\n".join(snippet), "also": best.also,
                         "more": [{"line": place.line, "end_line": place.end_line, "score": round(place.score, 4),
                                   "title": loaded.titles[place.row]} for place in others]})
        return hits

    def _tokenizer(self) -> Callable[[str], list[str]]:
        """code_tokens for one BM25 rebuild, reusing the tokens of texts the previous build saw (after an edit,
        only the new pieces are tokenized); keeps only the texts of this build."""
        previous, self._tokens = self._tokens, {}

        def tokenize(text: str) -> list[str]:
            tokens = previous.get(text)
            self._tokens[text] = tokens = code_tokens(text) if tokens is None else tokens
            return tokens

        return tokenize

    def close(self) -> None:
        self.index.close()
