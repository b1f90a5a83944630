"""codesearch --precision float32 / int8 / binary side by side: ranking quality, resident vector memory, latency.

    python benchmarks/codesearch_precision.py [--index-root DIR] [--multipliers 4 10] [--large-package transformers]
                                              [--large-index-dir DIR] [--repeat 7] [--skip-large]

1. Quality set (benchmarks/data/codesearch_queries.jsonl, 125 queries over 5 installed packages, as
   benchmarks/codesearch_quality.py): each package's index is opened at every precision in turn (the float32
   vectors embedded once, then only re-quantized: the run fails if a switch embeds anything) and every query is
   ranked dense and hybrid, tests and docs/examples demoted (codesearch's defaults). Binary is run without
   rescoring (Hamming order only) and with each `--multipliers` value (rows rescored = multiplier x 10 hits).
   Latency here is the ranking alone (query vector given): the part precision changes.
2. A large package (`--large-package`, default transformers, ~61,500 pieces; its first index build embeds every
   piece: 15-45 minutes on 2 cores): resident vector bytes, snapshot and index bytes on disk, the time a switch
   of precision takes (re-quantizing the stored vectors), the dense scan alone, and new queries (a text never
   asked before, so its vector is embedded) both in one process (as the MCP server answers: model loaded, index
   open; the precisions alternate query by query) and as the command line runs them (a new process per query,
   one precision's runs after the other's, with each process's wall and CPU seconds and peak RSS).
   `--large-index-dir` may name the index `codesearch_speed.py --package transformers --index-dir DIR` kept (built
   on a copy that keeps the files' sizes and times): nothing is embedded then (`embedded_at_open` in the record).

Resident vector bytes count the pieces' vectors and the files' path vectors (codesearch.loaded.PathVectors: int8 at
int8 and binary precision, plus 4 bytes a piece for its file).

Goals (from the feature's issue): binary + rescoring within 0.01 MRR@10 of float32 at <= 1/16 of its resident
vector memory; int8 within 0.005 at 1/4. Prints Markdown tables and writes the record
benchmarks/results/codesearch_precision.json (the quality set, and the large package unless `--skip-large`); run
with one thread on a shared machine (`OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/codesearch_precision.py`).
"""

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import resource
import sqlite3
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/codesearch_precision.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.codesearch_quality import K, is_answer, package_folder  # noqa: E402
from benchmarks.codesearch_speed import CommandRun, run_command_line  # noqa: E402
from benchmarks.common import add_record_argument, commit_line, load_line, write_record  # noqa: E402
from codesearch.__main__ import DEFAULT_MAX_SEQ_LENGTH  # noqa: E402
from codesearch.encoders import open_embedder  # noqa: E402
from codesearch.files import select_files  # noqa: E402
from codesearch.index import SearchIndex  # noqa: E402
from c2llm_plumbing.models import resolve_model  # noqa: E402
from codesearch.models import index_settings  # noqa: E402
from codesearch.quantization import DEFAULT_RESCORE_MULTIPLIER, PRECISIONS  # noqa: E402
from codesearch.ranking import QuerySignals, RankingConfig, rank_places  # noqa: E402
from codesearch.request import SearchRequest  # noqa: E402
from codesearch.searcher import FolderSearch, IndexOptions  # noqa: E402
from c2llm_data.tokens import code_tokens  # noqa: E402

RANKINGS = ("dense", "hybrid")
# what the precision changes is the vectors' scores: ranked without the code priors, which read only words
VECTORS_AND_WORDS = RankingConfig(priors=frozenset())
LARGE_QUERIES = [
    "tokenize a batch of sentences", "save model weights to safetensors", "compute rotary position embeddings",
    "load a pretrained model from a folder", "beam search over generated tokens", "resize an image for a vision model",
    "apply a chat template to messages", "convert a checkpoint from tensorflow", "sliding window attention mask",
    "top k top p sampling of logits", "push a model to the hub", "gradient checkpointing of decoder layers",
    "quantize linear layers to 4 bit", "pad audio features to the same length", "log training metrics to wandb",
]


