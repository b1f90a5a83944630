"""`codesearch serve --mcp` end to end: the official MCP SDK's own stdio client starts the server in a subprocess
(with the word-hashing test embedder) and calls its tools; one server answers several calls, and a file edited
between two calls is re-embedded before the second one answers."""

import asyncio
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from codesearch.__main__ import main
from tests.test_codesearch_index import FakeEmbedder

REPO_ROOT = Path(__file__).resolve().parents[1]
SERVER = ("import sys; from codesearch.__main__ import main; from tests.test_codesearch_index import FakeEmbedder; "
          "sys.exit(main(sys.argv[1:], embedder=FakeEmbedder()))")


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "docs").mkdir(parents=True)
    (root / "config.py").write_text("def read_config(path):\n    return json.load(open(path))\n")
    (root / "net.py").write_text("def retry_request(url, attempts):\n    return fetch(url)\n")
    (root / "docs" / "conf.py").write_text("def read_config_docs(path):\n    return json.load(open(path))\n")
    return root


async def call_server(project: Path, cache: Path, calls) -> list:
    """Start the server, then run `calls(session)` -> results."""
    from mcp import Client, StdioServerParameters

    parameters = StdioServerParameters(command=sys.executable, args=["-c", SERVER, "serve", "--mcp", "-p",
                                                                      str(project), "--quiet"],
                                       cwd=str(REPO_ROOT), env={"XDG_CACHE_HOME": str(cache)})
    async with Client(parameters) as client:
        return await calls(client)


def payload(result):
    """The tool's return value: structured content (a list is wrapped as {"result": [...]})."""
    assert not result.is_error, result.content
    value = result.structured_content
    return value["result"] if isinstance(value, dict) and set(value) == {"result"} else value


@pytest.mark.slow
def test_search_and_index_status_through_the_sdk_client(project, tmp_path):
    async def calls(client):
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        first = payload(await client.call_tool("search", {"query": "read config json", "top_k": 2}))
        status = payload(await client.call_tool("index_status", {}))
        (project / "net.py").write_text("def retry_request(url, attempts):\n    return read_config_again(url)\n")
        after_edit = payload(await client.call_tool("index_status", {}))
        filtered = payload(await client.call_tool("search", {"query": "read config json", "exclude": ["docs/*"],
                                                             "non_code": "demote"}))
        other = payload(await client.call_tool("search", {"query": "retry", "path": str(project / "net.py")}))
        bad = await client.call_tool("search", {"query": "x", "ranking": "magic"})
        return tools, first, status, after_edit, filtered, other, bad

    tools, first, status, after_edit, filtered, other, bad = asyncio.run(call_server(project, tmp_path / "cache",
                                                                                     calls))
    assert tools == ["index_status", "search"]
    assert [hit["path"] for hit in first] == ["config.py", "docs/conf.py"]
    assert set(first[0]) == {"path", "line", "end_line", "score", "title", "snippet", "also", "more"}
    assert (status["files"], status["pieces"], status["embedded_files"]) == (3, 3, 0)  # the first search indexed
    assert (after_edit["embedded_files"], after_edit["embedded_pieces"]) == (1, 1)  # the edit, before answering
    assert "docs/conf.py" not in [hit["path"] for hit in filtered] and filtered[0]["path"] == "config.py"
    assert [hit["path"] for hit in other] == ["net.py"]
    assert bad.is_error and "ranking\\n  Input should be 'dense', 'bm25' or 'hybrid'" in json.dumps(
        [block.model_dump() for block in bad.content])


def test_serve_needs_mcp_flag_and_an_existing_path(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "-p", str(tmp_path)])
    assert exit_info.value.code == 2 and "--mcp" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--mcp", "-p", str(tmp_path / "missing")])
    assert exit_info.value.code == 2 and "no such file or folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--mcp", "-p", str(tmp_path), "--model", str(tmp_path)])
    assert exit_info.value.code == 2 and "no modules.json" in capsys.readouterr().err


