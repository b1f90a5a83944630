"""Wall-clock speed of the codesearch command line, as a user sees it (new process each time, model load included).

    python benchmarks/codesearch_speed.py [--package requests] [--repeat 5]   # build, repeat query, one-file edit
    python benchmarks/codesearch_speed.py --backend onnx torch                   # both backends, side by side
    python benchmarks/codesearch_speed.py --package transformers --build-only  # the big cold index build

The package's folder is copied to a temporary folder (edits never touch the installed package) and indexed
into a fresh index folder, with a fresh cache (XDG_CACHE_HOME), so the cold build includes the one-time ONNX
export. Steps, for each `--backend`:

1. cold build: the first query, which embeds every piece (reports pieces/s; the export included);
2. repeat query: the same query on the unchanged folder (its vector is cached: no model load);
3. new query: a different query each run on the unchanged folder (model load + query);
4. one-file edit: a line appended to one file, then a query (a different file each time: load + re-embed).
Steps 2-4: `--repeat` runs each, median.

Other jobs share this machine: the load average is printed beside the figures.
"""

import argparse
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/codesearch_speed.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.common import add_record_argument, load_line, write_record  # noqa: E402

QUERY = "read a file and parse its contents"


def run_codesearch(folder: Path, index_dir: Path, backend: str, query: str = QUERY) -> tuple[float, str]:
    command = [sys.executable, "-m", "codesearch", query, "--path", str(folder), "--index-dir", str(index_dir),
               "--json", "--top-k", "5", "--backend", backend]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT), "XDG_CACHE_HOME": str(index_dir.parent)}
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=folder.parent)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"codesearch failed:\n{result.stderr}")
    json.loads(result.stdout)
    return elapsed, result.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", default="requests", help="installed package to index (default: requests)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per timed step (default: 5)")
    parser.add_argument("--build-only", action="store_true", help="only the cold build (for big packages)")
    parser.add_argument("--backend", nargs="+", default=["auto"], choices=("auto", "onnx", "torch"),
                        help="codesearch --backend values to time, one after the other (default: auto)")
    add_record_argument(parser, "codesearch_speed")
    args = parser.parse_args()

    spec = importlib.util.find_spec(args.package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"package {args.package!r} is not installed")
    source = Path(list(spec.submodule_search_locations)[0])
    print(f"package {args.package} ({source}); {os.cpu_count()} cores; load average before: "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    rows, loads = [], [load_line("start")]
    for backend in args.backend:
        rows += time_backend(source, args, backend)
    print(f"\nload average after: {os.getloadavg()[0]:.1f}\n")
    print("| backend | step | median wall s | notes |")
    print("| --- | --- | ---: | --- |")
    for backend, name, seconds, notes in rows:
        print(f"| {backend} | {name} | {seconds:.2f} | {notes} |")
    loads.append(load_line("end"))
    steps = [{"backend": backend, "step": name, "median_s": seconds, "notes": notes}
             for backend, name, seconds, notes in rows]
    record = {"package": args.package, "repeat": args.repeat, "steps": steps}
    print(f"record: {write_record(args.record_name, record, loads, args.record_dir)}")


def time_backend(source: Path, args: argparse.Namespace, backend: str) -> list[tuple[str, str, float, str]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / args.package
        shutil.copytree(source, folder, ignore=shutil.ignore_patterns("__pycache__"))
        index_dir = Path(tmp) / "cache" / "index"
        build_s, log = run_codesearch(folder, index_dir, backend)
        pieces = int(re.search(r"as (\d+) pieces", log).group(1))
        distinct = int(re.search(r"\((\d+) distinct\)", log).group(1))
        rows.append((backend, "cold build (first query)", build_s,
                     f"{pieces} pieces ({distinct} distinct texts), {pieces / build_s:.1f} pieces/s"))
        print(f"{backend}: cold build {build_s:.1f} s for {pieces} pieces; load average {os.getloadavg()[0]:.1f}",
              flush=True)
        if args.build_only:
            return rows
        repeat = [run_codesearch(folder, index_dir, backend)[0] for _ in range(args.repeat)]
        rows.append((backend, "same query again, unchanged folder (cached query vector, no model load)",
                     statistics.median(repeat), f"min {min(repeat):.2f} s, max {max(repeat):.2f} s"))
        new = [run_codesearch(folder, index_dir, backend, f"{QUERY} number {n}")[0] for n in range(args.repeat)]
        rows.append((backend, "new query, unchanged folder (model load + query)", statistics.median(new),
                     f"min {min(new):.2f} s, max {max(new):.2f} s"))
        edited = []
        files = sorted(folder.rglob("*.py"))
        for number in range(args.repeat):
            path = files[number % len(files)]
            with open(path, "a") as handle:
                handle.write(f"\nEDITED_BY_BENCHMARK_{number} = {number}\n")
            elapsed, log = run_codesearch(folder, index_dir, backend)
            if "embedded 0 pieces" in log:
                raise SystemExit("the edit was not picked up")
            edited.append(elapsed)
        rows.append((backend, "query after editing one file (model load + re-embed it)", statistics.median(edited),
                     f"min {min(edited):.2f} s, max {max(edited):.2f} s"))
    return rows


if __name__ == "__main__":
    main()