def variants(multipliers: list[int]) -> list[tuple[str, int | None]]:
    """(precision, binary rescoring multiplier: 0 = Hamming order only, None = not binary)."""
    return [("float32", None), ("int8", None), ("binary", 0), *(("binary", m) for m in multipliers)]


def label(precision: str, multiplier: int | None) -> str:
    if multiplier is None:
        return precision
    return f"binary, rescore {multiplier} x k" if multiplier else "binary, Hamming only"


def quality(args, embedder, settings) -> dict:
    """Rank the quality set at every precision; print the table and return its figures for the record."""
    queries = [json.loads(line) for line in args.queries.read_text().splitlines() if line.strip()]
    by_package = defaultdict(list)
    for query in queries:
        by_package[query["package"]].append(query)
    configs = variants(args.multipliers)
    ranks = defaultdict(list)  # (variant, ranking) -> rank of the answer or None
    seconds = defaultdict(list)  # (variant, ranking) -> ranking time per query
    resident = defaultdict(int)  # variant -> bytes over every package
    pieces = 0
    for package, package_queries in by_package.items():
        root = package_folder(package)
        files = select_files(root).files
        query_vectors = embedder.encode_query([q["query"] for q in package_queries])
        bm25_scores = None
        for number, (precision, multiplier) in enumerate(configs):
            index = SearchIndex(args.index_root / package, {**settings, "precision": precision}, log=lambda m: None)
            report = index.update(root, files, embedder.encode_document, progress=False)
            if number and report.model_inputs:
                raise SystemExit(f"{package}: switching to {precision} embedded {report.model_inputs} texts")
            loaded = index.load(multiplier or DEFAULT_RESCORE_MULTIPLIER)
            if multiplier == 0:
                loaded.vectors.read_float = None  # no rescoring: the Hamming order itself
            if bm25_scores is None:
                pieces += len(loaded.ids)
                retriever = index.bm25(loaded.generation)
                bm25_scores = [retriever.get_scores(code_tokens(q["query"])) if code_tokens(q["query"])
                               else np.zeros(len(loaded.ids)) for q in package_queries]
            resident[precision, multiplier] += loaded.resident_bytes  # the pieces' vectors and the files' paths
            for expected, query_vector, lexical in zip(package_queries, query_vectors, bm25_scores):
                for ranking in RANKINGS:
                    started = time.perf_counter()
                    request = SearchRequest(query=expected["query"], top_k=K, ranking=ranking)
                    places = rank_places(request, loaded, QuerySignals(query_vector, lexical), K, VECTORS_AND_WORDS)
                    seconds[(precision, multiplier), ranking].append(time.perf_counter() - started)
                    found = next((n for n, place in enumerate(places, start=1)
                                  if is_answer([place.path, *place.also], loaded.titles[place.row],
                                               (place.line, place.end_line), expected)), None)
                    ranks[(precision, multiplier), ranking].append(found)
            index.close()
        print(f"{package}: {len(package_queries)} queries ranked at {len(configs)} precisions", file=sys.stderr)

    def mrr(found):
        return sum(1 / r for r in found if r) / len(found)

    base = {ranking: mrr(ranks[("float32", None), ranking]) for ranking in RANKINGS}
    print(f"\n## Quality set: {len(queries)} queries over {', '.join(by_package)} ({pieces} pieces); tests and "
          "docs demoted\n")
    print("| precision | hybrid MRR@10 (vs float32) | hybrid hit@1 | hybrid hit@10 | dense MRR@10 (vs float32) | "
          "resident vector bytes | ratio to float32 | median ranking ms, hybrid / dense |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    figures = {"queries": len(queries), "pieces": pieces, "default_multiplier": DEFAULT_RESCORE_MULTIPLIER,
               "variants": {}}
    for config in configs:
        hybrid, dense = ranks[config, "hybrid"], ranks[config, "dense"]
        figures["variants"][label(*config)] = {
            "precision": config[0], "rescore_multiplier": config[1], "resident_bytes": resident[config],
            **{ranking: {"mrr@10": mrr(ranks[config, ranking]),
                         "hit@1": sum(r == 1 for r in ranks[config, ranking]) / len(ranks[config, ranking]),
                         "hit@10": sum(bool(r) for r in ranks[config, ranking]) / len(ranks[config, ranking]),
                         "median_ranking_ms": 1000 * statistics.median(seconds[config, ranking])}
               for ranking in RANKINGS}}
        delta = {ranking: mrr(ranks[config, ranking]) - base[ranking] for ranking in RANKINGS}
        ms = {ranking: 1000 * statistics.median(seconds[config, ranking]) for ranking in RANKINGS}
        print(f"| {label(*config)} | {mrr(hybrid):.3f} ({delta['hybrid']:+.3f}) | "
              f"{sum(r == 1 for r in hybrid) / len(hybrid):.3f} | {sum(bool(r) for r in hybrid) / len(hybrid):.3f} | "
              f"{mrr(dense):.3f} ({delta['dense']:+.3f}) | {resident[config]:,} | "
              f"1/{resident['float32', None] / resident[config]:.0f} | {ms['hybrid']:.2f} / {ms['dense']:.2f} |")
    return figures


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def run_cli(root: Path, index_dir: Path, precision: str, query: str) -> CommandRun:
    """One `codesearch QUERY` process (wall and CPU seconds, peak RSS), QUERY new to the index's query cache."""
    with contextlib.closing(sqlite3.connect(index_dir / "index.sqlite")) as db, db:
        db.execute("DELETE FROM queries WHERE text=?", (query,))
    arguments = [query, "--path", str(root), "--index-dir", str(index_dir), "--json", "--quiet", "--precision",
                 precision]
    run = run_command_line(arguments, {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}, REPO_ROOT)
    if not json.loads(run.stdout):
        raise SystemExit(f"codesearch found nothing for {query!r}:\n{run.stderr}")
    return run


