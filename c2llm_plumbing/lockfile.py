"""A lock (locks/*.txt: one `name==version` a line, pip constraints) and what the running environment holds.

Read here, written by locks/lock.py; records name the lock closest to the environment they ran in (records.py).
Standard library only: locks/lock.py runs it in every venv the project makes.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

PROJECT = "c2llm"  # the project's own (editable) install, which no lock pins


def canonical(name: str) -> str:
    """PEP 503 name: 'Sentence_Transformers' and 'sentence-transformers' are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed() -> dict[str, str]:
    """{canonical name: version} of the running interpreter's environment, the project itself left out."""
    found = {canonical(dist.metadata["Name"]): dist.version for dist in metadata.distributions()
             if dist.metadata["Name"]}
    found.pop(PROJECT, None)
    return found


def read_lock(path: Path) -> dict[str, str]:
    """{canonical name: version} of the lock at `path`; a line that is not `name==version` ends the command."""
    pins = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, separator, version = line.partition("==")
        if not separator or not name.strip() or not version.strip():
            raise SystemExit(f"error: {path}:{number}: {line!r} is not 'name==version'; rewrite the lock with "
                             "`bash locks/refresh.sh`.")
        pins[canonical(name.strip())] = version.strip()
    return pins


def versions_differing(pins: dict[str, str], have: dict[str, str]) -> int:
    """How many packages are pinned at another release than installed, or on one side only (torch's local label,
    +cpu, is a build of the same release)."""
    return sum(pins.get(name, "-").split("+")[0] != have.get(name, "-").split("+")[0]
               for name in pins.keys() | have.keys())