def test_serve_refuses_device_cuda_without_a_gpu_before_the_client_connects(tmp_path, capsys, monkeypatch):
    from codesearch import encoders

    monkeypatch.setattr(encoders, "cuda_present", lambda quick=True: False)
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--mcp", "-p", str(tmp_path), "--device", "cuda"])
    assert exit_info.value.code == 2 and "--device cuda: torch sees no CUDA GPU" in capsys.readouterr().err


def test_an_open_folder_reuses_its_index_and_tokenizes_only_new_pieces(project, tmp_path, monkeypatch):
    """What keeps a server's second query fast: nothing reloaded while nothing changed; after an edit, the BM25
    rebuild tokenizes only the pieces it has not seen."""
    from codesearch import searcher
    from codesearch.request import SearchRequest
    from codesearch.searcher import FolderSearch, IndexOptions
    from tests.test_codesearch_index import FakeEmbedder

    tokenized = []
    monkeypatch.setattr(searcher, "code_tokens", lambda text: tokenized.append(text) or text.split())
    folder = FolderSearch(project, IndexOptions(index_dir=tmp_path / "index", quiet=True), FakeEmbedder())
    try:
        folder.refresh()
        assert folder.search(SearchRequest(query="read config"))[0]["path"] == "config.py"
        loaded, first_tokenized = folder._loaded, len(tokenized)
        folder.refresh()
        folder.search(SearchRequest(query="retry request"))
        assert folder._loaded is loaded and len(tokenized) == first_tokenized + 1  # the query only
        (project / "net.py").write_text("def retry_request(url):\n    return backoff(url)\n")
        folder.refresh()
        hits = folder.search(SearchRequest(query="backoff"))
        assert folder._loaded is not loaded and hits[0]["path"] == "net.py"
        assert tokenized[first_tokenized + 1:] == ["def retry_request(url):\n    return backoff(url)", "backoff"]
    finally:
        folder.close()


class InProcess:
    """The server's tools called in this process (`MCPServer.call_tool`, as the SDK's dispatcher calls them):
    served folder `root`, the word-hashing test embedder."""

    def __init__(self, root: Path, index_dir: Path, embedder=None):
        from codesearch.mcp_server import ServedFolder, build_server
        from codesearch.searcher import IndexOptions

        self.served = ServedFolder(root, IndexOptions(index_dir=index_dir, quiet=True), embedder or FakeEmbedder())
        self.server = build_server(self.served, "demote")

    def call(self, name: str, arguments: dict):
        return asyncio.run(self.server.call_tool(name, arguments))

    def error(self, name: str, arguments: dict) -> str:
        """The message of the tool error the call gets (in process, the SDK raises what a client gets as an
        is_error result)."""
        from mcp.server.mcpserver.exceptions import ToolError

        with pytest.raises(ToolError) as error:
            self.call(name, arguments)
        return str(error.value)

    def close(self):
        self.served.folder.close()


@pytest.fixture
def served(project, tmp_path):
    server = InProcess(project, tmp_path / "index")
    yield server
    server.close()


