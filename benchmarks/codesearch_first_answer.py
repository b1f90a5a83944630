"""CPU time to the first answer on a fresh folder: `--first-answer wait` (the default) against `fast`.

    python benchmarks/codesearch_first_answer.py --package pip --semble-repo bash-it [--query "..."]

The folders: installed packages (`--package`), repositories of semble's benchmark (`--semble-repo`, its benchmark
folder, from the data benchmarks/codesearch_semble.py reads). Each folder is copied to a temporary folder and
searched as a user runs the command, a new process each time, with a fresh index (`--index-dir` in the temporary
folder), `--json`: once with `--first-answer wait`, once with `fast`.
Times are the command's own CPU seconds (user + system, read from /proc when the first JSON list is complete on its
stdout, and from the exited process's rusage for the whole run), process start, imports and the model's load
included. The model's ONNX export (once per model, in the user's cache) is made before the runs, so it is in none
of them. After the `fast` run has built the index, the same query is run again (`wait`) and its hits compared with
those of the `wait` run: once the index is built, the answers are the default's.

Linux only (/proc). Prints one table row per folder and mode; writes a record (benchmarks.common.write_record).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/codesearch_first_answer.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.common import add_record_argument, commit_line, load_line, write_record  # noqa: E402
from benchmarks.codesearch_quality import package_folder  # noqa: E402
from benchmarks.codesearch_semble import DEFAULT_DATA, benchmark_dir, load_benchmark, repos_folder  # noqa: E402
from codesearch.files import select_files  # noqa: E402

DEFAULT_QUERY = "parse the options given on the command line"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process (its threads included), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime: fields 14 and 15 of stat(5)


def run_command(folder: Path, index_dir: Path, query: str, mode: str) -> dict:
    """One search in a new process: CPU and wall seconds when its JSON answer was complete, and at its exit."""
    return timed_command([sys.executable, "-m", "codesearch", query, "--path", str(folder), "--index-dir",
                          str(index_dir), "--first-answer", mode, "--json", "--quiet"])


def timed_command(command: list[str]) -> dict:
    """`command` (one that prints a JSON list of hits on stdout) in a new process run from the repository: CPU and
    wall seconds when its JSON list was complete (`answer_*`) and at its exit (`total_*`), the hits and its stderr
    lines. A failed command, or one that printed no list, stops the benchmark with its stderr."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                                             os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment,
                               cwd=REPO_ROOT)
    text, answer = "", None
    for line in process.stdout:  # the JSON list is printed, then flushed, in one piece
        text += line
        if line.rstrip() in ("]", "[]"):
            answer = json.loads(text)
            answer_cpu, answer_wall = process_cpu_seconds(process.pid), time.monotonic() - started
            break
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    stderr = process.stderr.read()
    process.stdout.close()
    process.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0 or answer is None:
        raise SystemExit(f"{' '.join(command)} failed ({os.waitstatus_to_exitcode(status)}):\n{stderr}")
    total_cpu = usage.ru_utime + usage.ru_stime
    return {"answer_cpu_s": answer_cpu, "answer_wall_s": answer_wall, "total_cpu_s": total_cpu, "total_wall_s": wall,
            "hits": answer, "stderr": stderr.strip().splitlines()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", action="append", default=[],
                        help="an installed package whose folder is searched fresh (copied first; repeatable)")
    parser.add_argument("--semble-repo", action="append", default=[],
                        help="a repository of semble's benchmark, searched fresh (repeatable)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="semble's benchmark data (as "
                        "codesearch_semble.py's --data)")
    parser.add_argument("--work-dir", type=Path,
                        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "c2llm-semble",
                        help="where semble's repositories are unpacked (as codesearch_semble.py's --work-dir)")
    parser.add_argument("--query", default=DEFAULT_QUERY, help=f"the query (default: {DEFAULT_QUERY!r})")
    add_record_argument(parser, "codesearch_first_answer")
    args = parser.parse_args(argv)
    if not args.package and not args.semble_repo:
        parser.error("name a folder to search: --package NAME (installed) or --semble-repo NAME")
    folders = [package_folder(name) for name in args.package]
    if args.semble_repo:
        specs, _ = load_benchmark(args.data)
        unknown = sorted(set(args.semble_repo) - set(specs))
        if unknown:
            parser.error(f"--semble-repo: no repository named {', '.join(unknown)}; the data has "
                         f"{', '.join(sorted(specs))}")
        repos = repos_folder(args.data, args.work_dir)
        folders += [benchmark_dir(repos, specs[name])[0] for name in args.semble_repo]
    loads, commit = [load_line("start")], commit_line()
    with tempfile.TemporaryDirectory(prefix="codesearch-first-answer-") as scratch:
        warm = Path(scratch, "warm")  # makes the model's ONNX export (once per model) before any timed run
        warm.mkdir()
        (warm / "example.py").write_text("def add(a, b):\n    return a + b\n")
        run_command(warm, Path(scratch, "warm-index"), args.query, "wait")
        rows = {}
        for folder in folders:
            copy = Path(scratch, folder.name)
            shutil.copytree(folder, copy, symlinks=True)
            files = len(select_files(copy).files)
            runs = {mode: run_command(copy, Path(scratch, f"{folder.name}-{mode}"), args.query, mode)
                    for mode in ("wait", "fast")}
            again = run_command(copy, Path(scratch, f"{folder.name}-fast"), args.query, "wait")
            same = again["hits"] == runs["wait"]["hits"]
            summary = next((line for line in runs["wait"]["stderr"] if line.startswith("indexed ")), "")
            pieces = int(re.search(r" as (\d+) pieces", summary).group(1))
            rows[folder.name] = {"files": files, "pieces": pieces, "final_answer_equal": same,
                                 "modes": {mode: {k: v for k, v in run.items() if k not in ("hits", "stderr")}
                                           for mode, run in runs.items()},
                                 "first_answer_note": next((line for line in runs["fast"]["stderr"]
                                                            if line.startswith("first answer")), "")}
            for mode, run in runs.items():
                print(f"{folder.name} ({files} files) {mode}: first answer {run['answer_cpu_s']:.1f} CPU-s "
                      f"({run['answer_wall_s']:.1f} s wall), whole command {run['total_cpu_s']:.1f} CPU-s "
                      f"({run['total_wall_s']:.1f} s wall)")
            print(f"{folder.name}: {summary}\n  after the fast run's build, the same query answers as the default: "
                  f"{same}")
    loads.append(load_line("end"))
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    record = {"query": args.query, "folders": rows,
              "all_children_cpu_s": children.ru_utime + children.ru_stime}
    argv = sys.argv if argv is None else [__file__, *argv]
    print(f"record: {write_record(args.record_name, record, loads, args.record_dir, argv, commit)}")


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from benchmarks.codesearch_semble import SEMBLE_CATEGORIES, codesearch_semble_languages  # noqa: E402
from benchmarks.tables import markdown_table, number  # noqa: E402


