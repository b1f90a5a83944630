"""The BM25 side of an index: bm25s loaded without the backends it would import for nothing, and its retriever of
one generation of the pieces, saved beside the index as `bm25-t<tokenizer version>-<generation>/`."""

from __future__ import annotations

import importlib.abc
import shutil
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from c2llm_data.tokens import TOKENIZER_VERSION, code_tokens
from c2llm_plumbing.atomic import atomic_target

# bm25s imports these when installed, for retrieval backends codesearch never calls (it ranks with get_scores); jax
# also runs a top-k at import, which starts its GPU backend: seconds and gigabytes on every query of a GPU machine.
# bm25s has no public switch for either (it tries `import jax.lax` and `from numba import njit` at import).
BM25S_UNUSED_BACKENDS = ("jax", "numba")
EMPTY_TOKEN = "<empty>"  # a piece with no token still takes a row, so rows stay the pieces' id order


class _HiddenModules(importlib.abc.MetaPathFinder):
    """Makes `import NAME` (and its submodules) fail for the given top-level names, in the creating thread only:
    another thread of the process importing them meanwhile is not affected.

    Not `sys.modules[NAME] = None`, the documented way to block an import: that blocks it in every thread, and a
    server loads bm25s on one worker thread while another may be importing jax or numba for its own use."""

    def __init__(self, names):
        self.names, self.thread = frozenset(names), threading.get_ident()

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in self.names and threading.get_ident() == self.thread:
            raise ModuleNotFoundError(f"{fullname} is hidden while bm25s loads", name=fullname)
        return None


def import_bm25s():
    """The bm25s module, loaded without its jax and numba backends (unless this process has loaded them already, in
    which case they cost nothing more). The hiding lasts for the one import; bm25s then uses numpy for everything."""
    hidden = _HiddenModules(name for name in BM25S_UNUSED_BACKENDS if name not in sys.modules)
    sys.meta_path.insert(0, hidden)
    try:
        import bm25s  # a loaded bm25s returns at once; one another thread is loading is waited for
    finally:
        sys.meta_path.remove(hidden)
    return bm25s


def bm25_retriever(folder: Path, generation: int, texts: Callable[[], list[str]],
                   tokenize: Callable[[str], list[str]] = code_tokens):
    """The bm25s retriever of `generation` of the pieces in `folder`: loaded when saved, else built from `texts()`
    (every piece's text, in id order), saved, and older generations' folders deleted. A damaged saved one is built
    again."""
    bm25s = import_bm25s()
    target = folder / f"bm25-t{TOKENIZER_VERSION}-{generation}"
    if target.is_dir():
        try:
            return bm25s.BM25.load(str(target), show_progress=False, verbosity=0)
        except Exception:  # damaged: rebuild below
            shutil.rmtree(target, ignore_errors=True)
    retriever = bm25s.BM25()
    retriever.index([tokenize(text) or [EMPTY_TOKEN] for text in texts()], show_progress=False)
    with atomic_target(target) as temporary:
        retriever.save(str(temporary), show_progress=False)
        # older generations, and what a killed build left under its temporary name (".bm25-*")
        for old in [*folder.glob("bm25-*"), *folder.glob(".bm25-*")]:
            if old != temporary:
                shutil.rmtree(old, ignore_errors=True)
    return retriever
