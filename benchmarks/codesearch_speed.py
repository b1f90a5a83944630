"""Speed of the codesearch command line, as a user sees it (new process each time, model load included).

    python benchmarks/codesearch_speed.py [--package requests] [--repeat 5]   # build, repeat query, new query, edit
    python benchmarks/codesearch_speed.py --backend onnx torch                   # both backends, side by side
    python benchmarks/codesearch_speed.py --package transformers --steps new --index-dir DIR  # a big cold build,
                                                                                 # then new queries; DIR is kept
    python benchmarks/codesearch_speed.py --package pip --steps edit --device auto cpu  # on a GPU machine: the
                                                                                 # build on the GPU, then on the CPU

The package's folder is copied to a temporary folder (edits never touch the installed package) and indexed
into a fresh index folder, with a fresh cache (XDG_CACHE_HOME), so the cold build includes the one-time ONNX
export. Steps, for each `--backend` and `--device`:

1. cold build: the first query, which embeds every piece (always run; pieces/s from it, the export included);
2. `repeat`: the same query on the unchanged folder (its vector is cached: no model load);
3. `new`: a different query each run on the unchanged folder (model load + query);
4. `edit`: a line appended to one file, then a query (a different file each time: load + re-embed).
Steps 2-4 (`--steps`, default all three): `--repeat` runs each. Every run records its wall seconds, CPU seconds
(user + system) and peak RSS; the record is benchmarks/results/codesearch_speed.json (`--record-name`), with
each build's model loads, its rates (files parsed and pieces embedded per second, from its progress lines) and
whether its hits are the first build's (a GPU build gives the index a CPU build gives).
`--index-dir DIR` builds the index in DIR and keeps it (one `--backend`; DIR must not hold files yet, so the
build is cold), for benchmarks that read a large package's index afterwards (`codesearch_precision.py
--large-index-dir DIR`: the index was built on a copy that kept the files' sizes and times, so nothing is embedded
again). Other jobs share this machine: the load average is recorded beside the figures.
"""

import argparse
import importlib.metadata
import importlib.util
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/codesearch_speed.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.common import add_record_argument, commit_line, load_line, write_record  # noqa: E402

QUERY = "read a file and parse its contents"
# step name (as the record keys it) -> what it times
BUILD = "cold build (first query: parsing, embedding every piece; onnx: the one-time export)"
STEPS = {"repeat": "same query again, unchanged folder (cached query vector, no model load)",
         "new": "new query, unchanged folder (model load + query)",
         "edit": "query after editing one file (model load + re-embed it)"}
RATE = re.compile(r"(?P<what>parsing|embedding pieces): \d+/\d+ \((?P<rate>\d+)/s")  # codesearch.update.Progress
MODEL_LOAD = re.compile(r"loaded model .* \((?P<how>[^)]*)\) in (?P<seconds>[\d.]+) s")
SUMMARY = re.compile(r"indexed (?P<files>\d+) files .* as (?P<pieces>\d+) pieces; "
                     r"embedded \d+ pieces \((?P<distinct>\d+) distinct\)")
# The command runs in a child that prints its own peak RSS when done, the kernel's VmHWM of that process: ru_maxrss
# of a child would count the parent's RSS at fork, and the parent has imported torch (benchmarks.common).
CHILD = ("import re, runpy, sys; sys.argv = ['codesearch', *sys.argv[1:]]; code = 0\n"
         "try:\n    runpy.run_module('codesearch', run_name='__main__')\nexcept SystemExit as done:\n"
         "    code = done.code\npeak = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
         "print(f'PEAK_RSS_KB {peak}', file=sys.stderr)\nsys.exit(code or 0)")
KIB = 1024


@dataclass
class CommandRun:
    """One codesearch process: wall and CPU seconds (user + system, with any children it waited for), its peak
    RSS, and what it printed (stderr without the peak line)."""

    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    stdout: str
    stderr: str

    def figures(self) -> dict:
        return {"wall_s": self.wall_s, "cpu_s": self.cpu_s, "peak_rss_mib": self.peak_rss_mib}


