"""Write or check a lock: the exact version of every distribution installed in a venv, as a pip constraints file.

    python locks/lock.py write LOCK     # run with the venv's python: record what it holds
    python locks/lock.py check LOCK     # run with the venv's python: fail unless it holds exactly the lock's versions
    python locks/lock.py diff LOCK      # run with the venv's python: print how it differs from the lock

Plain constraints files rather than uv or pip-tools: the lock is what a venv that passed the tests really held
(any resolver could pick otherwise), installing it needs only pip, and uv does not see the local torch wheel that
pip finds through this machine's pip configuration. The project's own editable install (c2llm) is not locked.
Standard library only (with c2llm_plumbing's lock reading and atomic write, standard library themselves): it runs in
every venv the project makes.
"""

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python locks/lock.py` from any venv, the project installed or not
    sys.path.insert(0, str(REPO_ROOT))

from c2llm_plumbing.atomic import write_atomically  # noqa: E402
from c2llm_plumbing.lockfile import installed, read_lock  # noqa: E402

HEADER = """\
# Exact versions of every package of a venv that passed its tests (Python {python}, {platform}).
# Written by `python locks/lock.py write`, through `bash locks/refresh.sh`; used by setup.sh as pip constraints.
"""


def write(path: Path) -> None:
    """Write the lock atomically (c2llm_plumbing.atomic: a temporary file in the same folder, then a rename)."""
    lines = [f"{name}=={version}\n" for name, version in sorted(installed().items())]
    header = HEADER.format(python=".".join(map(str, sys.version_info[:3])), platform=sys.platform)
    write_atomically(path, header + "".join(lines))
    print(f"wrote {path}: {len(lines)} packages")


def check(path: Path) -> None:
    """Every installed package pinned by the lock at the installed version; print what was installed."""
    pins, have = read_lock(path), installed()
    unpinned = sorted(f"{name}=={version}" for name, version in have.items() if name not in pins)
    # torch's local label (+cpu) is a build of the same release
    moved = sorted(f"{name} {version} (lock: {pins[name]})" for name, version in have.items()
                   if name in pins and version.split("+")[0] != pins[name].split("+")[0])
    if unpinned or moved:
        problems = (["not in the lock: " + ", ".join(unpinned)] if unpinned else []) + (
            ["other versions than the lock: " + ", ".join(moved)] if moved else [])
        raise SystemExit(f"error: {sys.prefix} does not match {path}: " + "; ".join(problems) +
                         ". The lock is stale: refresh it with `bash locks/refresh.sh` (and commit it).")
    print(f"{sys.prefix} matches {path}: " + " ".join(f"{name}=={version}" for name, version in sorted(have.items())))


def diff(path: Path) -> None:
    """Print each package whose version differs from the lock, is new, or is gone."""
    pins, have = read_lock(path), installed()
    changes = [f"  {name}: {pins.get(name, '-')} -> {have.get(name, '-')}" for name in sorted(pins.keys() | have.keys())
               if pins.get(name, "-").split("+")[0] != have.get(name, "-").split("+")[0]]
    print(f"{len(changes)} packages differ from {path} (lock -> this venv)" + "".join("\n" + c for c in changes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("write", "check", "diff"))
    parser.add_argument("lock", type=Path, help="the lock file, e.g. locks/dev.txt")
    args = parser.parse_args()
    if args.action != "write" and not args.lock.is_file():
        parser.error(f"{args.lock} does not exist: write it with `bash locks/refresh.sh`")
    if args.action == "write" and not args.lock.parent.is_dir():
        parser.error(f"{args.lock.parent} is not a folder")
    {"write": write, "check": check, "diff": diff}[args.action](args.lock)


if __name__ == "__main__":
    main()
