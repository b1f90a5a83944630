"""Keep benchmark data out of training: an index of every benchmark text, and the rows it flags.

- ``norm_text``: text compared lowercased, every run of non-alphanumerics folded to one space.
- ``norm_code_keys``: code compared without whitespace, and (when it parses) after ``ast.unparse`` with and without
  docstrings, so comments, formatting and docstrings do not hide a match.
- ``BenchmarkIndex``: the text and code keys of every query and document of some BEIR folders; a benchmark
  document's first docstring paragraph counts as a text too (a mined docstring query could equal it).
- ``benchmark_folders``: the recipe's ``data.decontaminate`` entries -> BEIR folders (a folder of folders expands).
- ``drop_overlaps``: a training Dataset without the rows the index flags, with counts per (source, reason).
- ``Exclusions``: decontamination by upstream, for miners of package sources (``train.mining_packages``): a
  package is refused when its upstream repository is listed in ``mining-exclude.txt`` (owner/name, compared
  case-insensitively) or is one the project's own benchmarks are built from (``benchmarks/data``), judged from
  what the registries say (Debian's ``Homepage``, ``Vcs-*``, ``debian/copyright``'s ``Source``,
  ``debian/upstream/metadata``; npm's ``repository`` and ``homepage``; a GitHub Pages site counts as its
  repository). Code vendored inside another package is invisible to it (the miner skips vendor folders for that
  reason). The same check refuses installed Python modules (``Exclusions.module_refusal``: the distribution's
  ``Home-page`` and ``Project-URL`` metadata) for the ``python_docstrings``/``python_topics`` training sources.

Near-duplicates (another version of the same library function, a reworded docstring) are not caught.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import json
import re
import textwrap
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
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

    def add_texts(self, texts: list[str]) -> None:
        """Count ``texts`` (queries of benchmarks that are no BEIR folder, such as codesearch's) as benchmark texts."""
        self.text_keys.update(norm_text(text) for text in texts if norm_text(text))

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
    """(rows of ``dataset`` that do not overlap the index, {source: {reason: count}} of the dropped ones); a row
    whose given hard negative overlaps goes too (a negative is trained on as much as a positive)."""
    keep, dropped = [], defaultdict(Counter)
    columns = ["query", "positive", "source"] + (["negatives"] if "negatives" in dataset.column_names else [])
    for position, row in enumerate(dataset.select_columns(columns)):
        reason = index.overlap_reason(row["query"], row["positive"])
        if reason is None and any(index.overlap_reason(negative, negative) for negative in row.get("negatives") or ()):
            reason = "negative matches a benchmark text"
        if reason is None:
            keep.append(position)
        else:
            dropped[row["source"]][reason] += 1
    counts = {source: dict(reasons) for source, reasons in dropped.items()}
    return (dataset if len(keep) == len(dataset) else dataset.select(keep)), counts


# owner/name after a forge host or npm's shorthand: github.com/o/n, git@github.com:o/n.git, github:o/n, gitlab.com/o/n
FORGE_REPOSITORY = re.compile(
    r"(?:github\.com|gitlab\.com|bitbucket\.org|codeberg\.org|sr\.ht|salsa\.debian\.org)[:/]+~?([\w.-]+)/([\w.-]+)"
    r"|^(?:github:)?([\w.-]+)/([\w.-]+)$", re.IGNORECASE)


class ExcludeListError(ValueError):
    """The exclusion list or the benchmark data cannot be read; the message names the file and the fix."""


# A project site on GitHub Pages: OWNER.github.io/NAME is the pages of OWNER/NAME; OWNER.github.io alone is most
# often the site of the owner's namesake project (rack.github.io: rack/rack), so OWNER/OWNER counts too.
GITHUB_PAGES = re.compile(r"//([\w-]+)\.github\.io(?:/([\w.-]+))?", re.IGNORECASE)


def repositories_in(urls: list[str]) -> set[str]:
    """``owner/name`` (lowercased, without ``.git``) of every forge repository the URLs name, GitHub Pages sites
    included."""
    found = set()
    for url in urls:
        for match in FORGE_REPOSITORY.finditer(url.strip()):
            owner, name = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
            name = re.sub(r"\.git$", "", name)
            found.add(f"{owner}/{name}".lower())
        for match in GITHUB_PAGES.finditer(url):
            found.add(f"{match.group(1)}/{match.group(2) or match.group(1)}".lower())
    return found


def read_exclude_list(path: Path) -> set[str]:
    """The owner/name lines of an exclusion list (``#`` comments and blank lines skipped), lowercased."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise ExcludeListError(f"cannot read the exclusion list {path}: {error.strerror}; pass --exclude FILE "
                               "(owner/name per line, e.g. ../shared/data/mining-exclude.txt)") from error
    entries = {line.strip().lower() for line in lines if line.strip() and not line.lstrip().startswith("#")}
    malformed = sorted(entry for entry in entries if entry.count("/") != 1)
    if malformed:
        raise ExcludeListError(f"{path}: {malformed[0]!r} is not owner/name; write one repository a line "
                               "(e.g. gin-gonic/gin)")
    return entries


@dataclass
class Exclusions:
    """Repositories and package names no pair may come from."""

    repositories: set[str] = field(default_factory=set)  # owner/name, lowercased
    project_names: set[str] = field(default_factory=set)  # benchmark projects by name: a repository called so
    package_names: set[str] = field(default_factory=set)  # registry package names the benchmarks were built from
    query_texts: list[str] = field(default_factory=list)  # the benchmark files' queries, for the text filter

    @classmethod
    def load(cls, exclude_file: Path, benchmark_data: Path | None) -> Exclusions:
        exclusions = cls(repositories=read_exclude_list(exclude_file))
        if benchmark_data is not None:
            exclusions.add_benchmarks(benchmark_data)
        return exclusions

    def add_benchmarks(self, folder: Path) -> None:
        """The projects behind the benchmark files of ``folder`` (benchmarks/data): each query's ``package`` and
        each held-out tree's name and the registry packages it was built from."""
        files = sorted(folder.glob("*.json*"))
        if not files:
            raise ExcludeListError(f"{folder} holds no benchmark files (*.json, *.jsonl); pass --benchmark-data "
                                   "with the repository's benchmarks/data folder")
        for path in files:
            for record in _json_records(path, whole_file_as_one=True):
                if "package" in record:
                    self.project_names.add(str(record["package"]).lower())
                for tree_name, tree in record.get("trees", {}).items():
                    self.project_names.add(tree_name.lower())
                    self.package_names.update(source["name"].lower() for source in tree.get("sources", []))
                for query in record.get("queries", []):
                    self.project_names.add(str(query.get("package", "")).lower())
        self.project_names.discard("")
        self.query_texts.extend(benchmark_query_texts(folder))

    def refusal(self, package_name: str, upstream_urls: list[str]) -> str | None:
        """Why the package may not be mined, or None."""
        if package_name.lower() in self.package_names:
            return f"{package_name} is a package a benchmark is built from"
        for repository in sorted(repositories_in(upstream_urls)):
            if repository in self.repositories:
                return f"upstream {repository} is listed in the exclusion list"
            if repository.split("/")[1] in self.project_names:
                return f"upstream {repository} is named like benchmark project {repository.split('/')[1]}"
        return None

    @functools.cached_property
    def installed_distributions(self) -> dict[str, list[str]]:
        """Top-level module -> the distributions that install it (one scan of the environment, ~0.3 s)."""
        return importlib.metadata.packages_distributions()

    def module_refusal(self, module: str) -> str | None:
        """Why an installed Python module may not be mined, or None: named like a benchmark project, or installed
        from a distribution whose upstream (its ``Home-page`` and ``Project-URL`` metadata) is refused. A module
        no distribution installs (the standard library) has no upstream to refuse."""
        top = module.split(".")[0]
        if top.lower() in self.project_names:
            return f"{top} is named like benchmark project {top.lower()}"
        for distribution in self.installed_distributions.get(top, []):
            metadata = importlib.metadata.metadata(distribution)
            urls = [metadata.get("Home-page") or ""]
            urls += [entry.split(",", 1)[-1] for entry in metadata.get_all("Project-URL") or []]
            if (reason := self.refusal(distribution, urls)) is not None:
                return f"installed from {distribution}: {reason}"
        return None


def benchmark_query_texts(folder: Path) -> list[str]:
    """The ``query`` of every record of the benchmark files in ``folder`` (``*.jsonl`` rows, ``*.json``'s
    ``queries``): what a mined doc must not equal."""
    texts = []
    for path in sorted(folder.glob("*.json*")):
        records = _json_records(path, whole_file_as_one=False)
        texts.extend(str(record["query"]) for record in records if record.get("query"))
    return texts


def _json_records(path: Path, whole_file_as_one: bool) -> list[dict]:
    """A benchmark file's records: a .jsonl file's lines; a .json file as one record, or its ``queries``."""
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        whole = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ExcludeListError(f"{path} cannot be read as benchmark data ({error}); restore it from git or pass "
                               "--benchmark-data with the repository's benchmarks/data folder") from error
    return [whole] if whole_file_as_one else whole.get("queries", [])