def run_command_line(arguments: list[str], env: dict, cwd: Path) -> CommandRun:
    """Run `codesearch ARGUMENTS` as a user does (a new process) and measure it; exit naming its error if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", CHILD, *arguments], capture_output=True, text=True, env=env,
                            cwd=cwd)
    wall_s = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0 or "PEAK_RSS_KB " not in result.stderr:
        raise SystemExit(f"codesearch {' '.join(arguments)} failed:\n{result.stderr}")
    stderr, _, peak = result.stderr.rpartition("PEAK_RSS_KB ")
    cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return CommandRun(wall_s, cpu_s, int(peak.split()[0]) / KIB, result.stdout, stderr)


def run_codesearch(folder: Path, index_dir: Path, cache: Path, backend: str, query: str = QUERY,
                   options: tuple[str, ...] = ()) -> CommandRun:
    arguments = [query, "--path", str(folder), "--index-dir", str(index_dir), "--json", "--top-k", "5",
                 "--backend", backend, *options]
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))  # packages put there too
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": path, "XDG_CACHE_HOME": str(cache)}
    run = run_command_line(arguments, env, folder.parent)
    json.loads(run.stdout)
    return run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", default="requests", help="installed package to index (default: requests)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per timed step after the build (default: 5)")
    parser.add_argument("--steps", nargs="*", choices=tuple(STEPS), default=list(STEPS),
                        help="steps after the cold build (default: all; none: the cold build only)")
    parser.add_argument("--backend", nargs="+", default=["auto"], choices=("auto", "onnx", "torch"),
                        help="codesearch --backend values to time, one after the other (default: auto)")
    parser.add_argument("--device", nargs="+", default=["auto"], choices=("auto", "cpu", "cuda"),
                        help="codesearch --device values to time, one after the other, each with every --backend "
                             "(default: auto)")
    parser.add_argument("--model", default="default", help="codesearch --model (default: default)")
    parser.add_argument("--batch-size", type=int, help="codesearch --batch-size (default: codesearch's)")
    parser.add_argument("--index-dir", type=Path, metavar="DIR",
                        help="build the index here and keep it (a new or empty folder; one --backend and "
                        "--device); default: a temporary folder, removed after the run")
    add_record_argument(parser, "codesearch_speed")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    if args.index_dir is not None:
        if len(args.backend) * len(args.device) > 1:
            parser.error("--index-dir keeps one cold build's index: give one --backend and one --device")
        if args.index_dir.exists() and (not args.index_dir.is_dir() or any(args.index_dir.iterdir())):
            parser.error(f"--index-dir {args.index_dir} already holds files, so the build would not be cold: "
                         "give a new folder (or empty this one)")
    spec = importlib.util.find_spec(args.package)
    if spec is None or not spec.submodule_search_locations:
        parser.error(f"package {args.package!r} is not installed")
    args.source = Path(list(spec.submodule_search_locations)[0])
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print(f"package {args.package} ({args.source}); {os.cpu_count()} cores; load average before: "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    loads, commit = [load_line("start")], commit_line()  # the code that runs, however long the run takes
    metrics = {"package": args.package, "version": importlib.metadata.version(args.package), "repeat": args.repeat,
               "model": "default" if args.model == "default" else "MODEL",  # as the command's line says it
               "batch_size": args.batch_size,
               "steps": {"build": BUILD, **{step: STEPS[step] for step in args.steps}},
               "backends": {}, "model_loads": {}, "rates": {}, "same_hits_as_first": {}}
    first_hits = None
    for backend in args.backend:
        for device in args.device:
            label = backend if args.device == ["auto"] else f"{backend}, --device {device}"
            runs, summary, build = time_backend(args, backend, device)
            metrics.update(summary)
            metrics["backends"][label] = runs
            metrics["model_loads"][label] = [{"how": found["how"], "seconds": float(found["seconds"])}
                                             for found in MODEL_LOAD.finditer(build.stderr)]
            # per second of each stage, from its last progress line (the last rate is the whole stage's)
            metrics["rates"][label] = {found["what"]: int(found["rate"]) for found in RATE.finditer(build.stderr)}
            hits = [(hit["path"], hit["line"]) for hit in json.loads(build.stdout)]
            first_hits = hits if first_hits is None else first_hits
            metrics["same_hits_as_first"][label] = hits == first_hits
            print(f"{label}: model loads {metrics['model_loads'][label]}; rates {metrics['rates'][label]}; "
                  "hits as the first build's: "
                  f"{hits == first_hits}", flush=True)
    loads.append(load_line("end"))
    print(f"\nload average after: {os.getloadavg()[0]:.1f}\n")
    print("| backend | step | median wall s | median CPU s | median peak RSS MiB |")
    print("| --- | --- | ---: | ---: | ---: |")
    for backend, runs in metrics["backends"].items():
        for step, measured in runs.items():
            print(f"| {backend} | {metrics['steps'][step]} | "
                  + " | ".join(f"{statistics.median(run[name] for run in measured):.2f}"
                               for name in ("wall_s", "cpu_s", "peak_rss_mib")) + " |")
    print(f"record: {write_record(args.record_name, metrics, loads, args.record_dir, commit=commit)}")


def time_backend(args: argparse.Namespace, backend: str, device: str) -> tuple[dict[str, list[dict]], dict,
                                                                               CommandRun]:
    """{step: [each run's figures]} for one backend and device, the folder's files, pieces and distinct texts, and
    the cold build's run."""
    options = ("--device", device, "--model", args.model,
               *(("--batch-size", str(args.batch_size)) if args.batch_size else ()))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / args.package
        shutil.copytree(args.source, folder, ignore=shutil.ignore_patterns("__pycache__"))  # keeps files' times
        index_dir = args.index_dir or Path(tmp) / "index"
        cache = Path(tmp) / "cache"
        build = run_codesearch(folder, index_dir, cache, backend, options=options)
        found = SUMMARY.search(build.stderr)
        summary = {name: int(found.group(name)) for name in ("files", "pieces", "distinct")}
        runs = {"build": [build.figures()]}
        print(f"{backend}, --device {device}: cold build {build.wall_s:.1f} s ({build.cpu_s:.0f} CPU-s, "
              f"{build.peak_rss_mib:.0f} MiB) "
              f"for {summary['pieces']} pieces; load average {os.getloadavg()[0]:.1f}", flush=True)
        if "repeat" in args.steps:
            runs["repeat"] = [run_codesearch(folder, index_dir, cache, backend, options=options).figures()
                              for _ in range(args.repeat)]
        if "new" in args.steps:
            runs["new"] = [run_codesearch(folder, index_dir, cache, backend, f"{QUERY} number {n}", options).figures()
                           for n in range(args.repeat)]
        if "edit" in args.steps:
            runs["edit"] = []
            files = sorted(folder.rglob("*.py"))
            for number in range(args.repeat):
                with open(files[number % len(files)], "a") as handle:
                    handle.write(f"\nEDITED_BY_BENCHMARK_{number} = {number}\n")
                edited = run_codesearch(folder, index_dir, cache, backend, options=options)
                if "embedded 0 pieces" in edited.stderr:
                    raise SystemExit("the edit was not picked up")
                runs["edit"].append(edited.figures())
    return runs, summary, build


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from statistics import median  # noqa: E402

from benchmarks.tables import markdown_table, number  # noqa: E402


# codesearch's latency goals for the command line's steps (wall seconds, medians; codesearch/reports/speed.md)
SPEED_GOALS = {"new": 2.0, "edit": 5.0}


# the backends a user gets by default: `auto` is onnx, onnxruntime being a dependency
SPEED_DEFAULT_BACKENDS = ("auto", "onnx")


SPEED_BACKENDS = {"auto": "auto (default: onnx)", "onnx": "onnx (default)"}


def codesearch_speed(record: dict) -> str:
    """Each step of codesearch_speed.py per backend: runs, wall seconds (median and range), CPU seconds, peak RSS,
    pieces/s of the cold build, and the goal of the steps that have one."""
    metrics = record["metrics"]
    rows = []
    for backend, steps in metrics["backends"].items():
        for step, runs in steps.items():
            wall = [run["wall_s"] for run in runs]
            middle = median(wall)
            title = metrics["steps"][step]  # as codesearch_speed.py describes its steps
            goal = SPEED_GOALS.get(step)
            verdict = f"< {goal:g} s: {'met' if middle < goal else 'not met'}" if goal else ""
            if goal and backend in SPEED_DEFAULT_BACKENDS:
                title, verdict = f"**{title}**", f"**{verdict}**"
            rows.append([title, SPEED_BACKENDS.get(backend, backend), str(len(runs)), number(middle, 2),
                         f"{number(min(wall), 2)}-{number(max(wall), 2)}" if len(runs) > 1 else "",
                         number(median(run["cpu_s"] for run in runs), 1),
                         f"{median(run['peak_rss_mib'] for run in runs):.0f}",
                         number(metrics["pieces"] / middle, 1) if step == "build" else "", verdict])
    return markdown_table([f"step ({metrics['package']} {metrics['version']}: {metrics['files']:,} files, "
                           f"{metrics['pieces']:,} pieces, {metrics['distinct']:,} distinct texts)", "backend", "runs",
                           "wall s, median", "min-max", "CPU s, median", "peak RSS MiB", "pieces/s", "goal"],
                          rows, "llrrrrrrl")


def codesearch_gpu_index(*records: dict) -> str:
    """Cold builds of codesearch_speed.py with --device, one row per package and device: size, wall and CPU seconds,
    the model loads (GPU: torch, CUDA and the model; onnx: with the one-time export), the embedding stage's pieces
    per second (from the first embedding call, so the model load inside it included), and whether the hits match."""
    rows = []
    for record in records:
        metrics = record["metrics"]
        for position, (label, steps) in enumerate(metrics["backends"].items()):
            build = steps["build"][0]
            loads = ", ".join(f"{load['how']} {number(load['seconds'], 1)}" for load in metrics["model_loads"][label])
            same = "yes" if metrics["same_hits_as_first"][label] else "no"
            rows.append([f"{metrics['package']} {metrics['version']}", f"{metrics['files']:,}",
                         f"{metrics['pieces']:,}", label.rpartition("--device ")[2], number(build["wall_s"], 1),
                         number(build["cpu_s"], 0), loads, f"{metrics['rates'][label].get('embedding pieces', 0):,}",
                         same if position else "(first)"])
    return markdown_table(["package", "files", "pieces", "--device", "cold build, wall s", "CPU s",
                           "model loads, s", "embedding, pieces/s", "top 5 as the package's first row"], rows,
                          "lrrlrrlrl")


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "codesearch_speed": (("codesearch_speed",), codesearch_speed),
    "codesearch_speed_transformers": (("codesearch_speed_transformers",), codesearch_speed),
    "codesearch_gpu_index": (("codesearch_speed_gpu_pip", "codesearch_speed_gpu_transformers"), codesearch_gpu_index),
}


if __name__ == "__main__":
    main()
