"""Result files of the evaluation commands: checked before the work, written so a crash never half-writes one.

- ``refuse_folder_outputs``: a `--output`-style option naming a folder is a usage error before anything runs
  (not an IsADirectoryError after hours of evaluation).
- ``write_text_atomically``: write a temporary sibling, then rename it over the target.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def refuse_folder_outputs(parser: argparse.ArgumentParser, args: argparse.Namespace, options: tuple[str, ...]) -> None:
    """parser.error for every option in `options` whose value is an existing folder."""
    for option in options:
        path = getattr(args, option)
        if path is not None and Path(path).is_dir():
            flag = "--" + option.replace("_", "-")
            parser.error(f"{flag} {path} is a folder: give a file name, e.g. {Path(path) / 'results.json'}.")


def write_text_atomically(path: Path, text: str) -> None:
    """Write to a temporary sibling, then rename: a crash never leaves a half-written results file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
