"""`codesearch serve --mcp`: codesearch as a Model Context Protocol server on stdio, for coding agents.

    codesearch serve --mcp -p ~/project          # the agent starts this command and talks to it over stdin/stdout

Tools (official `mcp` Python SDK, `MCPServer`):
- `search(query, path=None, top_k=10, ranking="hybrid", tests="demote", non_code=..., include=None, exclude=None)`:
  the command's JSON hits; `path` defaults to the folder given with -p; include/exclude globs filter the hits.
- `index_status(path=None)`: files, pieces, index folder, model, precision and resident vector bytes, and what
  the last refresh embedded.

The model is loaded on the first call that needs it and kept; each folder's index stays open with its vectors and
BM25 retriever in memory. Every call first refreshes the folder (a stat per file), so a file edited between two
calls is re-embedded before the second one answers.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any

from codesearch.encoders import BACKENDS, BackendError, check_backend, open_embedder
from codesearch.files import DEFAULT_MAX_FILE_BYTES
from codesearch.index import IndexLocationError
from codesearch.models import ModelError, index_settings, resolve_model
from codesearch.quantization import DEFAULT_PRECISION, DEFAULT_RESCORE_MULTIPLIER, PRECISIONS
from codesearch.ranking import DEFAULT_RANKING, RANKINGS
from codesearch.searcher import (DEFAULT_MAX_SEQ_LENGTH, DEFAULT_NON_CODE, FolderSearch, IndexOptions, info,
                                  positive_int)

CHOICES = {"ranking": RANKINGS, "tests": ("demote", "keep"), "non_code": ("demote", "keep")}
INSTRUCTIONS = ("Semantic code search over a local folder: call `search` with what the code does, in plain words or "
                "code (e.g. 'retry a failed request'); each hit gives path, line-end_line, title and a snippet. "
                "`index_status` tells what is indexed.")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="codesearch serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mcp", action="store_true", required=True,
                        help="speak the Model Context Protocol on stdin/stdout (the only server protocol)")
    parser.add_argument("-p", "--path", default=".", help="folder searched when a call names none (default: .)")
    parser.add_argument("--model", default="default", help="'default' or a sentence-transformers model folder")
    parser.add_argument("--backend", choices=BACKENDS, default="auto", help="as codesearch's --backend")
    parser.add_argument("--max-seq-length", type=positive_int, default=DEFAULT_MAX_SEQ_LENGTH,
                        help=f"as codesearch's option (default: {DEFAULT_MAX_SEQ_LENGTH})")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="as codesearch's option (default: 32)")
    parser.add_argument("--max-file-bytes", type=positive_int, default=DEFAULT_MAX_FILE_BYTES,
                        help=f"as codesearch's option (default: {DEFAULT_MAX_FILE_BYTES:,})")
    parser.add_argument("--non-code", choices=CHOICES["non_code"], default=DEFAULT_NON_CODE,
                        help=f"default of the search tool's non_code (default: {DEFAULT_NON_CODE})")
    parser.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION,
                        help=f"as codesearch's option: how every open index holds its vectors (default: "
                             f"{DEFAULT_PRECISION})")
    parser.add_argument("--rescore-multiplier", type=positive_int, default=DEFAULT_RESCORE_MULTIPLIER,
                        help=f"as codesearch's option (default: {DEFAULT_RESCORE_MULTIPLIER})")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return parser


class Folders:
    """Every folder the calls asked for, each FolderSearch opened once; one model shared by all."""

    def __init__(self, default_root: Path, options: IndexOptions, embedder=None):
        self.default_root, self.options, self.embedder = default_root, options, embedder
        self.opened: dict[Path, FolderSearch] = {}

    @functools.cached_property
    def model(self):
        folder = resolve_model(self.options.model)
        fingerprint = index_settings(folder, self.options.max_seq_length)["model_fingerprint"]
        return open_embedder(folder, fingerprint, self.options.backend, self.options.max_seq_length,
                             self.options.batch_size)

    def get(self, path: str | None) -> FolderSearch:
        root = Path(path).expanduser().resolve() if path else self.default_root
        if not root.exists():
            raise ValueError(f"path {path!r}: no such file or folder; pass a folder of code, or no path for "
                             f"{self.default_root}")
        if root not in self.opened:
            self.opened[root] = FolderSearch(root, self.options, self.embedder, load_model=lambda: self.model)
        return self.opened[root]

    def close(self) -> None:
        for folder in self.opened.values():
            folder.close()


def build_server(folders: Folders, default_non_code: str):
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError  # its message reaches the client; other errors do not

    server = MCPServer("codesearch", instructions=INSTRUCTIONS)

    def opened(path: str | None) -> FolderSearch:
        try:
            return folders.get(path)
        except (ValueError, IndexLocationError) as error:  # a missing path, an unwritable cache: say the fix
            raise ToolError(str(error)) from None

    # async, so the tools run on the event loop's thread: a folder's SQLite connection belongs to one thread
    @server.tool()
    async def search(query: str, path: str | None = None, top_k: int = 10, ranking: str = DEFAULT_RANKING,
                     tests: str = "demote", non_code: str = default_non_code, include: list[str] | None = None,
                     exclude: list[str] | None = None) -> list[dict[str, Any]]:
        """Find code by what it does. query: plain words or code. path: folder to search (default: the server's).
        top_k: hits wanted (>= 1). ranking: hybrid (default), dense or bm25. tests: demote or keep test files.
        non_code: demote or keep docs, examples, generated files. include/exclude: globs on the hits' paths
        ('*.py', 'src/*'). Each hit: path, line, end_line (1-based, inclusive), score, title, snippet, also (paths
        of byte-identical files)."""
        if not query.strip():
            raise ToolError("the query is empty; pass what you are looking for, e.g. 'parse a config file'")
        if top_k < 1:
            raise ToolError(f"top_k={top_k}; pass 1 or more")
        for name, value in (("ranking", ranking), ("tests", tests), ("non_code", non_code)):
            if value not in CHOICES[name]:
                raise ToolError(f"{name}={value!r}; pass one of {', '.join(CHOICES[name])}")
        folder = opened(path)
        folder.refresh()
        return folder.search(query, top_k, ranking, tests, non_code, include, exclude)

    @server.tool()
    async def index_status(path: str | None = None) -> dict[str, Any]:
        """What is indexed under path (default: the server's folder): files, pieces, skipped files, the index
        folder, the model, the precision and bytes of vectors held in memory, and what the refresh this call made
        had to embed."""
        folder = opened(path)
        refreshed = folder.refresh()
        report = refreshed.report
        return {"path": str(folder.root), "files": len(refreshed.selection.files), "pieces": refreshed.pieces,
                "listed_by": refreshed.selection.how, "skipped": refreshed.skipped,
                "index_dir": str(folder.index_folder), "model": str(folder.model_folder),
                "model_loaded": folder.model_loaded, "refresh_seconds": round(refreshed.seconds, 3),
                "precision": folder.options.precision, "resident_vector_bytes": folder.resident_vector_bytes,
                "embedded_files": report.embedded_files, "embedded_pieces": report.embedded_pieces,
                "removed_files": report.removed_files}

    return server


def serve(argv: list[str], embedder=None) -> int:
    """Run the server until the client closes stdin. `embedder` replaces the model in tests."""
    parser = build_parser()
    args = parser.parse_args(argv)
    root = Path(args.path).expanduser().resolve()
    if not root.exists():
        parser.error(f"--path {args.path}: no such file or folder; pass the folder of code to search")
    if embedder is None:
        try:  # a bad --model or --backend fails here, before the client connects
            resolve_model(args.model)
            check_backend(args.backend)
        except (ModelError, BackendError) as error:
            parser.error(str(error))
    options = IndexOptions(args.model, args.max_seq_length, args.batch_size, args.backend, args.max_file_bytes,
                           quiet=args.quiet, precision=args.precision, rescore_multiplier=args.rescore_multiplier)
    folders = Folders(root, options, embedder)
    if not args.quiet:
        info(f"codesearch MCP server on stdio for {root}")
    try:
        build_server(folders, args.non_code).run("stdio")
    finally:
        folders.close()
    return 0
