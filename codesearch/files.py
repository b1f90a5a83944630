"""Which files of a folder get indexed, and why the others do not.

- Inside a git work tree: `git ls-files --cached --others --exclude-standard` (tracked plus untracked files
  that .gitignore does not exclude). Elsewhere: a walk that applies every .gitignore it meets (pathspec's
  gitwildmatch rules, each file relative to its own folder) and skips VCS and cache folders.
- Always skipped: any virtualenv (a folder holding `pyvenv.cfg`, whatever its name), files whose suffix is not
  code. (`--include`/`--exclude` select hits, never files: codesearch.searcher.)
- Counted as skipped, with the reason: binaries (a NUL byte in the first 8 KB), files over the size limit, files
  that cannot be read (permissions, vanished, not UTF-8 decodable is NOT a reason: bad bytes are replaced), and
  symbolic links whose target is outside the searched folder, files and folders alike (nothing outside the folder
  is ever read). A link to a file inside the folder is indexed under the link's path; a folder link is never
  entered (git lists no path below one, the walk does not follow it), as its target inside is indexed anyway.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from codesearch.chunking import CODE_SUFFIXES

DEFAULT_MAX_FILE_BYTES = 1_000_000  # larger source files are nearly always generated code or data
BINARY_SNIFF_BYTES = 8192
ALWAYS_SKIPPED_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".tox", ".nox", ".mypy_cache",
                       ".pytest_cache", ".ruff_cache", ".eggs"}


@dataclass
class Selection:
    """Files to index (relative "/"-paths) and what was skipped, by reason."""

    files: list[str] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    how: str = ""  # "git ls-files" or ".gitignore rules"
    not_code: Counter = field(default_factory=Counter)  # suffix -> files passed over as not code (".md": 3)

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1


def candidate_paths(root: Path) -> tuple[list[str], str, int]:
    """Relative paths of every non-ignored file under root, how they were listed, and how many folders could not
    be read (skipped)."""
    listed = _git_listed(root)
    if listed:  # an empty list also when the folder is itself git-ignored (a venv's site-packages): walk it
        return listed, "git ls-files", 0
    found, unreadable_folders = _walk_with_gitignore(root)
    return found, ".gitignore rules", unreadable_folders


def _is_virtualenv(folder: Path) -> bool:
    """A folder holding pyvenv.cfg, whatever its name. A folder that cannot be read is not one: its files are
    then skipped as unreadable, not the whole run."""
    try:
        return (folder / "pyvenv.cfg").is_file()
    except OSError:
        return False


def _git_listed(root: Path) -> list[str] | None:
    try:
        result = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):  # no git installed, or a hung file system
        return None
    if result.returncode != 0:  # not inside a work tree
        return None
    paths = {p for p in result.stdout.decode("utf-8", errors="surrogateescape").split("\0") if p}
    return sorted(paths)


def _walk_with_gitignore(root: Path) -> tuple[list[str], int]:
    """(paths, number of folders that could not be read)."""
    import pathspec

    found = []
    unreadable: list[OSError] = []
    # (folder relative to root, its .gitignore spec); a spec applies to paths below its folder
    specs: list[tuple[str, pathspec.GitIgnoreSpec]] = []

    def ignored(relative: str, is_dir: bool) -> bool:
        for base, spec in specs:
            if base and not relative.startswith(base + "/"):
                continue
            tail = relative[len(base) + 1:] if base else relative
            if spec.match_file(tail + "/" if is_dir else tail):
                return True
        return False

    for folder, dirnames, filenames in os.walk(root, onerror=unreadable.append):  # never follows folder links
        relative_folder = os.path.relpath(folder, root).replace(os.sep, "/")
        relative_folder = "" if relative_folder == "." else relative_folder
        specs[:] = [(base, spec) for base, spec in specs
                    if not base or relative_folder == base or relative_folder.startswith(base + "/")]
        if ".gitignore" in filenames:
            try:
                text = (Path(folder) / ".gitignore").read_text(encoding="utf-8", errors="replace")
                specs.append((relative_folder, pathspec.GitIgnoreSpec.from_lines(text.splitlines())))
            except OSError:
                pass
        prefix = relative_folder + "/" if relative_folder else ""
        dirnames[:] = sorted(d for d in dirnames
                             if d not in ALWAYS_SKIPPED_DIRS and not ignored(prefix + d, is_dir=True))
        for d in [d for d in dirnames if _is_virtualenv(Path(folder) / d)]:  # never walk a virtualenv
            dirnames.remove(d)
            found.append(prefix + d + "/pyvenv.cfg")  # so select_files counts it
        found.extend(prefix + name for name in sorted(filenames) if not ignored(prefix + name, is_dir=False))
        # folder links: never walked; listed as files, so select_files counts those that lead outside
        found.extend(prefix + d for d in sorted(dirnames) if os.path.islink(os.path.join(folder, d)))
    return found, len(unreadable)


def matches_glob(path: str, patterns: list[str]) -> bool:
    """A glob matches the relative path or its file name (`*.py`, `tests/*`, `**/migrations/*`)."""
    name = path.rsplit("/", 1)[-1]
    for pattern in patterns:
        if fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(name, pattern):
            return True
        if pattern.startswith("**/") and fnmatch.fnmatchcase(path, pattern[3:]):
            return True
        if pattern.endswith("/") and (path.startswith(pattern) or f"/{pattern}" in f"/{path}"):
            return True
    return False


def is_under(path: str, folder: str) -> bool:
    """Whether the relative "/"-path `path` is `folder` or lies in it; every path lies in "" (the whole folder)."""
    return not folder or path == folder or path.startswith(folder + "/")


def real_path(path: Path) -> Path:
    """`path` with every link followed (os.path.realpath: a link loop is left as it is, to fail when opened, where
    Path.resolve raises RuntimeError before Python 3.13)."""
    return Path(os.path.realpath(path))


def leaves(root: Path, path: Path) -> bool:
    """Whether `path`, its links followed, resolves outside the folder `root` (itself resolved)."""
    return not real_path(path).is_relative_to(root)


def select_files(root: Path, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> Selection:
    """The code files under root that should be indexed; `root` may also be a single file."""
    root = root.resolve()
    if root.is_file():
        selection = Selection(how="single file")
        paths, root = [root.name], root.parent
    else:
        paths, how, unreadable_folders = candidate_paths(root)
        selection = Selection(how=how)
        if unreadable_folders:
            selection.skipped["unreadable folders"] = unreadable_folders
    venvs: set[str] = set()
    checked_dirs: dict[str, bool] = {}

    def in_skipped_folder(path: str) -> bool:
        """Inside a virtualenv (counted) or a VCS/cache folder (git lists those when they are tracked)."""
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folder = "/".join(parts[:depth])
            if folder not in checked_dirs:
                is_venv = _is_virtualenv(root / folder)
                if is_venv:
                    venvs.add(folder)
                checked_dirs[folder] = is_venv or parts[depth - 1] in ALWAYS_SKIPPED_DIRS
            if checked_dirs[folder]:
                return True
        return False

    for path in paths:
        if in_skipped_folder(path):
            continue
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:  # a file name that is not valid UTF-8 cannot be stored or printed as such
            selection.skip("name not UTF-8")
            continue
        full = root / path
        try:
            if full.is_symlink() and leaves(root, full):
                selection.skip("links leading outside the folder")
                continue
        except OSError:  # a link loop, or a folder on the way that cannot be read
            selection.skip("unreadable")
            continue
        if not path.endswith(CODE_SUFFIXES):
            name = path.rsplit("/", 1)[-1]
            selection.not_code[name[name.rfind("."):] if "." in name[1:] else name] += 1
            continue
        try:
            size = full.stat().st_size
            if not full.is_file():
                continue
            if size > max_file_bytes:
                selection.skip(f"over {max_file_bytes:,} bytes")
                continue
            with open(full, "rb") as handle:
                head = handle.read(BINARY_SNIFF_BYTES)
        except OSError:
            selection.skip("unreadable")
            continue
        if b"\0" in head:
            selection.skip("binary")
            continue
        selection.files.append(path)
    if venvs:
        selection.skipped["virtualenvs"] = len(venvs)
    return selection
