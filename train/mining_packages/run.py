"""The miner's command: packages by name -> cached documented functions -> filtered pairs per language + report.

    python -m train.mining_packages --output DIR --packages-file train/mining_packages/first-set.txt
    python -m train.mining_packages --output DIR go:debian:golang-github-pkg-errors-dev rust:npm:...

1. check every input (languages, package names, exclusion list, benchmark folders) before any work;
2. per package, unless its cache file exists: look it up, refuse an excluded upstream, download, unpack, find
   its documented functions, write ``DIR/cache/packages/...json`` (atomically: a killed run resumes there);
3. per language: the pair filters, the benchmark text filter, duplicates, templates, the per-package cap;
   ``DIR/pairs/LANGUAGE.jsonl`` in the training schema (plus package, version, licence, path);
4. ``DIR/report.json`` (per language: packages, pairs, drops by reason), optionally a record in
   ``benchmarks/results/`` for the table in train/README.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

from c2llm_plumbing.atomic import write_atomically

from ..checkpoints import write_json_atomic
from ..decontaminate import BenchmarkIndex, ExcludeListError, Exclusions, benchmark_folders, norm_code_keys
from .extract import LANGUAGES, DocumentedFunction, documented_functions
from .fetch import DEBIAN_MIRROR, AptConfig, FetchError, NetworkError, Npm, PackageSpec, os_release_codename
from .filters import pair_drop_reason, query_from_doc, select_pairs

logger = logging.getLogger("train.mining_packages")

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_EXCLUDE = REPO_ROOT.parent / "shared" / "data" / "mining-exclude.txt"
DEFAULT_BEIR_ROOT = REPO_ROOT.parent / "shared" / "data" / "benchmarks"
EXTRACT_VERSION = 4  # stored in each package's cache file: a change to extraction refetches the package
UNKNOWN_LICENSE = "unknown"  # neither the registry nor the package's files name one (say so rather than "")
SOURCE_NAME = "package_pairs"  # the training source name of every mined pair
# Folders of code copied in from another project: its upstream is not the package's, so exclusion cannot see it.
VENDORED_FOLDERS = {"vendor", "third_party", "third-party", "thirdparty", "node_modules", "external", "deps"}
# Folders of built code (npm packages ship a transpiled copy beside the source, or only it).
BUILD_OUTPUT_FOLDERS = {"dist", "build", "umd", "cjs", "esm", "es", "bundles", "out", "compiled"}
MAX_FILE_BYTES = 1_000_000  # bigger source files are generated (tables, bundles)
MAX_LINE_CHARS = 2_000  # a line this long means minified or generated code
REASON_BENCHMARK_OVERLAP = "overlaps a benchmark text"


class InputError(ValueError):
    """Bad input found before any work; the message names the problem and the fix."""


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m train.mining_packages", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("packages", nargs="*", metavar="LANGUAGE:REGISTRY:NAME",
                        help="packages to mine, e.g. go:debian:golang-github-pkg-errors-dev, typescript:npm:date-fns")
    parser.add_argument("--packages-file", type=Path, action="append", default=[], metavar="FILE",
                        help="a file of LANGUAGE:REGISTRY:NAME lines (# comments allowed); repeatable")
    parser.add_argument("--language", action="append", default=[], metavar="LANGUAGE",
                        help=f"mine only these languages of the list (repeatable): {', '.join(LANGUAGES)}")
    parser.add_argument("--output", type=Path, required=True, metavar="DIR",
                        help="folder of the cache (DIR/cache), the pairs (DIR/pairs) and DIR/report.json")
    parser.add_argument("--exclude", type=Path, default=DEFAULT_EXCLUDE, metavar="FILE",
                        help="repositories no pair may come from, owner/name a line (default: "
                             "../shared/data/mining-exclude.txt)")
    parser.add_argument("--benchmark-data", type=Path, default=REPO_ROOT / "benchmarks" / "data", metavar="DIR",
                        help="the codesearch benchmark files whose projects and queries are excluded too "
                             "(default: benchmarks/data)")
    parser.add_argument("--decontaminate", type=Path, action="append", default=None, metavar="DIR",
                        help="BEIR benchmark folder (or folder of them) whose queries and documents no pair may "
                             "equal (train.decontaminate); repeatable (default: ../shared/data/benchmarks)")
    parser.add_argument("--debian-release", default=None, metavar="CODENAME",
                        help="Debian release whose packages are fetched (default: the system's, /etc/os-release)")
    parser.add_argument("--debian-mirror", default=DEBIAN_MIRROR, metavar="URL",
                        help=f"Debian mirror for the package lists and downloads (default: {DEBIAN_MIRROR})")
    parser.add_argument("--refresh-lists", action="store_true",
                        help="fetch the Debian package lists again (default: once per cache)")
    parser.add_argument("--record", default=None, metavar="NAME",
                        help="also write the report as the record benchmarks/results/NAME.json (train/README.md's "
                             "table is rendered from the record package_pairs)")
    return parser.parse_args(argv)


def read_specs(arguments: argparse.Namespace) -> list[PackageSpec]:
    """Every package of the command line and the packages files, in order, once; only ``--language`` ones."""
    unknown = [language for language in arguments.language if language not in LANGUAGES]
    if unknown:
        raise InputError(f"--language {unknown[0]}: unknown language; choose one of {', '.join(LANGUAGES)}")
    lines = [(text, "command line") for text in arguments.packages]
    for path in arguments.packages_file:
        try:
            content = path.read_text(encoding="utf-8")
        except OSError as error:
            raise InputError(f"--packages-file {path}: {error.strerror}; give a file of LANGUAGE:REGISTRY:NAME "
                             "lines") from error
        lines += [(line.split("#", 1)[0], f"{path}:{number}") for number, line in enumerate(content.splitlines(), 1)
                  if line.split("#", 1)[0].strip()]
    specs = {}
    for text, where in lines:
        try:
            spec = PackageSpec.parse(text, list(LANGUAGES))
        except ValueError as error:
            raise InputError(f"{where}: {error}") from error
        if not arguments.language or spec.language in arguments.language:
            specs.setdefault(spec.key, spec)
    if not specs:
        raise InputError("no packages to mine: give LANGUAGE:REGISTRY:NAME arguments or --packages-file FILE "
                         "(and check --language)")
    return list(specs.values())


def cache_path(output: Path, spec: PackageSpec) -> Path:
    """One file per (language, registry, name): an npm package with Kotlin and Swift sources is mined once for each."""
    return output / "cache" / "packages" / spec.language / spec.registry / (spec.name.replace("/", "__") + ".json")


def source_files(tree: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """The files of ``tree`` with one of ``suffixes``, outside vendored folders, not generated-sized."""
    files = []
    for folder, subfolders, names in os.walk(tree):
        subfolders[:] = sorted(name for name in subfolders if name.lower() not in VENDORED_FOLDERS)
        for name in sorted(names):
            path = Path(folder) / name
            if name.endswith(suffixes) and not name.endswith((".min.js", ".d.ts")) and path.is_file() \
                    and path.stat().st_size <= MAX_FILE_BYTES:  # fmt: skip
                files.append(path)
    return files


def documented_in_tree(language_name: str, tree: Path) -> tuple[list[tuple[str, DocumentedFunction]], int]:
    """((path from the tree's root, documented function) of every file the miner reads, number of files read)."""
    language = LANGUAGES[language_name]
    suffixes = tuple(language.grammars)
    functions, files = [], source_files(tree, suffixes)
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        if any(len(line) > MAX_LINE_CHARS for line in text.splitlines()):
            continue
        suffix = next(suffix for suffix in suffixes if path.name.endswith(suffix))
        relative = path.relative_to(tree).as_posix()
        functions.extend((relative, function) for function in documented_functions(language, suffix, text))
    return functions, len(files)


def mine_tree(spec: PackageSpec, tree: Path) -> tuple[list[dict], int]:
    """(documented functions of the package's files, number of files read)."""
    found, files = documented_in_tree(spec.language, tree)
    return [{"path": path, "line": function.line, "name": function.name, "doc": function.doc, "code": function.code}
            for path, function in found], files


class Registries:
    """The registry clients, made on first use (apt's package lists are fetched only when a Debian package is asked
    for)."""

    def __init__(self, cache: Path, release: str | None, mirror: str, refresh_lists: bool):
        self.cache = cache
        self.release = release
        self.mirror = mirror
        self.refresh_lists = refresh_lists
        self.apt: AptConfig | None = None
        self.npm = Npm(cache / "npm")

    def client(self, spec: PackageSpec):
        if spec.registry == "npm":
            return self.npm
        if self.apt is None:
            self.apt = AptConfig(self.cache / "apt", self.release or os_release_codename(), self.mirror)
            logger.info("apt: package lists of Debian %s under %s", self.apt.release, self.apt.root)
            self.apt.prepare(refresh=self.refresh_lists)
        return self.apt


def mine_package(spec: PackageSpec, output: Path, registries: Registries, exclusions: Exclusions) -> dict:
    """The package's cache record, from the cache or fetched now (and cached). Raises FetchError."""
    path = cache_path(output, spec)
    if path.exists():
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached.get("extract_version") == EXTRACT_VERSION:
            return cached
    client = registries.client(spec)
    info = client.lookup(spec)
    record = {"spec": spec.key, "extract_version": EXTRACT_VERSION, "files": 0, "functions": []}
    refusal = exclusions.refusal(spec.name, info.upstream_urls)
    if refusal is None:
        work = output / "cache" / "work" / path.stem
        shutil.rmtree(work, ignore_errors=True)  # what a killed run left
        try:
            tree = client.fetch(spec, work, tuple(LANGUAGES[spec.language].grammars), info)
            refusal = exclusions.refusal(spec.name, info.upstream_urls)  # debian/copyright, package.json
            if refusal is None:
                record["functions"], record["files"] = mine_tree(spec, tree)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    record.update(version=info.version, license=info.license or UNKNOWN_LICENSE,
                  upstream_urls=sorted(set(info.upstream_urls)), refused=refusal)
    write_json_atomic(path, record)
    return record


def is_build_output(path: str) -> bool:
    return any(part.lower() in BUILD_OUTPUT_FOLDERS for part in path.split("/")[:-1])


def package_pairs(record: dict, spec: PackageSpec) -> list[dict]:
    """A package's functions as training rows (query cut from the doc), before any filter; sources before build
    outputs, so that of a doc found in both the source's function is the one kept."""
    functions = sorted(record["functions"], key=lambda function: (is_build_output(function["path"]),
                                                                  function["path"], function["line"]))
    return [{"query": query_from_doc(function["doc"], function["name"]), "positive": function["code"],
             "source": SOURCE_NAME, "language": spec.language, "package": spec.key, "version": record["version"],
             "license": record["license"], "path": function["path"], "name": function["name"]}
            for function in functions]


def language_report(spec_records: list[tuple[PackageSpec, dict | None, str | None]], index: BenchmarkIndex,
                    exclusions: Exclusions) -> tuple[list[dict], dict]:
    """(kept pairs, report) of one language's packages: each (spec, cache record or None, fetch error or None)."""
    report = {"packages": len(spec_records), "packages_mined": 0, "refused": {}, "failed": {}, "functions": 0,
              "pairs": 0, "dropped": Counter(), "pairs_per_package": {}}
    candidates = []
    for spec, record, error in spec_records:
        if record is None:
            report["failed"][spec.key] = error
            continue
        refusal = exclusions.refusal(spec.name, record["upstream_urls"]) or record.get("refused")
        if refusal:  # judged again on every run: the exclusion list may have grown since the package was cached
            report["refused"][spec.key] = refusal
            continue
        report["packages_mined"] += 1
        report["functions"] += len(record["functions"])
        for pair in package_pairs(record, spec):
            reason = pair_drop_reason(pair["query"], pair["positive"])
            if reason is None and index.overlap_reason(pair["query"], pair["positive"],
                                                       code_keys=norm_code_keys(pair["positive"])):
                reason = REASON_BENCHMARK_OVERLAP
            if reason is None:
                candidates.append(pair)
            else:
                report["dropped"][reason] += 1
    kept, dropped = select_pairs(candidates)
    report["dropped"].update(dropped)
    report["dropped"] = dict(report["dropped"].most_common())
    report["pairs"] = len(kept)
    report["pairs_per_package"] = dict(Counter(pair["package"] for pair in kept).most_common())
    return kept, report


def cpu_seconds() -> float:
    """User + system CPU time of this process and the registry clients it ran (apt, dpkg-deb, npm)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    arguments = parse_arguments(argv)
    try:  # 1. inputs
        specs = read_specs(arguments)
        if arguments.output.exists() and not arguments.output.is_dir():
            raise InputError(f"--output {arguments.output} is a file; give a folder (it is created if missing)")
        exclusions = Exclusions.load(arguments.exclude, arguments.benchmark_data)
        folders = benchmark_folders(arguments.decontaminate or [DEFAULT_BEIR_ROOT])
        logger.info("reading the texts of %d benchmark folders to decontaminate against", len(folders))
        index = BenchmarkIndex(folders)
        index.add_texts(exclusions.query_texts)
    except (InputError, ExcludeListError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    output = arguments.output
    if arguments.record:  # the project's record format (command, commit, lock, machine); the commit of the start
        from benchmarks.common import commit_line, load_line, write_record

        commit = commit_line()
    registries = Registries(output / "cache", arguments.debian_release, arguments.debian_mirror,
                            arguments.refresh_lists)
    started, started_cpu = time.monotonic(), cpu_seconds()
    results: dict[str, tuple[dict | None, str | None]] = {}
    for number, spec in enumerate(specs, 1):  # 2. packages
        package_start = time.monotonic()
        try:
            record, error = mine_package(spec, output, registries, exclusions), None
        except NetworkError as network_error:
            print(f"error: {network_error}", file=sys.stderr)
            return 1
        except FetchError as fetch_error:
            record, error = None, str(fetch_error)
        results[spec.key] = (record, error)
        outcome = error or (f"refused: {record['refused']}" if record.get("refused") else
                            f"{len(record['functions'])} documented functions in {record['files']} files")
        logger.info("[%d/%d] %s: %s (%.1f s)", number, len(specs), spec.key, outcome,
                    time.monotonic() - package_start)
    report = {"languages": {}, "totals": Counter()}
    for language in LANGUAGES:  # 3. pairs
        spec_records = [(spec, *results[spec.key]) for spec in specs if spec.language == language]
        if not spec_records:
            continue
        kept, language_figures = language_report(spec_records, index, exclusions)
        write_atomically(output / "pairs" / f"{language}.jsonl",
                         "".join(json.dumps(pair, ensure_ascii=False) + "\n" for pair in kept), durable=True)
        report["languages"][language] = language_figures
        report["totals"].update(packages=language_figures["packages"], pairs=language_figures["pairs"],
                                functions=language_figures["functions"])
    report["totals"] = dict(report["totals"])
    report["seconds"] = round(time.monotonic() - started, 1)
    report["cpu_seconds"] = round(cpu_seconds() - started_cpu, 1)
    write_json_atomic(output / "report.json", report)  # 4. report
    for language, figures in report["languages"].items():
        logger.info("%s: %d pairs from %d of %d packages", language, figures["pairs"], figures["packages_mined"],
                    figures["packages"])
    if arguments.record:
        path = write_record(arguments.record, report, [load_line("the end")], commit=commit,
                            argv=["-m", "train.mining_packages", *(sys.argv[1:] if argv is None else argv)])
        logger.info("record: %s", path)
    logger.info("pairs: %s; report: %s", output / "pairs", output / "report.json")
    return 0


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from c2llm_data.markdown import markdown_table  # noqa: E402


def package_pairs_table(record: dict) -> str:
    """The package-source miner's report: per language, packages mined of those listed (refused and failed ones
    counted apart), documented functions found, pairs kept, and the drops by reason (largest first)."""
    rows = []
    for language, figures in record["metrics"]["languages"].items():
        dropped = "; ".join(f"{reason}: {count:,}" for reason, count in figures["dropped"].items()) or "none"
        rows.append([language, f"{figures['packages_mined']} of {figures['packages']}", str(len(figures["refused"])),
                     str(len(figures["failed"])), f"{figures['functions']:,}", f"**{figures['pairs']:,}**", dropped])
    totals = record["metrics"]["totals"]
    rows.append(["all", str(totals["packages"]), "", "", f"{totals['functions']:,}", f"**{totals['pairs']:,}**", ""])
    table = markdown_table(["language", "packages mined", "refused (upstream)", "failed (fetch)",
                            "documented functions", "pairs", "dropped, by reason"], rows, "lrrrrrl")
    if "cpu_seconds" not in record["metrics"]:
        return table
    seconds, cpu = record["metrics"]["seconds"], record["metrics"]["cpu_seconds"]
    return (f"{table}\n\nThe run: {seconds:,.0f} s wall, {cpu:,.0f} CPU-seconds (downloads, unpacking, parsing, "
            f"filters and the benchmark index together; {cpu / max(totals['packages'], 1):.1f} CPU-s per package).")


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "package_pairs": (("package_pairs",), package_pairs_table),
}
