"""Result files of the evaluation commands: checked before the work, written so a crash never half-writes one.

- ``check_output_files``: a `--output`-style option naming a folder, a place that cannot take a file, or an existing
  file that is not an earlier result of the same command is a usage error before anything runs (not an
  IsADirectoryError after hours of evaluation, nor a benchmark's qrels.tsv overwritten with a result).
- ``is_json_of_numbers``: whether a file's text is a results JSON, ``{name: number}`` (``depth`` 1) or
  ``{name: {metric: number}}`` (``depth`` 2).

The files are written with c2llm_plumbing.atomic's ``write_atomically`` (a temporary sibling, then a rename).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from pathlib import Path


def check_output_files(parser: argparse.ArgumentParser, args: argparse.Namespace,
                       options: dict[str, Callable[[str], bool]]) -> None:
    """parser.error for the first option in ``options`` (option name -> whether a file's text is an earlier result of
    this command) whose file cannot be written."""
    for option, is_earlier_result in options.items():
        path = getattr(args, option)
        problem = None if path is None else output_problem(Path(path), is_earlier_result)
        if problem:
            parser.error(f"--{option.replace('_', '-')} {path} {problem}")


def output_problem(path: Path, is_earlier_result: Callable[[str], bool]) -> str | None:
    """Why ``path`` cannot take a result file (None when it can), worded to follow the file's name. Folders that do not
    exist yet are made, as the write would make them."""
    if path.is_dir():
        return f"is a folder: give a file name, e.g. {path / 'results.json'}."
    if path.exists():
        try:
            earlier = is_earlier_result(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            earlier = False
        if not earlier:
            return ("exists and is not an earlier result of this command, so writing would destroy it: give a new "
                    "file name, or move the file away first.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as error:
        return f"cannot be written ({error.strerror or error}): give a file in a folder you can write to."
    return None


def is_json_of_numbers(text: str, depth: int = 1) -> bool:
    """Whether ``text`` is a JSON object of numbers (depth 1) or of such objects (depth 2)."""
    try:
        value = json.loads(text)
    except ValueError:
        return False

    def numbers(item, levels: int) -> bool:
        if levels == 0:
            return isinstance(item, int | float) and not isinstance(item, bool)
        return isinstance(item, dict) and all(numbers(inner, levels - 1) for inner in item.values())

    return numbers(value, depth)