def codesearch_first_answer_quality(semble: dict, python_set: dict) -> str:
    """The first answer against the full index's rankings: NDCG@10 on semble's benchmark (overall, per category,
    the lowest language's difference to the default) and MRR@10 / hit@10 on the Python set."""
    default = semble["metrics"]["summary"]["codesearch hybrid"]
    python_all = next(figures for title, figures in python_set["metrics"]["sets"].items() if title.startswith("All"))
    runs = [("BM25", "codesearch bm25", "bm25 / demote / demote"),
            ("**hybrid (default)**", "codesearch hybrid", "hybrid / demote / demote")]
    runs += [(f"first answer: hybrid over BM25's best {name.rsplit(' ', 1)[1].rstrip(')')}", name,
              f"{name.removeprefix('codesearch ')} / demote / demote")
             for name in semble["metrics"]["summary"] if "first answer" in name]
    rows = []
    for title, method, config in runs:
        summary = semble["metrics"]["summary"][method]
        worst = min(summary["languages"], key=lambda lang: summary["languages"][lang] - default["languages"][lang])
        below = summary["languages"][worst] - default["languages"][worst]
        python = python_all[config]
        rows.append([title, number(summary["overall"]),
                     *(number(summary["categories"][name]) for name in SEMBLE_CATEGORIES),
                     f"{worst} {below:+.3f}" if summary is not default else "",
                     number(python["mrr@10"]), number(python["hit@10"])])
    return markdown_table(["ranking", "semble NDCG@10", *SEMBLE_CATEGORIES, "language furthest below the default",
                           "Python set MRR@10", "hit@10"], rows, "l" + "r" * (len(SEMBLE_CATEGORIES) + 4))


def codesearch_first_answer(record: dict) -> str:
    """CPU seconds to the first answer and for the whole command on a fresh folder, per `--first-answer` mode."""
    rows = []
    for name, folder in record["metrics"]["folders"].items():
        for mode, run in folder["modes"].items():
            rows.append([f"{name} ({folder['files']} files, {folder['pieces']:,} pieces)",
                         "fast" if mode == "fast" else "wait (default)", number(run["answer_cpu_s"], 1),
                         number(run["answer_wall_s"], 1), number(run["total_cpu_s"], 1),
                         "yes" if folder["final_answer_equal"] else "**no**"])
    return markdown_table(["fresh folder", "--first-answer", "first answer, CPU-s", "first answer, wall s",
                           "whole command (index built), CPU-s", "then answers as the default"], rows, "llrrrl")


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "codesearch_first_answer_quality": (("codesearch_semble_first_answer", "codesearch_quality_first_answer"),
                                        codesearch_first_answer_quality),
    "codesearch_first_answer_languages": (("codesearch_semble_first_answer",), codesearch_semble_languages),
    "codesearch_first_answer": (("codesearch_first_answer",), codesearch_first_answer),
    "codesearch_first_answer_networkx": (("codesearch_first_answer_networkx",), codesearch_first_answer),
}


if __name__ == "__main__":
    main()
