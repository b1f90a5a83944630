"""Keep benchmark data out of training: an index of every benchmark text, and the rows it flags.

- ``norm_text``: text compared lowercased, every run of non-alphanumerics folded to one space.
- ``norm_code_keys``: code compared without whitespace, and (when it parses) after ``ast.unparse`` with and without
  docstrings, so comments, formatting and docstrings do not hide a match.
- ``BenchmarkIndex``: the text and code keys of every query and document of some BEIR folders; a benchmark
  document's first docstring paragraph counts as a text too (a mined docstring query could equal it).
- ``benchmark_folders``: the recipe's ``data.decontaminate`` entries -> BEIR folders (a folder of folders expands).
- ``drop_overlaps``: a training Dataset without the rows the index flags, with counts per (source, reason).

Near-duplicates (another version of the same library function, a reworded docstring) are not caught.
"""

from __future__ import annotations

import ast
import re
import textwrap
import warnings
from collections import Counter, defaultdict
from pathlib import Path

_NON_WORD = re.compile(r"[^0-9a-z]+")
_WS = re.compile(r"\s+")


def norm_text(text: str) -> str:
    """Lowercase, every run of non-alphanumerics -> one space."""
    return _NON_WORD.sub(" ", text.lower()).strip()


def strip_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` with the docstring of every module, class and function removed (in place)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):  # fmt: skip
                node.body = body[1:] or [ast.Pass()]
    return tree


def norm_code_keys(code: str) -> set[str]:
    """Keys under which two pieces of code count as the same: whitespace-free text, and (when it parses)
    whitespace-free ast.unparse with and without docstrings (so comments/formatting/docstrings do not matter)."""
    keys = {_WS.sub("", code)}
    tree = parse_snippet(code)
    if tree is not None:
        try:
            keys.add(_WS.sub("", ast.unparse(tree)))
            keys.add(_WS.sub("", ast.unparse(strip_docstrings(tree))))
        except (ValueError, RecursionError):
            pass
    return {key for key in keys if key}


def first_paragraph(docstring: str) -> str:
    paragraph = textwrap.dedent(docstring).strip().split("\n\n")[0]
    return _WS.sub(" ", paragraph).strip()


def parse_snippet(code: str) -> ast.AST | None:
    """Parse a code snippet as is, else dedented, else with an unindented first line and a dedented rest
    (benchmark code often looks like that), else None."""
    first, _, rest = code.partition("\n")
    for source in (code, textwrap.dedent(code), first + "\n" + textwrap.indent(textwrap.dedent(rest), "    ")):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return None


def docstring_of_code(code: str) -> str | None:
    """First docstring paragraph of the first function in ``code``, if any."""
    tree = parse_snippet(code)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            return first_paragraph(doc) if doc else None
    return None


class BenchmarkIndex:
    """Normalised code keys and text keys of every query and document of the benchmark folders."""

    def __init__(self, folders: list[Path]):
        from c2llm_data.beir import load_beir

        self.code_keys: set[str] = set()
        self.text_keys: set[str] = set()
        self.folders = [Path(folder).name for folder in folders]
        for folder in folders:
            dataset = load_beir(Path(folder))
            for text in [*dataset.queries.values(), *dataset.corpus.values()]:
                if not text.strip():
                    continue
                self.code_keys |= norm_code_keys(text)
                self.text_keys.add(norm_text(text))
                doc = docstring_of_code(text) if "def " in text else None
                if doc:
                    self.text_keys.add(norm_text(doc))
        self.text_keys.discard("")

    @classmethod
    def from_root(cls, root: Path) -> BenchmarkIndex:
        return cls(benchmark_folders([root]))

    def overlap_reason(self, query: str, positive: str, positive_with_docstring: str | None = None,
                       code_keys: set[str] | None = None) -> str | None:  # fmt: skip
        """Why this pair overlaps a benchmark, or None. code_keys: precomputed keys of the code (mining)."""
        if norm_text(query) in self.text_keys:
            return "query matches a benchmark text"
        if norm_text(positive) in self.text_keys:
            return "positive matches a benchmark text"
        if code_keys is not None:
            return "code matches a benchmark text" if code_keys & self.code_keys else None
        for text in (query, positive, positive_with_docstring):
            if text and norm_code_keys(text) & self.code_keys:
                return "code matches a benchmark text"
        return None


def benchmark_folders(entries: list[str | Path]) -> list[Path]:
    """BEIR folders named by ``entries``: a BEIR folder itself, or a folder whose BEIR subfolders all count."""
    from c2llm_data.beir import is_beir_folder

    from .args import ConfigError

    folders = []
    for entry in entries:
        path = Path(entry)
        if is_beir_folder(path):
            folders.append(path)
        elif path.is_dir() and any(is_beir_folder(child) for child in path.iterdir()):
            folders.extend(sorted(child for child in path.iterdir() if is_beir_folder(child)))
        else:
            raise ConfigError(
                f"data.decontaminate: {path} is neither a BEIR folder (queries.jsonl, corpus.jsonl, qrels.tsv) nor a "
                "folder of them."
            )
    return folders


def drop_overlaps(dataset, index: BenchmarkIndex):
    """(rows of ``dataset`` that do not overlap the index, {source: {reason: count}} of the dropped ones)."""
    keep, dropped = [], defaultdict(Counter)
    for position, row in enumerate(dataset.select_columns(["query", "positive", "source"])):
        reason = index.overlap_reason(row["query"], row["positive"])
        if reason is None:
            keep.append(position)
        else:
            dropped[row["source"]][reason] += 1
    counts = {source: dict(reasons) for source, reasons in dropped.items()}
    return (dataset if len(keep) == len(dataset) else dataset.select(keep)), counts
