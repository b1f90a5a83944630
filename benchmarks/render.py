"""Write the results tables of the docs from the records in benchmarks/results/, or check that they match.

    python -m benchmarks.render           # rewrite every table between render markers
    python -m benchmarks.render --check   # exit 1, naming each file, when committed Markdown differs

A table lives between two comment lines in any Markdown page of the repository:

    <!-- render: offline_quality -->
    (written by this command: the table, then a line naming its record and the record's command)
    <!-- /render -->

The name after `render:` is a table some module declares beside the code that writes its records: a module-level
`TABLES = {"offline_quality": (("offline_quality",), offline_quality), ...}` (table name -> the records it reads,
`benchmarks/results/NAME.json` written by `benchmarks.common.write_record`, in the order the function takes them;
the function, which returns the Markdown). `TABLE_MODULES` lists those modules; this file holds only what every
table shares: the markers, the line naming each record, `--check` and the errors. It imports those modules, so it
runs in the development install (`bash setup.sh --dev`). Everything between the markers is replaced, so edit the
record's run, never the table.
"""

import argparse
import importlib
import json
import os
import re
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/render.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
# Where tables may live: the pages of the repository (not virtual environments or the data folders).
PAGE_GLOBS = ("*.md", "docs/*.md", "benchmarks/*.md", "benchmarks/results/*.md", "evaluation/*.md",
              "codesearch/*.md", "codesearch/reports/*.md", "train/*.md", "experiments/**/*.md", "default_model/*.md")
# Markers are whole lines, so a page can mention them in running text.
BLOCK = re.compile(r"^(?P<open><!-- render: (?P<name>[\w-]+) -->\n)(?P<body>.*?)^(?P<close><!-- /render -->)$",
                   re.S | re.M)
OPENING = re.compile(r"^<!-- render: ?(?P<name>[^>]*?) ?-->$", re.M)
COMMIT_CHARS = 7
# The modules that declare tables (`TABLES`), each beside the code that writes the records its tables read; the
# miner and the published reference write theirs outside benchmarks/.
TABLE_MODULES = ("benchmarks.attention_variants", "benchmarks.codesearch_encoder",
                 "benchmarks.codesearch_first_answer", "benchmarks.codesearch_mcp",
                 "benchmarks.codesearch_package_places", "benchmarks.codesearch_place_order",
                 "benchmarks.codesearch_precision",
                 "benchmarks.codesearch_quality", "benchmarks.codesearch_semble", "benchmarks.codesearch_speed",
                 "benchmarks.codesearch_static_twin",
                 "benchmarks.codesearch_store", "benchmarks.compact_embeddings",
                 "benchmarks.default_model_candidates", "benchmarks.encode_speed",
                 "benchmarks.evaluation_record", "benchmarks.gpu", "benchmarks.profile_encode",
                 "benchmarks.serving_corpus", "benchmarks.serving_load", "benchmarks.train_speed",
                 "train.mining_packages.run", "tests.published_reference")

Table = tuple[tuple[str, ...], Callable[..., str]]


class RenderError(ValueError):
    """A page or record that cannot be rendered: the message names the file and the fix."""


@cache
def tables() -> dict[str, Table]:
    """Every table the modules of `TABLE_MODULES` declare, by name; a name declared twice is an error."""
    found: dict[str, Table] = {}
    owners: dict[str, str] = {}
    for module_name in TABLE_MODULES:
        for name, table in importlib.import_module(module_name).TABLES.items():
            if name in found:
                raise RenderError(f"table {name!r} is declared by both {owners[name]} and {module_name}: rename one "
                                  "(a page's marker names exactly one table).")
            found[name], owners[name] = table, module_name
    return found


def shown(path: Path) -> str:
    """A path as the messages name it: relative to the repository where it lies inside."""
    return path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else str(path)


def read_record(name: str, results_dir: Path) -> dict:
    path = results_dir / f"{name}.json"
    if not path.is_file():
        raise RenderError(f"{shown(path)} does not exist: run the benchmark that writes it "
                          "(benchmarks/README.md lists them) or restore it from git history.")
    return json.loads(path.read_text(encoding="utf-8"))


def source_line(record: dict, record_path: Path, page: Path) -> str:
    """Below each table: the record it comes from (machine and load are in it), its commit and command; a record
    transcribed from a run's printed report (``converted_from``) says so, so no reader takes it for a fresh run."""
    link = Path(os.path.relpath(record_path, page.parent)).as_posix()
    commit = record["commit"][:COMMIT_CHARS] + (" + uncommitted changes" if "uncommitted" in record["commit"] else "")
    transcribed = ", transcribed from its printed report, not re-run" if "converted_from" in record else ""
    return f"From [{record_path.name}]({link}) (commit {commit}{transcribed}): `{record['command']}`"


def render_page(text: str, page: Path, results_dir: Path = RESULTS_DIR) -> str:
    """`text` with every render block rewritten from its record."""
    for opening in OPENING.finditer(text):
        if opening.group("name") not in tables():
            raise RenderError(f"{shown(page)}: unknown table {opening.group('name')!r} in a render "
                              f"marker; the tables are: {', '.join(sorted(tables()))}.")
    if len(BLOCK.findall(text)) != len(OPENING.findall(text)):
        raise RenderError(f"{shown(page)}: a `<!-- render: NAME -->` line has no "
                          "`<!-- /render -->` line after it: add one where the table ends.")

    def rendered(block: re.Match) -> str:
        record_names, table = tables()[block.group("name")]
        records = [read_record(name, results_dir) for name in record_names]
        sources = [source_line(record, results_dir / f"{name}.json", page)
                   for name, record in zip(record_names, records)]
        body = table(*records) + "\n\n" + "<br>\n".join(sources)
        return block.group("open") + body + "\n" + block.group("close")

    return BLOCK.sub(rendered, text)


def pages(root: Path = REPO_ROOT) -> list[Path]:
    return sorted({path for pattern in PAGE_GLOBS for path in root.glob(pattern) if path.is_file()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.render", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each page whose tables differ from the records")
    args = parser.parse_args(argv)
    stale = []
    try:
        for page in pages():
            text = page.read_text(encoding="utf-8")
            new = render_page(text, page)
            if new == text:
                continue
            stale.append(page.relative_to(REPO_ROOT).as_posix())
            if not args.check:
                temporary = page.with_name(f".{page.name}.render")
                temporary.write_text(new, encoding="utf-8")
                temporary.replace(page)
    except RenderError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.check and stale:
        print(f"error: {', '.join(stale)}: the tables differ from the records in benchmarks/results/. Run "
              "`python -m benchmarks.render` and commit the pages (edit a record's run, never a rendered table).",
              file=sys.stderr)
        return 1
    print(("rewrote " + ", ".join(stale)) if stale else "every rendered table matches its record")
    return 0


if __name__ == "__main__":
    sys.exit(main())