@pytest.fixture
def outside(tmp_path):
    """A folder beside the served one holding a planted secret."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.py").write_text("def production_api_token():\n    return 'sk-FAKE-SECRET'\n")
    return folder


def test_paths_leading_outside_the_served_folder_are_refused_naming_it(project, outside, served):
    (project / "binding").mkdir()
    (project / "binding" / "bind.py").write_text("def bind_socket(port):\n    return port\n")
    (project / "escape").symlink_to(outside, target_is_directory=True)
    for path in (str(outside), "../outside", "~", "escape", "binding/../../outside", str(outside / "secret.py"),
                 "x" * 5000):
        for tool, arguments in (("search", {"query": "production api token", "path": path}),
                                ("index_status", {"path": path})):
            message = served.error(tool, arguments)
            assert str(project) in message and "sk-FAKE" not in message, (path, message)
    hits = payload(served.call("search", {"query": "bind socket port", "path": "binding"}))
    assert [hit["path"] for hit in hits] == ["binding/bind.py"]  # a subfolder, given relatively, is searched
    hits = payload(served.call("search", {"query": "read config", "path": str(project / "config.py")}))
    assert [hit["path"] for hit in hits] == ["config.py"]  # an absolute path inside the folder is inside
    status = payload(served.call("index_status", {"path": "docs"}))
    assert (status["files"], status["pieces"]) == (1, 1)


def test_a_path_holding_a_nul_character_is_refused_as_such(served):
    for tool, arguments in (("search", {"query": "read config", "path": "bad\0name"}),
                            ("index_status", {"path": "docs/\0"})):
        message = served.error(tool, arguments)
        assert "NUL character" in message and "leads outside" not in message, (tool, message)


def test_links_leading_outside_the_folder_are_skipped_and_counted(project, outside, served):
    (project / "link.py").symlink_to(outside / "secret.py")
    (project / "linked_folder").symlink_to(outside, target_is_directory=True)
    (project / "inside.py").symlink_to(project / "net.py")  # a link that stays inside is indexed
    hits = payload(served.call("search", {"query": "production api token secret", "top_k": 20}))
    assert hits and not any("sk-FAKE" in hit["snippet"] for hit in hits)
    status = payload(served.call("index_status", {}))
    assert status["skipped"]["links leading outside the folder"] == 2
    assert status["files"] == 4  # config.py, net.py, docs/conf.py, inside.py


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_tracked_folder_replaced_by_a_link_outside_is_neither_indexed_nor_shown(project, outside, served):
    """git still lists `docs/conf.py` once `docs/` is a link to a folder outside: the link is above the file."""
    (outside / "conf.py").write_text("def production_api_token_docs():\n    return 'sk-FAKE-SECRET'\n")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(["git", "-C", str(project), "add", "."], check=True)
    shutil.rmtree(project / "docs")
    (project / "docs").symlink_to(outside, target_is_directory=True)
    hits = payload(served.call("search", {"query": "production api token secret", "top_k": 20}))
    assert not any("sk-FAKE" in json.dumps(hit) for hit in hits)
    status = payload(served.call("index_status", {}))
    assert status["skipped"]["links leading outside the folder"] == 1
    assert status["files"] == 2  # config.py, net.py


def test_the_schema_advertises_choices_and_bounds_and_wrong_arguments_are_refused(served):
    from codesearch.request import MAX_TOP_K

    tools = {tool.name: tool for tool in asyncio.run(served.server.list_tools())}
    schema = tools["search"].input_schema
    assert schema["additionalProperties"] is False and schema["required"] == ["query"]
    assert schema["properties"]["ranking"]["enum"] == ["dense", "bm25", "hybrid"]
    assert schema["properties"]["non_code"]["enum"] == ["demote", "keep"]
    assert (schema["properties"]["top_k"]["minimum"], schema["properties"]["top_k"]["maximum"]) == (1, MAX_TOP_K)
    assert tools["index_status"].input_schema["additionalProperties"] is False
    for arguments, named in (({"query": "read config", "k": 2}, "unknown argument 'k'; did you mean 'top_k'?"),
                             ({"query": "x", "top_k": True}, "top_k"),
                             ({"query": "x", "top_k": 10**9}, "top_k"), ({"query": "x", "top_k": "5"}, "top_k"),
                             ({"query": "x", "ranking": "magic"}, "ranking"), ({"query": "   "}, "query empty"),
                             ({"query": "x" * 10**6}, "query 1,000,000 characters"),
                             ({"query": "x", "include": "*.py"}, "include")):
        message = served.error("search", arguments)
        assert all(word in message for word in named.split()), (arguments, message)
    assert "unknown argument 'folder'; the arguments are path" in served.error("index_status", {"folder": "."})
    assert len(payload(served.call("search", {"query": "read config", "top_k": 2}))) == 2


def test_an_unknown_argument_gets_the_name_meant_and_the_log_names_it(served, caplog):
    """Through the SDK's own client (in process), so the server's log line is the one a real call writes."""
    from mcp import Client

    meant = {"k": "top_k", "topK": "top_k", "rankin": "ranking", "code": "non_code", "quary": "query"}

    async def calls():
        async with Client(served.server) as client:
            return {name: await client.call_tool("search", {"query": "read config", name: 2}) for name in meant}

    with caplog.at_level("INFO"):
        results = asyncio.run(calls())
    for name, field in meant.items():
        message = results[name].content[0].text
        assert results[name].is_error and f"unknown argument {name!r}; did you mean {field!r}?" in message, message
        assert f"rejected arguments: [{name!r}]" in caplog.text, caplog.text
    assert "['']" not in caplog.text


class SlowQueryEmbedder(FakeEmbedder):
    """Embedding the query 'slow' waits (up to WAIT_SECONDS) until another call has been answered."""

    WAIT_SECONDS = 10

    def __init__(self):
        super().__init__()
        self.slow_started, self.other_answered = threading.Event(), threading.Event()
        self.answered_first = False

    def encode_query(self, texts):
        if texts == ["slow"]:
            self.slow_started.set()
            self.answered_first = self.other_answered.wait(self.WAIT_SECONDS)
        return super().encode_query(texts)


def test_a_slow_call_does_not_hold_up_another(project, tmp_path):
    """Two calls at once, as the SDK's dispatcher runs them: the second is answered while the first is still in
    its slow model call (a tool run on the event loop would hold every other call until it returned)."""
    embedder = SlowQueryEmbedder()
    served = InProcess(project, tmp_path / "index", embedder)

    async def both():
        slow = asyncio.ensure_future(served.server.call_tool("search", {"query": "slow"}))
        while not embedder.slow_started.is_set() and not slow.done():
            await asyncio.sleep(0.01)
        other = await served.server.call_tool("search", {"query": "read config json", "ranking": "bm25"})
        embedder.other_answered.set()
        return await slow, other

    try:
        slow, other = asyncio.run(both())
    finally:
        served.close()
    assert payload(other)[0]["path"] == "config.py" and not slow.is_error
    assert embedder.answered_first


REPLY_SECONDS = 60  # a reply that takes longer is missing (the server answers these in milliseconds)


class RawClient:
    """The server in a subprocess, spoken to line by line: what a client that sends malformed JSON-RPC meets.
    `server`: the Python code that runs it, given `server_arguments` before the command line and `options` after."""

    def __init__(self, project: Path, cache: Path, server: str = SERVER, server_arguments: tuple[str, ...] = (),
                 options: tuple[str, ...] = ()):
        self.process = subprocess.Popen([sys.executable, "-c", server, *server_arguments, "serve", "--mcp", "-p",
                                         str(project), "--quiet", *options], cwd=REPO_ROOT, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        env={**os.environ, "XDG_CACHE_HOME": str(cache)})
        # Lines read on a thread of their own, as they come: select() on the pipe would miss a second reply
        # already read into the file object's buffer with the first. The thread ends when the server does.
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read_lines, daemon=True).start()

    def _read_lines(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)

    def initialize(self) -> None:
        self.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}))
        assert self.reply()["id"] == 1
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def send(self, line: str) -> None:
        self.process.stdin.write(line.encode("utf-8", errors="surrogatepass") + b"\n")
        self.process.stdin.flush()

    def reply(self) -> dict | None:
        try:
            return json.loads(self.lines.get(timeout=REPLY_SECONDS))
        except queue.Empty:
            return None

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(REPLY_SECONDS)


@pytest.mark.slow
def test_malformed_json_rpc_gets_the_protocols_error_and_the_server_goes_on(project, tmp_path):
    client = RawClient(project, tmp_path / "cache")
    try:
        client.initialize()
        lone_surrogate = ('{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "search", '
                          '"arguments": {"query": "\\ud800 config"}}}')
        bad_ids = [(json.dumps({"jsonrpc": "2.0", "id": bad_id, "method": method}), -32600)
                   for bad_id, method in ((None, "ping"), (1.5, "tools/list"), (True, "ping"), ({"n": 1}, "ping"))]
        for line, code in (("not json at all", -32700), ("[]", -32600), ("{}", -32600), (lone_surrogate, -32700),
                           *bad_ids):
            client.send(line)
            reply = client.reply()
            assert reply is not None, f"no reply to {line!r}"
            assert (reply["id"], reply["error"]["code"]) == (None, code), (line, reply)
        client.send(json.dumps({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                                "params": {"name": "search", "arguments": {"query": "read config json"}}}))
        reply = client.reply()
        assert reply["id"] == 6 and reply["result"]["structuredContent"]["result"][0]["path"] == "config.py"
    finally:
        client.close()


def test_lines_the_transport_could_not_read_are_answered_and_the_rest_passed_on():
    """`answer_malformed` alone, on memory streams: what the SDK's stdio transport yields for a line that is not
    JSON and for JSON that is no message."""
    import anyio
    import mcp_types
    from mcp.shared.message import SessionMessage
    from pydantic import ValidationError

    from codesearch.mcp_server import answer_malformed

    def transport_item(line: str):
        try:
            return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValidationError as error:
            return error

    async def run():
        incoming_send, incoming = anyio.create_memory_object_stream(10)
        to_server, from_transport = anyio.create_memory_object_stream(10)
        outgoing, answers = anyio.create_memory_object_stream(10)
        for line in ("nope", "[]", '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
                     '{"jsonrpc": "2.0", "id": null, "method": "ping"}',
                     '{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}',
                     '{"jsonrpc": "2.0", "id": true, "method": "tools/list"}',
                     '{"jsonrpc": "2.0", "id": 7, "method": "ping"}'):
            await incoming_send.send(transport_item(line))
        await incoming_send.aclose()
        await answer_malformed(incoming, to_server, outgoing)
        return [item.message async for item in from_transport], [answers.receive_nowait().message for _ in range(5)]

    passed, answered = asyncio.run(run())
    assert [getattr(message, "id", None) for message in passed] == [None, 7]  # the notification, the valid request
    assert [message.method for message in passed] == ["notifications/initialized", "ping"]
    assert [(message.id, message.error.code) for message in answered] == [(None, -32700)] + [(None, -32600)] * 4
    assert "'tools/list' is a request, which needs an id that is a string or an integer" in answered[4].error.message


class HeldBuildEmbedder(FakeEmbedder):
    """Embedding the index's pieces waits (up to WAIT_SECONDS) until `release` is set: a build that lasts as long
    as a test needs."""

    WAIT_SECONDS = 10

    def __init__(self):
        super().__init__()
        self.release = threading.Event()

    def encode_document(self, texts):
        self.release.wait(self.WAIT_SECONDS)
        return super().encode_document(texts)


def test_a_call_waiting_for_a_build_past_the_bound_says_so_and_the_build_goes_on(project, tmp_path):
    from mcp.server.mcpserver.exceptions import ToolError

    from codesearch.mcp_server import ServedFolder, build_server
    from codesearch.searcher import IndexOptions

    embedder = HeldBuildEmbedder()
    served = ServedFolder(project, IndexOptions(index_dir=tmp_path / "index", quiet=True), embedder)
    impatient = build_server(served, "demote", wait_seconds=0.1)  # the build is held: far longer than this
    try:
        for tool, arguments in (("search", {"query": "read config json"}), ("index_status", {})):
            with pytest.raises(ToolError) as error:
                asyncio.run(impatient.call_tool(tool, arguments))
            message = str(error.value)
            assert all(words in message for words in (f"the index of {project} is still being built",
                                                      "waited 0.1 s", "--wait-seconds", "--first-answer fast")), message
        embedder.release.set()  # the build the first call started goes on and ends
        hits = payload(asyncio.run(build_server(served, "demote").call_tool("search", {"query": "read config json"})))
        assert hits[0]["path"] == "config.py"
        assert len(embedder.documents) == 6  # one build: 3 pieces and the paths of their 3 files, none twice
    finally:
        embedder.release.set()
        served.folder.close()


class FileHeldEmbedder(FakeEmbedder):
    """Embedding the index's pieces waits until the file `release` exists (for at most HOLD_SECONDS): how a test
    holds the build of a server in another process."""

    HOLD_SECONDS = REPLY_SECONDS / 2  # held past it, the build ends and the calls are answered before the test gives up
    POLL_SECONDS = 0.05  # how soon the build goes on once released

    def __init__(self, release: str):
        super().__init__()
        self.release = Path(release)

    def encode_document(self, texts):
        give_up = time.monotonic() + self.HOLD_SECONDS
        while not self.release.exists() and time.monotonic() < give_up:
            time.sleep(self.POLL_SECONDS)
        return super().encode_document(texts)


HELD_SERVER = ("import sys; from codesearch.__main__ import main; from tests.test_codesearch_mcp import "
               "FileHeldEmbedder; sys.exit(main(sys.argv[2:], embedder=FileHeldEmbedder(sys.argv[1])))")


def default_worker_threads() -> int:
    """The threads of anyio's default limiter: what the SDK's stdio transport reads and writes each message with."""
    import anyio
    import anyio.to_thread

    async def tokens():
        return anyio.to_thread.current_default_thread_limiter().total_tokens

    return int(anyio.run(tokens))


@pytest.mark.slow
def test_ping_and_tools_list_are_answered_while_calls_wait_for_a_build(project, tmp_path):
    """More calls than anyio's default limiter has threads wait for one build; a ping and tools/list sent after them
    are answered first, while the build is held, and once it ends every call gets its hits."""
    release = tmp_path / "release"
    calls = default_worker_threads() + 3
    # --wait-seconds: long enough that on a loaded machine no call answers "still being built"
    client = RawClient(project, tmp_path / "cache", HELD_SERVER, (str(release),), ("--wait-seconds", "600"))
    try:
        client.initialize()
        for number in range(calls):
            client.send(json.dumps({"jsonrpc": "2.0", "id": f"search {number}", "method": "tools/call",
                                    "params": {"name": "search", "arguments": {"query": "read config json"}}}))
        client.send(json.dumps({"jsonrpc": "2.0", "id": "ping", "method": "ping"}))
        client.send(json.dumps({"jsonrpc": "2.0", "id": "list", "method": "tools/list"}))
        first = [client.reply(), client.reply()]
        release.touch()
        assert [reply and reply["id"] for reply in first] == ["ping", "list"], first
        assert sorted(tool["name"] for tool in first[1]["result"]["tools"]) == ["index_status", "search"]
        searches = [client.reply() for _ in range(calls)]
        assert sorted(reply["id"] for reply in searches) == sorted(f"search {number}" for number in range(calls))
        for reply in searches:
            assert not reply["result"].get("isError"), reply
            assert reply["result"]["structuredContent"]["result"][0]["path"] == "config.py"
    finally:
        release.touch()
        client.close()


def test_a_path_whose_link_is_removed_while_it_is_followed_is_a_clear_error(tmp_path, monkeypatch):
    from codesearch import mcp_server
    from codesearch.mcp_server import ServedFolder
    from codesearch.searcher import IndexOptions

    def removed_while_followed(path):
        raise FileNotFoundError(2, "No such file or directory", str(path))

    served = ServedFolder(tmp_path, IndexOptions(index_dir=tmp_path / "index", quiet=True), FakeEmbedder())
    monkeypatch.setattr(mcp_server, "real_path", removed_while_followed)
    with pytest.raises(ValueError, match="changed while it was read"):
        served.relative("src")
