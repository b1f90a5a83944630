"""Latency of `codesearch serve --mcp` as a coding agent sees it: one server process, many tool calls.

    python benchmarks/codesearch_mcp.py [--queries 10] [--edits 5] [--backend auto]

The repository's own code files (those codesearch selects here) are copied to a temporary folder, which a server
started by the official MCP SDK's stdio client (`mcp.Client` + `StdioServerParameters`) indexes into a fresh cache
(XDG_CACHE_HOME), so nothing in the repository or the user's cache is touched. Timed from the client, JSON-RPC
round trip included:

1. cold: the first `index_status` call (index build, ONNX export and model load included);
2. first query: the first `search` (loads the BM25 retriever);
3. new query: `--queries` different queries, each never asked before (model loaded, index open): median;
4. after an edit: a function appended to one file (a different file each time), then a new query, which
   re-embeds that file before answering: median of `--edits`.

Goals (codesearch/reports/speed.md): new query <= 0.15 s, query after a one-file edit <= 0.5 s (medians).
"""

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.common import add_record_argument, load_line, write_record  # noqa: E402
from codesearch.encoders import BACKENDS  # noqa: E402
from codesearch.files import select_files  # noqa: E402

COLD_WAIT_SECONDS = 3600
QUERIES = ["load a model from a folder", "merge overlapping windows of one file", "parse the recipe config file",
           "split a python file into functions and classes", "retry a failed download", "cosine similarity of "
           "the query with every vector", "write a file atomically under a temporary name", "mine hard negatives",
           "export the model to onnx", "reciprocal rank fusion of two rankings", "gitignore rules outside git",
           "pooling by multihead attention", "lock file of installed versions", "count tokens of a text"]


def copy_code(destination: Path) -> int:
    selection = select_files(REPO_ROOT)
    for path in selection.files:
        target = destination / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / path, target)
    return len(selection.files)


async def measure(folder: Path, cache: Path, args) -> dict:
    from mcp import Client, StdioServerParameters

    env = {"PATH": os.environ.get("PATH", ""), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT),
           "XDG_CACHE_HOME": str(cache)}
    # --wait-seconds past any build: the cold figure is the build itself, timed by a client that waits for it
    # (with the default 30 s, a call answers "still being built" and the client calls again)
    parameters = StdioServerParameters(command=sys.executable, args=["-m", "codesearch", "serve", "--mcp", "-p",
                                                                      str(folder), "--backend", args.backend,
                                                                      "--wait-seconds", str(COLD_WAIT_SECONDS),
                                                                      "--quiet"], env=env, cwd=str(cache.parent))

    async def timed(client, tool: str, arguments: dict) -> float:
        started = time.perf_counter()
        result = await client.call_tool(tool, arguments)
        elapsed = time.perf_counter() - started
        if result.is_error:
            raise SystemExit(f"{tool} failed: {result.content}")
        return elapsed

    figures: dict = {}
    async with Client(parameters) as client:
        figures["cold"] = await timed(client, "index_status", {})
        figures["first query"] = await timed(client, "search", {"query": "read a json file", "top_k": 10})
        queries = [f"{QUERIES[i % len(QUERIES)]} #{time.time_ns() % 10**6}-{i}" for i in range(args.queries)]
        figures["new query"] = [await timed(client, "search", {"query": q, "top_k": 10}) for q in queries]
        python_files = sorted(folder.rglob("*.py"))[: args.edits]
        after_edit = []
        for number, path in enumerate(python_files):
            with open(path, "a") as handle:
                handle.write(f"\n\ndef appended_for_the_benchmark_{number}():\n    return {number}\n")
            after_edit.append(await timed(client, "search", {"query": f"appended function {number}", "top_k": 10}))
        figures["query after a one-file edit"] = after_edit
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=10, help="new queries timed (default: 10)")
    parser.add_argument("--edits", type=int, default=5, help="one-file edits timed (default: 5)")
    parser.add_argument("--backend", choices=BACKENDS, default="auto", help="as codesearch's option (default: auto)")
    add_record_argument(parser, "codesearch_mcp")
    args = parser.parse_args()
    loads = [load_line("start")]
    with tempfile.TemporaryDirectory(prefix="codesearch-mcp-") as scratch:
        folder, cache = Path(scratch) / "repository", Path(scratch) / "cache"
        files = copy_code(folder)
        figures = asyncio.run(measure(folder, cache, args))
    load = os.getloadavg()
    print(f"codesearch serve --mcp on this repository's code ({files} files), backend {args.backend}; load average "
          f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}, {os.cpu_count()} CPUs\n")
    print("| call | median s | min s | max s | runs |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, value in figures.items():
        runs = value if isinstance(value, list) else [value]
        print(f"| {name} | {statistics.median(runs):.3f} | {min(runs):.3f} | {max(runs):.3f} | {len(runs)} |")
    loads.append(load_line("end"))
    record = {"files": files, "backend": args.backend, "seconds": figures}
    print(f"record: {write_record(args.record_name, record, loads, args.record_dir)}")


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from statistics import median  # noqa: E402

from benchmarks.tables import markdown_table, number  # noqa: E402


# codesearch's latency goals for the MCP server's calls (wall seconds, medians; codesearch/reports/speed.md)
MCP_GOALS = {"new query": 0.15, "query after a one-file edit": 0.5}


# codesearch_mcp.py's calls, as the codesearch page describes them
MCP_CALLS = {"cold": "cold: first `index_status` (index build, ONNX export, model load)",
             "first query": "first `search` (loads the BM25 retriever)",
             "new query": "new query (model loaded, index open)",
             "query after a one-file edit":
                 "query after a one-file edit (a function appended to a different file each time)"}


def codesearch_mcp(record: dict) -> str:
    """Each MCP call's median (and range) of wall seconds at the client, against its goal where it has one."""
    rows = []
    for call, seconds in record["metrics"]["seconds"].items():
        runs = seconds if isinstance(seconds, list) else [seconds]
        middle = median(runs)
        title, value = MCP_CALLS.get(call, call), number(middle)
        if call in MCP_GOALS:  # the calls with a goal are the ones an agent makes all day
            title, value = f"**{title}** ({len(runs)} runs)", f"**{value}**"
        spread = f"{number(min(runs))}-{number(max(runs))}" if len(runs) > 1 else ""
        goal = (f"<= {MCP_GOALS[call]} s: {'met' if middle <= MCP_GOALS[call] else 'not met'}"
                if call in MCP_GOALS else "")
        rows.append([title, value, spread, goal])
    return markdown_table([f"call (this repository's code: {record['metrics']['files']} files)", "median s",
                           "min-max s", "goal"], rows, "lrrl")


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "codesearch_mcp": (("codesearch_mcp",), codesearch_mcp),
}


if __name__ == "__main__":
    main()
