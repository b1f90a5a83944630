"""The one atomic write: a reader, or a rerun after a kill, sees the old file or folder or the new one, never half.

- `atomic_target(path)`: a temporary name beside `path` to write a file or a folder at (by hand, or by a library
  that takes a path: `np.savez`, `torch.onnx.export`, `save_file`); when the block ends it is renamed over `path`
  (os.replace), and when the block raises it is removed and `path` stays as it was.
- `write_atomically(path, content)`: text or bytes through `atomic_target`.

The temporary name is `.NAME-<random>` in `path`'s own folder: the same file system, so the rename is atomic; hidden,
so a listing of the folder's results does not take it for one; and findable after a kill (`.NAME-*`, see
train.checkpoints.remove_interrupted_writes). `durable=True` also flushes the content to disk before the rename, so
a power loss cannot leave the new name over empty blocks (training's files, which a resumed run trusts).
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# 64 random bits: two writers of one target (two runs, two threads) never draw the same temporary name.
TEMPORARY_NAME_RANDOM_BYTES = 8


def temporary_sibling(path: Path, suffix: str = "") -> Path:
    """An unused hidden name in `path`'s folder, `.NAME-<random><suffix>` (`suffix` for a library that insists on an
    ending: np.savez appends ".npz" to a name without it)."""
    return path.with_name(f".{path.name}-{secrets.token_hex(TEMPORARY_NAME_RANDOM_BYTES)}{suffix}")


def flush_to_disk(path: Path) -> None:
    """fsync the file at `path`, or every file under the folder at `path`."""
    for file in sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]:
        with open(file, "rb") as handle:
            os.fsync(handle.fileno())


def remove(path: Path) -> None:
    """Remove the file or folder at `path`, if there is one."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def atomic_target(path: Path, suffix: str = "", durable: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside `path` (nothing there yet; its folder made); write a file or a folder at it. On
    leaving the block it replaces `path` (a folder already at `path` is removed first, as os.replace cannot replace a
    folder that holds files); if the block raises, it is removed and `path` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_sibling(path, suffix)
    try:
        yield temporary
        if durable:
            flush_to_disk(temporary)
        if temporary.is_dir() and path.is_dir():
            shutil.rmtree(path)
        os.replace(temporary, path)
    finally:
        remove(temporary)  # nothing there once renamed


def write_atomically(path: Path, content: str | bytes, durable: bool = False) -> None:
    """Replace `path` with `content` (str: written as UTF-8) through `atomic_target`. The file gets the permissions
    `open` gives a new file (the umask's), not a temporary file's owner-only ones: results are meant to be read."""
    with atomic_target(path, durable=durable) as temporary:
        if isinstance(content, bytes):
            with open(temporary, "xb") as handle:
                handle.write(content)
        else:
            with open(temporary, "x", encoding="utf-8") as handle:
                handle.write(content)
