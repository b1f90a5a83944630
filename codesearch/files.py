"""Which files of a folder get indexed, and why the others do not.

- Inside a git work tree: `git ls-files --cached --others --exclude-standard` (tracked plus untracked files
  that .gitignore does not exclude). Elsewhere: a walk that applies every .gitignore it meets (pathspec's
  gitwildmatch rules, each file relative to its own folder) and skips VCS and cache folders.
- Always skipped: any virtualenv (a folder holding `pyvenv.cfg`, whatever its name), files whose suffix is not
  code. (`--include`/`--exclude` select hits, never files: codesearch.searcher.)
- Counted as skipped, with the reason: binaries (a NUL byte in the first 8 KB), files over the size limit, files
  that cannot be read (permissions, vanished, not UTF-8 decodable is NOT a reason: bad bytes are replaced), and
  symbolic links whose target is outside the searched folder, files and folders alike and at any depth (a
  tracked `vendor/x.py` whose `vendor/` is now a link outside is skipped, the link counted once). A link to a file
  inside the folder is indexed under the link's path; the walk never enters a folder link (its target inside is
  indexed anyway).

Nothing outside the folder is ever read, also when the tree changes while it is read: `FolderReader` opens every
file by its link-free path inside the folder, one component at a time relative to the folder above, refusing links
(O_NOFOLLOW) at every step, and the bytes read are those of the file it opened. A link swapped in after the
selection looked makes that open fail (counted), never a read elsewhere. Hard links are files of the folder like
any other (the same file under a second name, made by someone who could already read and write it): they are read.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
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
    Path.resolve raises RuntimeError before Python 3.13). A link removed while it is being followed raises
    FileNotFoundError (realpath reads it after testing it), which callers treat as a file gone."""
    return Path(os.path.realpath(path))


LINK_OUTSIDE = "links leading outside the folder"

# Where the OS cannot open relative to a folder descriptor or refuse a link at open (Windows), FolderReader falls
# back to checking the resolved path and opening it: correct for a tree that holds still, no guard against a race.
_OPENS_RELATIVE = os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW") and hasattr(os, "O_DIRECTORY")
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO in the tree must not block the open; only regular files are read


class LeavesFolder(OSError):
    """The path, its links followed, leads outside the folder; `link` is the relative path of the link that does."""

    def __init__(self, path: str, link: str):
        super().__init__(errno.ELOOP, f"{path} leads outside the folder through the link {link}")
        self.link = link


