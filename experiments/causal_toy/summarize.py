"""Collect experiments/causal_toy/results/<pooling>_s<seed>.json into one nDCG@10 table (results/table.md).

    python experiments/causal_toy/summarize.py

Rows: the 9 reported benchmarks, then the average; columns, per pooling: every run found (one per seed),
then the mean over seeds when there are several; last, BM25 (results/bm25.json) if it was run. Below it: training loss and time per run (from
results/train_log_<run>.json and results/timings.jsonl).
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
POOLINGS = ("pma", "last_token", "mean")
SEEDS = range(10)


def ndcg_columns() -> dict[str, dict[str, float]]:
    """Column name -> {benchmark: nDCG@10}: per pooling, each complete run ("pma_s0", ...), then the mean
    over its seeds when there are several ("pma mean of 2")."""
    columns = {}
    for pooling in POOLINGS:
        runs = []
        for seed in SEEDS:
            path = RESULTS / f"{pooling}_s{seed}.json"
            if path.is_file():
                data = json.loads(path.read_text())
                if all(bench in data for bench in REPORTED):
                    runs.append({bench: data[bench]["ndcg@10"] for bench in REPORTED})
                    columns[f"{pooling}_s{seed}"] = runs[-1]
        if len(runs) > 1:
            columns[f"{pooling} mean of {len(runs)}"] = {b: sum(r[b] for r in runs) / len(runs) for b in REPORTED}
    reference = RESULTS / "bm25.json"  # BM25 on the same protocol, for scale
    if reference.is_file():
        columns["bm25"] = {bench: json.loads(reference.read_text())[bench]["ndcg@10"] for bench in REPORTED}
    return columns


def run_rows() -> list[str]:
    """One line per trained run: steps, s/step, training and evaluation wall time, python loss first/last 20."""
    timings = {}
    timing_file = RESULTS / "timings.jsonl"
    if timing_file.is_file():
        for line in timing_file.read_text().splitlines():
            timings.update(json.loads(line))  # a re-run overwrites the earlier time
    rows = ["| run | steps | s/step | train wall (s) | eval wall (s) | python loss, first 20 -> last 20 steps |",
            "| :--- | ---: | ---: | ---: | ---: | :--- |"]
    for log_path in sorted(RESULTS.glob("train_log_*.json")):
        run = log_path.stem.removeprefix("train_log_")
        log = json.loads(log_path.read_text())
        rows.append(f"| {run} | {len(log['steps'])} | {log['seconds_per_step']:.2f} | {timings.get(f'train_{run}', '-')} | "
                    f"{timings.get(f'eval_{run}', '-')} | {log['python_loss_first20']:.3f} -> {log['python_loss_last20']:.3f} |")
    return rows


def main() -> None:
    columns = ndcg_columns()
    if not columns:
        raise SystemExit(f"no <pooling>_s<seed>.json in {RESULTS}: the per-run suite outputs are not in git; "
                         "run_all.sh writes them")
    names = list(columns)
    lines = ["| benchmark | " + " | ".join(names) + " |", "| :--- |" + " ---: |" * len(names)]
    for bench in REPORTED:
        lines.append(f"| {SHORT.get(bench, bench)} | " + " | ".join(f"{columns[n][bench]:.3f}" for n in names) + " |")
    averages = {name: sum(scores.values()) / len(REPORTED) for name, scores in columns.items()}
    lines.append("| **average** | " + " | ".join(f"**{averages[n]:.3f}**" for n in names) + " |")
    text = "nDCG@10 (--max-queries 200 --max-corpus 1000 --max-seq-length 256)\n\n" + "\n".join(lines)
    text += "\n\n" + "\n".join(run_rows()) + "\n"
    (RESULTS / "table.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
