"""The project's one docstring -> code miner: every function of a Python module with its docstring summary and its
code with and without the docstring, read with `ast` (nothing is imported or executed).

Pure standard library, so the speed benchmarks and experiments use it without the training stack; training data
(`train.data`) builds its `python_docstrings` pairs on it.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass


def function_without_docstring(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The function's source lines without its docstring statement, dedented."""
    docstring = node.body[0]
    kept = lines[node.lineno - 1 : docstring.lineno - 1] + lines[docstring.end_lineno : node.end_lineno]
    return textwrap.dedent("\n".join(kept)).strip("\n")


@dataclass(frozen=True)
class PythonFunction:
    """One function or method of a module, as the docstring -> code miners use it."""

    node: ast.FunctionDef | ast.AsyncFunctionDef
    code: str  # def line to last line (decorators left out), dedented
    summary: str | None  # first docstring paragraph, whitespace folded; None when undocumented
    code_without_docstring: str | None  # None when the docstring cannot be cut out (see python_functions)


def python_functions(source: str) -> Iterator[PythonFunction]:
    """Every function and method of ``source`` in ``ast.walk`` order: the project's one docstring -> code miner.

    Linear in the module's size (its lines are split once). A function that is only a docstring leaves no code to
    retrieve, and a one-line ``def f(): "doc"`` cannot be split: both get ``code_without_docstring=None``.
    Raises SyntaxError (and ValueError for NUL bytes) like ``ast.parse``.
    """
    tree = ast.parse(source)
    lines = source.splitlines()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.end_lineno is None:
            continue
        code = textwrap.dedent("\n".join(lines[node.lineno - 1 : node.end_lineno])).strip("\n")
        docstring = ast.get_docstring(node)
        summary = " ".join(docstring.split("\n\n")[0].split()) if docstring and docstring.strip() else None
        splittable = docstring is not None and len(node.body) > 1 and node.body[0].lineno != node.lineno
        yield PythonFunction(node, code, summary, function_without_docstring(lines, node) if splittable else None)
