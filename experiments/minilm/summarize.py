"""Collect experiments/minilm/results/*.json into one nDCG@10 table (results/table.md and table.json).

    python experiments/minilm/summarize.py                      # the 30-step pooling runs: results/table.md
    python experiments/minilm/summarize.py --name table_merge --columns "stock MiniLM=stock.json" \
        "PMA gw=pma_s0_gw.json" ...                               # any columns -> results/table_merge.md

Rows: the reported benchmarks (or --benchmarks); columns: BM25, stock MiniLM and every trained run found;
then the average, the change against stock, and the acceptance bar (average >= stock + 0.03 and no
benchmark more than 0.02 below stock).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.reported import REPORTED_OFFLINE_BENCHMARKS, SHORT_BENCHMARK_NAMES  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
REPORTED = REPORTED_OFFLINE_BENCHMARKS
SHORT = SHORT_BENCHMARK_NAMES
COLUMNS = [("bm25", "stock.bm25.json"), ("stock MiniLM", "stock.json"), ("mean (ours)", "mean_s0.json"),
           ("PMA (ours)", "pma_s0.json"), ("CLS (ours)", "cls_s0.json"), ("mean s1", "mean_s1.json"),
           ("PMA s1", "pma_s1.json"), ("default_model", "default.json")]


def best_per_set(columns: list[tuple[str, dict]], benchmarks: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Per benchmark, the highest nDCG@10 among the trained columns (all but stock and bm25)."""
    trained = [data for label, data in columns if label not in ("stock MiniLM", "bm25")]
    if not trained:
        raise SystemExit("--best-per-set needs at least one column other than stock and bm25")
    return {bench: {"ndcg@10": max(data[bench]["ndcg@10"] for data in trained)}
            for bench in benchmarks if all(bench in data for data in trained)}


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--columns", nargs="+", metavar="LABEL=FILE",
                        help="table columns: label and a suite JSON in results/ (the stock column is labelled "
                             "'stock MiniLM'); default: the 30-step pooling runs' columns")
    parser.add_argument("--benchmarks", nargs="+", default=list(REPORTED), metavar="NAME",
                        help="table rows: benchmark names in the suite JSON (default: the 9 reported ones)")
    parser.add_argument("--name", default="table", help="output name in results/ (default: table)")
    parser.add_argument("--best-per-set", metavar="LABEL",
                        help="add a column LABEL holding, for each benchmark, the best score of the columns other "
                             "than stock and bm25: an upper bound that no single model reaches")
    args = parser.parse_args(argv)
    benchmarks = tuple(args.benchmarks)
    chosen = COLUMNS
    if args.columns:
        malformed = [column for column in args.columns if "=" not in column]
        if malformed:
            raise SystemExit(f"--columns takes LABEL=FILE pairs; got {malformed}")
        chosen = [tuple(column.split("=", 1)) for column in args.columns]
        missing = [name for _, name in chosen if not (RESULTS / name).is_file()]
        if missing:
            raise SystemExit(f"not in {RESULTS}: {missing}")
    columns = [(label, json.loads((RESULTS / name).read_text())) for label, name in chosen if (RESULTS / name).is_file()]
    if not columns:
        raise SystemExit(f"none of {[name for _, name in chosen]} is in {RESULTS}: the per-run suite outputs are not in "
                         "git; run_all.sh writes them")
    if args.best_per_set:
        columns.append((args.best_per_set, best_per_set(columns, benchmarks)))
    stock = dict(columns).get("stock MiniLM")
    table: dict[str, dict[str, float]] = {}
    lines = ["| benchmark | " + " | ".join(label for label, _ in columns) + " |",
             "| :--- |" + " ---: |" * len(columns)]
    for bench in benchmarks:
        row = {label: data[bench]["ndcg@10"] for label, data in columns if bench in data}
        table[bench] = row
        lines.append(f"| {SHORT.get(bench, bench)} | " + " | ".join(
            f"{row[label]:.3f}" if label in row else "-" for label, _ in columns) + " |")
    averages = {}
    for label, data in columns:
        if all(bench in data for bench in benchmarks):
            averages[label] = sum(data[bench]["ndcg@10"] for bench in benchmarks) / len(benchmarks)
    lines.append("| **average** | " + " | ".join(f"**{averages[label]:.3f}**" if label in averages else "-"
                                               for label, _ in columns) + " |")
    verdicts = {}
    if stock:
        deltas, worst = [], []
        for label, data in columns:
            if label in averages and "stock MiniLM" in averages:
                diffs = {bench: data[bench]["ndcg@10"] - stock[bench]["ndcg@10"] for bench in benchmarks}
                gain = averages[label] - averages["stock MiniLM"]
                worst_bench = min(diffs, key=diffs.get)
                verdicts[label] = {"gain": gain, "worst": worst_bench, "worst_delta": diffs[worst_bench],
                                   "passes": gain >= 0.03 and diffs[worst_bench] >= -0.02}
                deltas.append(f"{gain:+.3f}")
                worst.append(f"{diffs[worst_bench]:+.3f} ({SHORT.get(worst_bench, worst_bench)})")
            else:
                deltas.append("-")
                worst.append("-")
        lines.append("| average - stock | " + " | ".join(deltas) + " |")
        lines.append("| worst benchmark - stock | " + " | ".join(worst) + " |")
    timings = {}
    timing_file = RESULTS / "timings.jsonl"
    if timing_file.is_file():
        for line in timing_file.read_text().splitlines():
            timings.update(json.loads(line))
    text = "\n".join(lines) + "\n\nTimings (s): " + json.dumps(timings) + "\n"
    (RESULTS / f"{args.name}.md").write_text(text)
    (RESULTS / f"{args.name}.json").write_text(json.dumps({"ndcg@10": table, "average": averages, "verdicts": verdicts,
                                                    "timings_s": timings}, indent=1))
    print(text)
    print(json.dumps(verdicts, indent=1))


if __name__ == "__main__":
    main()
