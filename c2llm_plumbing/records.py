"""The one record of a run: a JSON file (command, commit, lock, machine, load, metrics) from which docs are rendered.

- `write_record`: a run's figures as DIR/NAME.json, atomically; benchmarks (`python -m benchmarks.render` renders their
  tables), the package miner and the experiments' summaries all write through it.
- `commit_line`, `lock_record`, `hardware_line`, `load_line`: the parts of a record, for a run that takes them at its
  start (a long run's commit) or during it (the load average).
- `portable_arguments`: a command line with no machine's paths, as records keep it.

Records describe runs from a clone: the commit is the clone's, the lock the closest of its locks/*.txt.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

from c2llm_plumbing.atomic import write_atomically
from c2llm_plumbing.lockfile import installed, read_lock, versions_differing

REPO_ROOT = Path(__file__).resolve().parents[1]
# The records the docs render from: their changes are a run's output, not uncommitted code (commit_line).
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"


def hardware_line() -> str:
    """CPU model (as lscpu prints it), core count, bf16 support, the CUDA GPU if torch sees one, software versions and
    threads."""
    import sentence_transformers
    import torch
    import transformers

    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = re.search(r"model name\s*:\s*(.+)", cpuinfo)
    flags = set(re.search(r"flags\s*:\s*(.+)", cpuinfo).group(1).split()) if "flags" in cpuinfo else set()
    bf16 = ", ".join(flag for flag in ("avx512_bf16", "amx_bf16") if flag in flags) or "no bf16 instructions"
    return (
        f"{model.group(1).strip() if model else platform.processor()}, {os.cpu_count()} cores ({bf16}); "
        + (f"GPU {torch.cuda.get_device_name(0)}; " if torch.cuda.is_available() else "")
        + f"torch {torch.__version__} with {torch.get_num_threads()} threads, transformers {transformers.__version__}, "
        f"sentence-transformers {sentence_transformers.__version__}, Python {platform.python_version()}"
    )


def load_line(label: str) -> str:
    return f"load average at {label}: " + " / ".join(f"{value:.1f}" for value in os.getloadavg()) + " (1/5/15 min)"


def commit_line() -> str:
    """The commit the code ran from, with "+ uncommitted changes" when tracked files other than the records (the
    outputs of earlier runs, benchmarks/results) differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "HEAD") or "unknown (not a git checkout)"
    return commit + (" + uncommitted changes" if git("status", "--porcelain", "--untracked-files=no", "--", ".",
                                                               f":!{RESULTS_DIR.relative_to(REPO_ROOT)}") else "")


def lock_record() -> dict:
    """The committed lock (locks/*.txt) closest to this venv: its path, sha256 and how many packages differ."""
    have = installed()

    def differences(lock: Path) -> int:
        return versions_differing(read_lock(lock), have)

    closest = min(sorted((REPO_ROOT / "locks").glob("*.txt")), key=differences)
    return {"file": closest.relative_to(REPO_ROOT).as_posix(),
            "sha256": hashlib.sha256(closest.read_bytes()).hexdigest(), "packages_differing": differences(closest)}


def portable_arguments(arguments: list[str]) -> list[str]:
    """Command-line arguments with no machine's paths: an absolute path inside the repository or the data folder
    beside it (../shared) becomes relative to the repository; any other becomes a placeholder named after its option
    (`--work-dir /tmp/x` -> `--work-dir WORK_DIR`), since it names a folder of that machine only."""
    portable = []
    for previous, argument in zip(["", *arguments], arguments):
        if argument.startswith("/"):
            resolved = Path(argument).resolve()
            if resolved.is_relative_to(REPO_ROOT) or resolved.is_relative_to(REPO_ROOT.parent / "shared"):
                argument = os.path.relpath(resolved, REPO_ROOT)
            else:
                argument = previous.lstrip("-").replace("-", "_").upper() if previous.startswith("--") else "PATH"
        portable.append(argument)
    return portable


def write_record(name: str, metrics: dict, loads: list[str], results_dir: Path = RESULTS_DIR,
                 argv: list[str] | None = None, commit: str | None = None) -> Path:
    """Write `results_dir/NAME.json`: the command (`argv`, default this process's), commit (`commit_line()` taken
    at the run's start for a long run, else now), lock, machine, the `load_line`s taken during the run, and
    `metrics`. Atomic (c2llm_plumbing.atomic), so a killed run leaves the previous record; a newer run replaces it
    (older ones stay in git history)."""
    argv = sys.argv if argv is None else argv
    script = Path(argv[0])
    program = (["python", script.resolve().relative_to(REPO_ROOT).as_posix()]
               if script.suffix == ".py" and script.resolve().is_relative_to(REPO_ROOT) else ["python", *argv[:1]])
    record = {"name": name, "command": shlex.join([*program, *portable_arguments(argv[1:])]),
              "commit": commit or commit_line(),
              "lock": lock_record(), "machine": hardware_line(), "load": loads, "metrics": metrics}
    path = Path(results_dir) / f"{name}.json"
    write_atomically(path, json.dumps(record, indent=1) + "\n")
    return path
