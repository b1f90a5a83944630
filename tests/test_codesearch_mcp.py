"""`codesearch serve --mcp` end to end: the official MCP SDK's own stdio client starts the server in a subprocess
(with the word-hashing test embedder) and calls its tools; one server answers several calls, and a file edited
between two calls is re-embedded before the second one answers."""

import asyncio
import json
import sys
from pathlib import Path

import pytest

from codesearch.__main__ import main

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
    assert set(first[0]) == {"path", "line", "end_line", "score", "title", "snippet", "also"}
    assert (status["files"], status["pieces"], status["embedded_files"]) == (3, 3, 0)  # the first search indexed
    assert (after_edit["embedded_files"], after_edit["embedded_pieces"]) == (1, 1)  # the edit, before answering
    assert "docs/conf.py" not in [hit["path"] for hit in filtered] and filtered[0]["path"] == "config.py"
    assert [hit["path"] for hit in other] == ["net.py"]
    assert bad.is_error and "ranking='magic'; pass one of dense, bm25, hybrid" in json.dumps(
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


def test_an_open_folder_reuses_its_index_and_tokenizes_only_new_pieces(project, tmp_path, monkeypatch):
    """What keeps a server's second query fast: nothing reloaded while nothing changed; after an edit, the BM25
    rebuild tokenizes only the pieces it has not seen."""
    from codesearch import searcher
    from codesearch.searcher import FolderSearch, IndexOptions
    from tests.test_codesearch_index import FakeEmbedder

    tokenized = []
    monkeypatch.setattr(searcher, "code_tokens", lambda text: tokenized.append(text) or text.split())
    folder = FolderSearch(project, IndexOptions(index_dir=tmp_path / "index", quiet=True), FakeEmbedder())
    try:
        folder.refresh()
        assert folder.search("read config")[0]["path"] == "config.py"
        loaded, first_tokenized = folder._loaded, len(tokenized)
        folder.refresh()
        folder.search("retry request")
        assert folder._loaded is loaded and len(tokenized) == first_tokenized + 1  # the query only
        (project / "net.py").write_text("def retry_request(url):\n    return backoff(url)\n")
        folder.refresh()
        hits = folder.search("backoff")
        assert folder._loaded is not loaded and hits[0]["path"] == "net.py"
        assert tokenized[first_tokenized + 1:] == ["def retry_request(url):\n    return backoff(url)", "backoff"]
    finally:
        folder.close()
