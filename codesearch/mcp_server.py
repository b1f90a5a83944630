"""`codesearch serve --mcp`: codesearch as a Model Context Protocol server on stdio, for coding agents.

    codesearch serve --mcp -p ~/project          # the agent starts this command and talks to it over stdin/stdout

Tools (official `mcp` Python SDK, `MCPServer`), their arguments typed by codesearch.request:
- `search(query, path=None, top_k=10, ranking="hybrid", tests="demote", non_code=..., include=None, exclude=None)`:
  the command's JSON hits; `path` (a file or folder inside the served folder, relative to it) and the
  include/exclude globs select hits.
- `index_status(path=None)`: files, pieces, index folder, model, precision and resident vector bytes, and what
  the last refresh embedded.

What a client can reach: the folder given with -p and nothing else. A `path` is resolved against it, links
followed; one that ends outside it (`..`, an absolute path elsewhere, `~`, a link) is refused with a tool error
naming the folder. Links inside the folder that lead outside are skipped (codesearch.files). There is one index,
the folder's: a `path` selects hits from it, so no call makes the server index or open anything else.

Each call runs on one of the server's own worker threads (CALL_THREADS), off the event loop, so a slow call (a slow
model, a call waiting for a build) never stops another message from being read and answered: `ping`, `tools/list`
and the replies go through anyio's default threads (the SDK's stdio transport reads and writes with them), which no
call takes, however many wait; calls beyond CALL_THREADS wait for a thread on the event loop, holding nothing.
Every call first refreshes the folder (a stat per file) on a build thread of its own, so a file edited between two
calls is re-embedded before the second one answers; calls that need the index take turns on its lock
(codesearch.searcher). No call waits longer than `--wait-seconds` (default 30) for a build, the index's lock or a
thread: past it, it gets a tool error saying the index is still being built and to call again, while the build
goes on for the calls after it. The model is loaded on the first call that needs it and kept; the index stays open
with its vectors and BM25 retriever in memory. With `--first-answer fast`, while the refresh embeds more than a few
pieces (a fresh folder), calls answer from its first stage (codesearch.first_stage; hits marked `"stage": "first"`,
index_status `"building": true`) instead of waiting for it.

Malformed JSON-RPC gets the protocol's error, id null: a line that is not JSON (or holds a lone surrogate escape)
a parse error (-32700), JSON that is no JSON-RPC message (`[]`, `{}`) an invalid request (-32600). The SDK's
stdio transport hands such lines to the server as exceptions, which its dispatcher logs and drops; the server
answers them before they reach it (`answer_malformed`). A request whose id is no string or integer (null, 1.5,
true, an object) gets an invalid request too: the SDK reads it as a notification, the id dropped, so the server
answers every "notification" whose method is not a notification's (`notifications/...`, as every MCP notification
is named). The same reply goes to a request sent with no id at all, which the SDK's parsing makes look alike.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from pydantic import Field, create_model

from c2llm_plumbing.arguments import positive_int
from c2llm_plumbing.compat_mcp import run_on_streams, typed_tool
from c2llm_plumbing.models import ModelError, resolve_model
from codesearch.encoders import BACKENDS, DEVICES, BackendError, check_backend, check_device
from codesearch.files import DEFAULT_MAX_FILE_BYTES, is_under, real_path
from codesearch.first_stage import FIRST_ANSWER_MODES
from codesearch.index import IndexLocationError
from codesearch.quantization import DEFAULT_PRECISION, DEFAULT_RESCORE_MULTIPLIER, PRECISIONS
from codesearch.request import DEFAULT_NON_CODE, SearchRequest, StatusRequest, choices
from codesearch.searcher import DEFAULT_MAX_SEQ_LENGTH, FolderSearch, IndexBusy, IndexOptions, info

MAX_DETAIL_CHARS = 200  # of the parser's message quoted in a JSON-RPC error: enough to say what is wrong
# How long a call waits for a build (or the index's lock, or a thread) before it answers that the index is still
# being built: half the 60 s many MCP clients wait for a reply (the TypeScript SDK's default request timeout), so
# the answer reaches the client before it gives up, with room left for the search itself.
DEFAULT_WAIT_SECONDS = 30
# Calls run at once on the server's own threads; more wait on the event loop. Not anyio's default limiter: the
# SDK's stdio transport reads and writes every message on it, and calls waiting for a build took all of its 40
# threads, so nothing, not even a ping, was answered until the build ended. 8: the work is CPU-bound (ONNX Runtime
# spreads one model call over every core), so more threads would not answer sooner; a slow call leaves 7.
CALL_THREADS = 8
NOTIFICATION_PREFIX = "notifications/"  # every MCP notification's method; requests have none of it
INSTRUCTIONS = ("Semantic code search over a local folder: call `search` with what the code does, in plain words or "
                "code (e.g. 'retry a failed request'); each hit gives path, line-end_line, title and a snippet. "
                "`index_status` tells what is indexed.")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="codesearch serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mcp", action="store_true", required=True,
                        help="speak the Model Context Protocol on stdin/stdout (the only server protocol)")
    parser.add_argument("-p", "--path", default=".",
                        help="the folder served: calls can search it and its subfolders, nothing else (default: .)")
    parser.add_argument("--model", default="default", help="'default' or a sentence-transformers model folder")
    parser.add_argument("--backend", choices=BACKENDS, default="auto", help="as codesearch's --backend")
    parser.add_argument("--device", choices=DEVICES, default="auto", help="as codesearch's --device (default: auto)")
    parser.add_argument("--max-seq-length", type=positive_int, default=DEFAULT_MAX_SEQ_LENGTH,
                        help=f"as codesearch's option (default: {DEFAULT_MAX_SEQ_LENGTH})")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="as codesearch's option (default: 32)")
    parser.add_argument("--max-file-bytes", type=positive_int, default=DEFAULT_MAX_FILE_BYTES,
                        help=f"as codesearch's option (default: {DEFAULT_MAX_FILE_BYTES:,})")
    parser.add_argument("--non-code", choices=choices("non_code"), default=DEFAULT_NON_CODE,
                        help=f"default of the search tool's non_code (default: {DEFAULT_NON_CODE})")
    parser.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION,
                        help=f"as codesearch's option: how every open index holds its vectors (default: "
                             f"{DEFAULT_PRECISION})")
    parser.add_argument("--rescore-multiplier", type=positive_int, default=DEFAULT_RESCORE_MULTIPLIER,
                        help=f"as codesearch's option (default: {DEFAULT_RESCORE_MULTIPLIER})")
    parser.add_argument("--first-answer", choices=FIRST_ANSWER_MODES, default="wait",
                        help="as codesearch's option; fast: while the index builds (on a thread of its own), "
                             "searches answer from the first stage, each hit marked \"stage\": \"first\", and "
                             "index_status says \"building\": true (default: wait)")
    parser.add_argument("--wait-seconds", type=positive_int, default=DEFAULT_WAIT_SECONDS,
                        help="how long a call waits for the index's build before it answers that the index is "
                             f"still being built (the build goes on) (default: {DEFAULT_WAIT_SECONDS})")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return parser


def exists(path: Path) -> bool:
    """Path.exists, False also where the name is too long or a folder on the way cannot be read."""
    try:
        return path.exists()
    except OSError:
        return False


class ServedFolder:
    """The one folder a server answers for: its FolderSearch, and the check that confines every client path."""

    def __init__(self, root: Path, options: IndexOptions, embedder=None):
        self.root = Path(root).resolve()
        self.folder = FolderSearch(self.root, options, embedder)

    def relative(self, path: str | None) -> str:
        """`path` ("" for the whole folder) as a "/"-path relative to the root, after following every link in it;
        a ValueError naming the root when it leads outside it or does not exist."""
        if not path:
            return ""
        if "\0" in path:  # no file name holds one: the OS refuses the name before any link is followed
            raise ValueError(f"path {path!r} holds a NUL character (\\0), which no file or folder name can; pass "
                             "the name without it")
        # an absolute path replaces the root; `..` and links are followed; `~` is a name like any other
        try:
            target = real_path(Path(self.root, path))
        except OSError as error:  # a link on the path was removed while it was followed
            raise ValueError(f"path {path!r} changed while it was read ({error.strerror}); pass it again") from None
        if not target.is_relative_to(self.root):
            raise ValueError(f"path {path!r} leads outside {self.root}, the only folder this server reads; pass a "
                             "file or folder inside it, relative to it (e.g. 'src'), or no path for all of it")
        if not exists(target):
            raise ValueError(f"path {path!r}: no such file or folder in {self.root}; pass one inside it, relative "
                             "to it, or no path for all of it")
        return target.relative_to(self.root).as_posix() if target != self.root else ""


async def answer_malformed(incoming, to_server, outgoing) -> None:
    """Pass the transport's messages on to the server; answer each line the transport could not read as a JSON-RPC
    message (an exception in the stream), and each request without a usable id, with the protocol's error, id null,
    as no request id can be known."""
    import mcp_types
    from mcp.shared.message import SessionMessage
    from pydantic import ValidationError

    async with to_server:
        async for item in incoming:
            if isinstance(item, Exception):
                problems = item.errors() if isinstance(item, ValidationError) else []
                detail = problems[0]["msg"] if problems else f"{type(item).__name__}: {item}"
                if any(problem["type"] == "json_invalid" for problem in problems):
                    code, what = mcp_types.PARSE_ERROR, "Parse error: the line is not JSON"
                else:
                    code, what = mcp_types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message"
                message = f"{what} ({detail[:MAX_DETAIL_CHARS]})"
            elif (isinstance(item.message, mcp_types.JSONRPCNotification)
                  and not item.message.method.startswith(NOTIFICATION_PREFIX)):
                # The SDK reads a request whose id is no string or integer (null, 1.5, true, an object) as a
                # notification, the id dropped; a method outside notifications/ says it was meant as a request.
                code = mcp_types.INVALID_REQUEST
                message = (f"Invalid Request: {item.message.method[:MAX_DETAIL_CHARS]!r} is a request, which needs "
                           "an id that is a string or an integer (not null, a fraction, true/false or an object)")
            else:
                await to_server.send(item)
                continue
            error = mcp_types.ErrorData(code=code, message=message)
            await outgoing.send(SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=None, error=error)))


def build_server(served: ServedFolder, default_non_code: str, first_answer: str = "wait",
                 wait_seconds: float = DEFAULT_WAIT_SECONDS):
    import anyio
    import anyio.to_thread
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError  # its message reaches the client; other errors do not
    from mcp.server.stdio import stdio_server

    class CodesearchServer(MCPServer):
        async def run_stdio_async(self) -> None:
            """MCPServer's stdio loop with `answer_malformed` between the transport and the server."""
            import anyio

            async with stdio_server() as (incoming, outgoing), anyio.create_task_group() as tasks:
                to_server, from_transport = anyio.create_memory_object_stream(0)
                tasks.start_soon(answer_malformed, incoming, to_server, outgoing)
                await run_on_streams(self, from_transport, outgoing)

    call_threads = anyio.CapacityLimiter(CALL_THREADS)
    busy_fix = (f"this call waited {wait_seconds:g} s (the server's --wait-seconds) and the build goes on: call again "
                "in a while" + (", or start the server with --first-answer fast to get answers while it builds"
                                if first_answer != "fast" else ""))

    async def on_call_thread(work, request):
        """`work(request, deadline)` on one of the server's call threads; a tool error saying the index is busy
        if the call waits past `wait_seconds` (for a thread here, for the index in `work`)."""
        deadline = time.monotonic() + wait_seconds
        with anyio.move_on_after(wait_seconds):
            return await anyio.to_thread.run_sync(work, request, deadline, limiter=call_threads)
        raise ToolError(f"the server is busy: {CALL_THREADS} calls are waiting for the index of {served.root} "
                        f"(being built or refreshed); {busy_fix}")

    def relative(path: str | None) -> str:
        try:
            return served.relative(path)
        except ValueError as error:
            raise ToolError(str(error)) from None

    def refreshed(folder: FolderSearch, deadline: float):
        """This call's refresh of the folder, made on the build thread (wait mode)."""
        try:
            return folder.refresh_in_background(deadline)
        except IndexLocationError as error:  # an unwritable cache: say the fix
            raise ToolError(str(error)) from None

    def first_stage(folder: FolderSearch, deadline: float):
        """`--first-answer fast`: the first stage while the index builds behind it; None once the index is up to
        date (this call's refresh, made on the build's thread, found little or nothing to embed)."""
        if first_answer != "fast":
            return None
        try:
            return folder.first_stage(deadline=deadline)
        except IndexLocationError as error:
            raise ToolError(str(error)) from None

    def search_now(request: SearchRequest, deadline: float) -> list[dict[str, Any]]:
        # the request goes on whole, its path confined to the served folder and made relative to it
        request, folder = request.model_copy(update={"path": relative(request.path)}), served.folder
        try:
            stage = first_stage(folder, deadline)
            if stage is not None:
                return folder.first_search(stage, request)
            if first_answer != "fast":  # fast: first_stage has just refreshed the index, on its own thread
                refreshed(folder, deadline)
            vector = folder.query_vector(request.query, deadline) if request.ranking != "bm25" else None
            with folder.held(deadline):
                return folder.search(request, vector)
        except IndexBusy as error:
            raise ToolError(f"{error}; {busy_fix}") from None

    def index_status_now(request: StatusRequest, deadline: float) -> dict[str, Any]:
        under, folder = relative(request.path), served.folder
        try:
            stage = first_stage(folder, deadline)
            if stage is not None:  # the index holds a lock while it builds: what the first stage has
                return {"path": str(served.root / under), "building": True,
                        "files": len({path for path in stage.paths if is_under(path, under)}),
                        "pieces": sum(is_under(path, under) for path in stage.paths),
                        "index_dir": str(folder.index_folder), "model": str(folder.model_folder),
                        "model_loaded": folder.model_loaded, "precision": folder.options.precision}
            refresh = refreshed(folder, deadline) if first_answer != "fast" else None
            with folder.held(deadline):
                if refresh is None:  # fast: first_stage's build thread has just refreshed the index
                    refresh = folder.last_refresh
                pieces = sum(is_under(path, under) for path in folder.loaded_paths)
        except IndexBusy as error:
            raise ToolError(f"{error}; {busy_fix}") from None
        report = refresh.report
        files = sum(is_under(path, under) for path in refresh.selection.files)
        return {"path": str(served.root / under), "building": False, "files": files, "pieces": pieces,
                "listed_by": refresh.selection.how, "skipped": refresh.skipped,
                "index_dir": str(folder.index_folder), "model": str(folder.model_folder),
                "model_loaded": folder.model_loaded, "refresh_seconds": round(refresh.seconds, 3),
                "precision": folder.options.precision, "resident_vector_bytes": folder.resident_vector_bytes,
                "embedded_files": report.embedded_files, "embedded_pieces": report.embedded_pieces,
                "removed_files": report.removed_files}

    # Coroutines that hand the work to the server's own call threads (on_call_thread): a plain function would run
    # on anyio's default threads, which the stdio transport needs for every message.
    async def search(request: SearchRequest) -> list[dict[str, Any]]:
        """Find code by what it does, in the served folder (each argument is described in the input schema). Each
        hit is one file: path (relative to the served folder), line, end_line (1-based, inclusive), score, title and
        snippet of its first place (the member that answers best, headers last), also (paths of byte-identical
        files), more (the file's other places in that order: line, end_line, score, title)."""
        return await on_call_thread(search_now, request)

    async def index_status(request: StatusRequest) -> dict[str, Any]:
        """What is indexed (under path, a file or folder inside the served folder; default: all of it): files,
        pieces, skipped files, the index folder, the model, the precision and bytes of vectors held in memory, and
        what the refresh this call made had to embed."""
        return await on_call_thread(index_status_now, request)

    search_request = create_model("SearchRequest", __base__=SearchRequest, non_code=(
        SearchRequest.model_fields["non_code"].annotation,
        Field(default_non_code, description=SearchRequest.model_fields["non_code"].description)))
    tools = [typed_tool(search, search_request), typed_tool(index_status, StatusRequest)]
    return CodesearchServer("codesearch", instructions=INSTRUCTIONS, tools=tools)


def serve(argv: list[str], embedder=None) -> int:
    """Run the server until the client closes stdin. `embedder` replaces the model in tests."""
    parser = build_parser()
    args = parser.parse_args(argv)
    root = Path(args.path).expanduser().resolve()
    if not root.exists():
        parser.error(f"--path {args.path}: no such file or folder; pass the folder of code to search")
    if embedder is None:
        try:  # a bad --model, --backend or --device fails here, before the client connects
            resolve_model(args.model)
            check_backend(args.backend)
            check_device(args.device)
        except (ModelError, BackendError) as error:
            parser.error(str(error))
    options = IndexOptions(args.model, args.max_seq_length, args.batch_size, args.backend, device=args.device,
                           max_file_bytes=args.max_file_bytes, quiet=args.quiet, precision=args.precision,
                           rescore_multiplier=args.rescore_multiplier)
    try:
        served = ServedFolder(root, options, embedder)
    except IndexLocationError as error:
        parser.error(str(error))
    if not args.quiet:
        info(f"codesearch MCP server on stdio for {root}")
    try:
        build_server(served, args.non_code, args.first_answer, args.wait_seconds).run("stdio")
    finally:
        served.folder.close()
    return 0
