"""Mine training pairs offline, deduplicate them, and drop everything that overlaps the benchmarks.

    python experiments/minilm/mine.py --out /work/cache/c2llm_minilm/data

Sources:
- docstring -> function pairs mined with `ast` from the Python standard library and this machine's
  site-packages (query: the docstring's first paragraph; positive: the function with its docstring removed);
- Java -> C# method pairs from ../shared/data/train/codexglue_java2cs_train.jsonl.

Overlap filter (against EVERY folder in ../shared/data/benchmarks, reported or not; the product's
`train.decontaminate.BenchmarkIndex`, which recipes apply with `data.decontaminate`): a pair is dropped when
- its code (normalised: docstrings and comments removed via ast.unparse, whitespace removed) equals the
  normalised code of any benchmark document or query (also tried with the docstring kept), or
- its query text (lowercased, punctuation collapsed) equals a benchmark query, a benchmark document, or the
  first docstring paragraph of a benchmark document.
Near-duplicates (e.g. another version of the same library function) are NOT caught; see README.

Output: pairs_python.jsonl, pairs_java2cs.jsonl ({"query", "positive", "source", "language"}) and
stats.json in --out. Deterministic for a given machine (files are walked in sorted order).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
import sysconfig
import time
import warnings
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # run as a script: the product's miner lives in train/

from train.docstrings import python_functions  # noqa: E402
from train.decontaminate import BenchmarkIndex, norm_text  # noqa: E402  (the product's overlap filter)

DEFAULT_BENCHMARKS = REPO.parent / "shared" / "data" / "benchmarks"
DEFAULT_JAVA2CS = REPO.parent / "shared" / "data" / "train" / "codexglue_java2cs_train.jsonl"
DEFAULT_SITE_PACKAGES = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"

MIN_QUERY_WORDS = 3
MAX_QUERY_WORDS = 64
MAX_CODE_CHARS = 3000
MIN_BODY_LINES = 2
_WS = re.compile(r"\s+")
_TRIVIAL_BODY = {"pass", "...", "raisenotimplementederror", "raisenotimplementederror()", "returnnone"}


def node_code_keys(node: ast.FunctionDef | ast.AsyncFunctionDef, code: str, full: str) -> set[str]:
    """norm_code_keys of a mined function without re-parsing it: raw texts and ast.unparse of the node with
    and without its docstring (the same keys norm_code_keys gives for the function's text)."""
    keys = {_WS.sub("", code), _WS.sub("", full)}
    try:
        keys.add(_WS.sub("", ast.unparse(node)))
        body = node.body
        node.body = body[1:] or [ast.Pass()]
        try:
            keys.add(_WS.sub("", ast.unparse(node)))
        finally:
            node.body = body
    except (ValueError, RecursionError):
        pass
    return keys


def function_pairs(source: str, with_keys: bool = False) -> list[tuple]:
    """(name, query, code without docstring, code with docstring) for each documented function of a module that
    passes this experiment's filters (query length, non-trivial body, size); with_keys: a fifth item, the
    function's code keys (see node_code_keys). The functions come from the product's miner."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        functions = list(python_functions(source))
    lines = source.splitlines()
    pairs = []
    for function in functions:
        node, query, code, full = function.node, function.summary, function.code_without_docstring, function.code
        if not query or code is None or not MIN_QUERY_WORDS <= len(query.split()) <= MAX_QUERY_WORDS:
            continue
        body_lines = [line for line in lines[node.body[0].end_lineno : node.end_lineno]
                      if line.strip() and not line.strip().startswith("#")]
        if len(body_lines) < MIN_BODY_LINES and _WS.sub("", "".join(body_lines)).lower() in _TRIVIAL_BODY | {""}:
            continue
        if not body_lines or len(code) > MAX_CODE_CHARS:
            continue
        pairs.append((node.name, query, code, full) + ((node_code_keys(node, code, full),) if with_keys else ()))
    return pairs


def python_files(roots: list[Path]) -> list[tuple[str, Path]]:
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root)
            parts = rel.parts
            if any(part in {"tests", "test", "testing", "site-packages", "__pycache__", "idlelib", "lib2to3"}
                   or part.startswith("test_") for part in parts[:-1]) or parts[-1].startswith("test_"):
                continue
            if root.name == "site-packages" and (len(parts) < 2 or parts[0].endswith((".dist-info", ".egg-info"))):
                continue
            package = "stdlib" if root.name != "site-packages" else parts[0]
            found.append((package, path))
    return found


def mine_python(roots: list[Path], index: BenchmarkIndex) -> tuple[list[dict], Counter, Counter]:
    seen_code: set[str] = set()
    seen_query: set[str] = set()
    drops: Counter = Counter()
    per_source: Counter = Counter()
    rows = []
    files = python_files(roots)
    started = time.time()
    for number, (package, path) in enumerate(files):
        if number % 2000 == 0:
            print(f"  {number}/{len(files)} files, {len(rows)} pairs kept ({time.time() - started:.0f}s)", flush=True)
        try:
            source = path.read_text(encoding="utf-8")
            pairs = function_pairs(source, with_keys=True)
        except (SyntaxError, UnicodeDecodeError, ValueError, RecursionError, MemoryError, OSError):
            drops["unparsable file"] += 1
            continue
        for _name, query, code, full, keys in pairs:
            drops["mined"] += 1
            code_key = hashlib.sha1(_WS.sub("", code).encode()).hexdigest()
            query_key = norm_text(query)
            if code_key in seen_code:
                drops["duplicate code"] += 1
                continue
            if query_key in seen_query:
                drops["duplicate query"] += 1
                continue
            reason = index.overlap_reason(query, code, full, code_keys=keys)
            if reason:
                drops[reason] += 1
                continue
            seen_code.add(code_key)
            seen_query.add(query_key)
            per_source[package] += 1
            rows.append({"query": query, "positive": code, "positive_with_docstring": full,
                         "source": package, "language": "python"})
    return rows, drops, per_source


def java_pairs(path: Path, index: BenchmarkIndex) -> tuple[list[dict], Counter]:
    seen: set[str] = set()
    drops: Counter = Counter()
    rows = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            drops["read"] += 1
            key = _WS.sub("", row["query"]) + "\x00" + _WS.sub("", row["positive"])
            if key in seen:
                drops["duplicate pair"] += 1
                continue
            seen.add(key)
            if {_WS.sub("", row["query"]), _WS.sub("", row["positive"])} & index.code_keys:
                drops["code matches a benchmark text"] += 1
                continue
            rows.append({"query": row["query"], "positive": row["positive"], "source": "codexglue_java2cs",
                         "language": "java->csharp"})
    return rows, drops


def refilter(out: Path, index: BenchmarkIndex) -> None:
    """Drop the pairs of out/pairs_python.jsonl that the current overlap filter flags; record it in stats.json."""
    path = out / "pairs_python.jsonl"
    rows = [json.loads(line) for line in path.open(encoding="utf-8")]
    kept, drops = [], Counter()
    for row in rows:
        reason = index.overlap_reason(row["query"], row["positive"], row.get("positive_with_docstring"))
        if reason:
            drops[reason] += 1
        else:
            kept.append(row)
    with path.open("w", encoding="utf-8") as handle:
        for row in kept:
            handle.write(json.dumps(row) + "\n")
    stats = json.loads((out / "stats.json").read_text())
    stats["refilter"] = {"before": len(rows), "after": len(kept), "drops": dict(drops)}
    stats["python_pairs"] = len(kept)
    (out / "stats.json").write_text(json.dumps(stats, indent=1))
    print(json.dumps(stats["refilter"]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("/work/cache/c2llm_minilm/data"))
    parser.add_argument("--benchmarks", type=Path, default=DEFAULT_BENCHMARKS)
    parser.add_argument("--java2cs", type=Path, default=DEFAULT_JAVA2CS)
    parser.add_argument("--refilter", action="store_true",
                        help="only re-apply the overlap filter to the pairs already in --out (see README)")
    parser.add_argument("--roots", type=Path, nargs="*", default=None,
                        help="folders to mine (default: the stdlib and this interpreter's site-packages)")
    args = parser.parse_args(argv)
    start = time.time()
    roots = args.roots or [Path(sysconfig.get_paths()["stdlib"]), DEFAULT_SITE_PACKAGES]
    index = BenchmarkIndex.from_root(args.benchmarks)
    if args.refilter:
        refilter(args.out, index)
        return
    print(f"benchmark index: {len(index.code_keys)} code keys, {len(index.text_keys)} text keys "
          f"from {len(index.folders)} folders ({time.time() - start:.0f}s)", flush=True)
    rows, drops, per_source = mine_python(roots, index)
    print(f"python pairs: {len(rows)} kept; {dict(drops)} ({time.time() - start:.0f}s)", flush=True)
    java, java_drops = java_pairs(args.java2cs, index)
    print(f"java->c# pairs: {len(java)} kept; {dict(java_drops)}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, data in (("pairs_python.jsonl", rows), ("pairs_java2cs.jsonl", java)):
        with (args.out / name).open("w", encoding="utf-8") as handle:
            for row in data:
                handle.write(json.dumps(row) + "\n")
    stats = {"python_pairs": len(rows), "python_drops": dict(drops), "top_sources": per_source.most_common(25),
             "java2cs_pairs": len(java), "java2cs_drops": dict(java_drops), "benchmark_folders": index.folders,
             "roots": [str(root) for root in roots], "seconds": round(time.time() - start)}
    (args.out / "stats.json").write_text(json.dumps(stats, indent=1))
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()