class FolderReader:
    """Reads files of one folder, by relative "/"-path, without ever reading outside it.

    A path is first resolved (links inside the folder followed) to its link-free relative path; a path that leads
    outside raises LeavesFolder. That path is then opened one component at a time, each relative to the descriptor
    of the folder above and with O_NOFOLLOW, so a component that became a link since it was resolved fails the open
    (ELOOP/ENOTDIR) instead of being followed: what is read is what was checked. The descriptors of the folders on
    the current path are kept (at most the tree's depth), so sorted paths cost about one open each.
    Not thread-safe: one reader per thread (an index update uses its own).

        with FolderReader(root) as reader:
            data, status = reader.read("src/app.py")
    """

    def __init__(self, root: Path):
        self.root = Path(os.path.realpath(root))
        self._root_text = str(self.root)  # joined as text: pathlib's parsing cost more than the lstat per file
        self._folders: list[tuple[str, int]] = []  # (name, descriptor) from the root down to the current folder
        self._folder_paths: dict[str, str | LeavesFolder] = {}  # relative folder -> its link-free path, or why not

    def __enter__(self) -> FolderReader:
        if _OPENS_RELATIVE:
            self._root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        return self

    def __exit__(self, *exc_info) -> None:
        self._close_folders(0)
        if _OPENS_RELATIVE:
            os.close(self._root_fd)

    def inside_path(self, path: str) -> str:
        """`path` with its links (all inside the folder) resolved: the link-free relative path to open. LeavesFolder
        names the link when the file, or a folder above it, is a link whose target is outside. Only links are
        resolved (one lstat per file; folders' verdicts are cached)."""
        *folders, name = path.split("/")
        folder = self._inside_folder(folders)
        full = os.path.join(self._root_text, path)
        if not os.path.islink(full):
            return f"{folder}/{name}" if folder else name
        real = real_path(Path(full))
        if not real.is_relative_to(self.root):
            raise LeavesFolder(path, path)
        return real.relative_to(self.root).as_posix()

    def _inside_folder(self, names: list[str]) -> str:
        """The link-free relative path of the folder `names` (from the root); LeavesFolder for a link outside."""
        folder = "/".join(names)
        if folder not in self._folder_paths:
            parent = self._inside_folder(names[:-1]) if len(names) > 1 else ""
            full = os.path.join(self._root_text, folder)
            if not names:
                inside: str | LeavesFolder = ""
            elif not os.path.islink(full):
                inside = f"{parent}/{names[-1]}" if parent else names[-1]
            else:
                real = real_path(Path(full))
                inside = (real.relative_to(self.root).as_posix() if real.is_relative_to(self.root)
                          else LeavesFolder(folder, folder))
            self._folder_paths[folder] = inside
        inside = self._folder_paths[folder]
        if isinstance(inside, LeavesFolder):
            raise LeavesFolder("/".join(names), inside.link)
        return inside

    def open(self, path: str) -> int:
        """A read-only descriptor of the regular file at `path` (the caller closes it). OSError when it cannot be
        opened, is not a regular file (OSError ENODEV: a folder, a FIFO, a device), or leads outside (LeavesFolder)."""
        inside = self.inside_path(path)
        if not _OPENS_RELATIVE:
            fd = os.open(os.path.join(self._root_text, inside), os.O_RDONLY | _CLOEXEC | _NONBLOCK)
        else:
            *folders, name = inside.split("/")
            parent = self._descend(folders)
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | _CLOEXEC | _NONBLOCK, dir_fd=parent)
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            os.close(fd)
            raise OSError(errno.ENODEV, f"{path} is not a regular file")
        return fd

    def read(self, path: str, limit: int | None = None) -> tuple[bytes, os.stat_result]:
        """The bytes of the file at `path` (its first `limit` bytes, if given) and its status, from one open."""
        fd = self.open(path)
        with os.fdopen(fd, "rb") as handle:
            status = os.fstat(fd)
            return (handle.read() if limit is None else handle.read(limit)), status

    def _descend(self, folders: list[str]) -> int:
        """The descriptor of the folder `folders` (names from the root), opening what the cached chain lacks."""
        keep = 0
        while keep < min(len(folders), len(self._folders)) and self._folders[keep][0] == folders[keep]:
            keep += 1
        self._close_folders(keep)
        for name in folders[keep:]:
            parent = self._folders[-1][1] if self._folders else self._root_fd
            descriptor = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC, dir_fd=parent)
            self._folders.append((name, descriptor))
        return self._folders[-1][1] if self._folders else self._root_fd

    def _close_folders(self, keep: int) -> None:
        while len(self._folders) > keep:
            os.close(self._folders.pop()[1])


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
    leaving_links: set[str] = set()

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

    with FolderReader(root) as reader:
        for path in paths:
            try:
                path.encode("utf-8")
            except UnicodeEncodeError:  # a file name that is not valid UTF-8 cannot be stored or printed as such
                selection.skip("name not UTF-8")
                continue
            try:
                reader.inside_path(path)  # before the virtualenv test, which would look through the link
            except LeavesFolder as error:
                leaving_links.add(error.link)
                continue
            except OSError:  # the file or a link above it changed while it was resolved: gone, as if deleted
                selection.skip("unreadable")
                continue
            if in_skipped_folder(path):
                continue
            if not path.endswith(CODE_SUFFIXES):
                name = path.rsplit("/", 1)[-1]
                selection.not_code[name[name.rfind("."):] if "." in name[1:] else name] += 1
                continue
            try:
                head, status = reader.read(path, BINARY_SNIFF_BYTES)
            except LeavesFolder as error:  # became a link since inside_path looked
                leaving_links.add(error.link)
                continue
            except OSError as error:
                if error.errno != errno.ENODEV:  # not a regular file (a FIFO, a device): passed over, as a folder
                    selection.skip("unreadable")
                continue
            if status.st_size > max_file_bytes:
                selection.skip(f"over {max_file_bytes:,} bytes")
                continue
            if b"\0" in head:
                selection.skip("binary")
                continue
            selection.files.append(path)
    if leaving_links:
        selection.skipped[LINK_OUTSIDE] = len(leaving_links)
    if venvs:
        selection.skipped["virtualenvs"] = len(venvs)
    return selection