def forget(index: SearchIndex, query: str) -> None:
    """Drop a query's cached vector, so the next search of it embeds it (a new query)."""
    with index.db:
        index.db.execute("DELETE FROM queries WHERE text=?", (query,))


def large(args, embedder, model_name: str) -> dict:
    """Memory, disk and latency per precision on the large package's index; print the table, return its figures."""
    root = package_folder(args.large_package)
    options = {precision: IndexOptions(model_name, index_dir=args.large_index_dir, quiet=True, precision=precision)
               for precision in PRECISIONS}
    opened, switch_s, snapshot_bytes, index_bytes, pieces, embedded = {}, {}, {}, {}, 0, 0
    for precision in PRECISIONS:  # each opens the one index at its precision; the loaded vectors stay in memory
        started = time.perf_counter()
        folder = FolderSearch(root, options[precision], load_model=lambda: embedder, log=lambda m: None)
        refreshed = folder.refresh()
        switch_s[precision] = time.perf_counter() - started
        if precision != "float32" and refreshed.report.model_inputs:
            raise SystemExit(f"switching to {precision} embedded {refreshed.report.model_inputs} texts")
        embedded += refreshed.report.model_inputs  # 0 on an index built before (codesearch_speed.py --index-dir)
        folder.search(SearchRequest(query="warm up: build or load the BM25 index", ranking="hybrid"))
        snapshot_bytes[precision] = sum(path.stat().st_size for path in args.large_index_dir.glob("vectors*.npz"))
        index_bytes[precision] = folder_bytes(args.large_index_dir)
        pieces = refreshed.pieces
        opened[precision] = folder
        print(f"{args.large_package}: {precision} ready in {switch_s[precision]:.1f} s", file=sys.stderr)
    scan_ms, in_process_ms = defaultdict(list), defaultdict(list)
    for round_number in range(args.repeat):
        for query in LARGE_QUERIES:
            for precision in PRECISIONS:  # alternate, so load changes on the machine hit every precision alike
                folder = opened[precision]
                forget(folder.index, query)
                started = time.perf_counter()
                folder.search(SearchRequest(query=query, ranking="hybrid"))
                in_process_ms[precision].append(1000 * (time.perf_counter() - started))
                query_vector = folder.index.cached_query(query)
                started = time.perf_counter()
                folder._loaded.vectors.scores(query_vector, K)
                scan_ms[precision].append(1000 * (time.perf_counter() - started))
    for folder in opened.values():
        folder.close()
    cli_runs = defaultdict(list)
    for precision in PRECISIONS:  # one precision's processes, then the next: a switch re-quantizes (not timed)
        run_cli(root, args.large_index_dir, precision, "warm up after the switch")
        for number in range(args.repeat):
            query = f"{LARGE_QUERIES[number % len(LARGE_QUERIES)]} in the command line {number}"
            cli_runs[precision].append(run_cli(root, args.large_index_dir, precision, query).figures())
    float_bytes = pieces * opened["float32"]._loaded.vectors.dimension * 4
    print(f"\n## {args.large_package}: {pieces} pieces\n")
    print("| precision | resident vector bytes | ratio to float32 | snapshot bytes | index bytes on disk | "
          "switch to it, s | dense scan ms | new query in process, ms (hybrid) | new query, command line, s | "
          "command line peak RSS MiB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    figures = {"package": args.large_package, "version": importlib.metadata.version(args.large_package),
               "pieces": pieces, "embedded_at_open": embedded, "float32_bytes": float_bytes, "precisions": {}}
    for precision in PRECISIONS:
        resident_bytes = opened[precision].resident_vector_bytes  # the pieces' and the files' path vectors
        command_s = statistics.median(run["wall_s"] for run in cli_runs[precision])
        command_rss_mib = statistics.median(run["peak_rss_mib"] for run in cli_runs[precision])
        figures["precisions"][precision] = {
            "resident_bytes": resident_bytes, "snapshot_bytes": snapshot_bytes[precision],
            "index_bytes": index_bytes[precision], "switch_s": switch_s[precision],
            "dense_scan_ms": statistics.median(scan_ms[precision]),
            "new_query_in_process_ms": statistics.median(in_process_ms[precision]),
            "new_query_command_s": command_s, "command_peak_rss_mib": command_rss_mib,
            "new_query_command_runs": cli_runs[precision]}
        print(f"| {precision} | {resident_bytes:,} | 1/{float_bytes / resident_bytes:.0f} | "
              f"{snapshot_bytes[precision]:,} | {index_bytes[precision]:,} | {switch_s[precision]:.1f} | "
              f"{statistics.median(scan_ms[precision]):.1f} | {statistics.median(in_process_ms[precision]):.0f} | "
              f"{command_s:.2f} | {command_rss_mib:.0f} |")
    print(f"\nMedians: in process and dense scan over {args.repeat} x {len(LARGE_QUERIES)} new queries per "
          f"precision; command line over {args.repeat} runs. 'switch to it': opening the index at that precision "
          "and loading it (float32 first: its snapshot may already exist).")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=Path, default=REPO_ROOT / "benchmarks/data/codesearch_queries.jsonl",
                        help="JSONL query set (default: benchmarks/data/codesearch_queries.jsonl)")
    parser.add_argument("--model", default="default", help="'default' or a sentence-transformers folder")
    parser.add_argument("--index-root", type=Path, default=Path("/tmp/codesearch-quality-index"),
                        help="per-package indexes of the quality set (default: /tmp/codesearch-quality-index, "
                             "shared with codesearch_quality.py)")
    parser.add_argument("--multipliers", type=int, nargs="+", default=[4, DEFAULT_RESCORE_MULTIPLIER],
                        help=f"binary rescoring multipliers to compare (default: 4 {DEFAULT_RESCORE_MULTIPLIER})")
    parser.add_argument("--large-package", default="transformers", help="installed package for the memory and "
                        "latency table (default: transformers)")
    parser.add_argument("--large-index-dir", type=Path, default=Path("/tmp/codesearch-precision-large-index"),
                        help="its index (default: /tmp/codesearch-precision-large-index)")
    parser.add_argument("--repeat", type=int, default=7, help="rounds of new queries (default: 7)")
    parser.add_argument("--skip-large", action="store_true", help="only the quality set")
    add_record_argument(parser, "codesearch_precision")
    args = parser.parse_args()
    loads, commit = [load_line("start")], commit_line()  # the code that runs, however long the run takes

    folder = resolve_model(args.model)
    settings = index_settings(folder, DEFAULT_MAX_SEQ_LENGTH)
    embedder = open_embedder(folder, settings["model_fingerprint"], "auto", DEFAULT_MAX_SEQ_LENGTH, batch_size=32)
    print(f"model {folder} ({embedder.backend}); {platform.processor() or platform.machine()}, "
          f"{len(os.sched_getaffinity(0))} of {os.cpu_count()} cores usable, OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}; load average {os.getloadavg()[0]:.1f}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    figures = {"quality": quality(args, embedder, settings)}
    if not args.skip_large:
        figures["large"] = large(args, embedder, args.model)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}; peak RSS of this process "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    loads.append(load_line("end"))
    print(f"record: {write_record(args.record_name, figures, loads, args.record_dir, commit=commit)}")


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from benchmarks.tables import markdown_table, number  # noqa: E402


def codesearch_precision(record: dict) -> str:
    """Quality set at each vector precision: hybrid and dense MRR@10, resident vector bytes, ratio to float32."""
    quality = record["metrics"]["quality"]
    variants = quality["variants"]
    float32_bytes = variants["float32"]["resident_bytes"]
    rows = []
    for name, figures in variants.items():
        cells = [name, number(figures["hybrid"]["mrr@10"]), number(figures["dense"]["mrr@10"]),
                 f"{figures['resident_bytes']:,}", f"1/{float32_bytes / figures['resident_bytes']:.0f}"]
        if figures["rescore_multiplier"] == quality["default_multiplier"]:
            cells = [f"**{name}** (default)", *(f"**{cell}**" for cell in cells[1:3]), *cells[3:]]
        rows.append(cells)
    return markdown_table([f"precision (quality set: {quality['queries']} queries, {quality['pieces']:,} pieces)",
                           "hybrid MRR@10", "dense MRR@10", "resident vector bytes", "ratio to float32"], rows)


def codesearch_precision_large(record: dict) -> str:
    """The large package's index per precision: memory, disk, switch time, scan and new-query latency."""
    large = record["metrics"]["large"]
    rows = [[precision, f"{figures['resident_bytes']:,}", f"{figures['index_bytes'] / 1e6:.0f}",
             number(figures["switch_s"], 1), number(figures["dense_scan_ms"], 1),
             f"{figures['new_query_in_process_ms']:.0f}", number(figures["new_query_command_s"], 2),
             f"{figures['command_peak_rss_mib']:.0f}"] for precision, figures in large["precisions"].items()]
    return markdown_table([f"precision ({large['package']} {large['version']}: {large['pieces']:,} pieces)",
                           "resident vector bytes", "index on disk, MB", "switch to it, s", "dense scan ms",
                           "new query in process, ms", "new query, command, s", "command peak RSS MiB"], rows)


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "codesearch_precision": (("codesearch_precision",), codesearch_precision),
    "codesearch_precision_large": (("codesearch_precision",), codesearch_precision_large),
}


if __name__ == "__main__":
    main()
