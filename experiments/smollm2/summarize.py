"""The pooling ablation's record and table, from the runs of experiments/smollm2/run_ablation.sh.

    python experiments/smollm2/summarize.py RUNS_DIR [--output-dir experiments/smollm2/results] \
        [--baseline LABEL=SUITE_JSON ...]

Reads each RUNS_DIR/VARIANT-sSEED/ (suite.json: the product evaluation; mteb.json: the mteb runner's score x100;
checkpoint-*/trainer_state.json: the training losses), and reference models' suite outputs on the same benchmarks
(``--baseline``: python -m evaluation.suite --output), and writes ablation.json (every run, the commands, the
commit, the machine) and ablation.md (mean and spread per variant, rendered from the record).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
VARIANT_ORDER = ("pma", "last_token", "mean", "pma128")
VARIANT_LABELS = {"pma": "PMA, d=576", "last_token": "last token", "mean": "mean", "pma128": "PMA, d=128"}
METRIC = "ndcg@10"
COMMANDS = [
    "nice -n 10 bash experiments/smollm2/run_ablation.sh RUNS_DIR",
    "python -m evaluation.suite --model default --compare bm25 minilm --data ../shared/data/benchmarks/humaneval "
    "--max-seq-length 128 --dtype float32 --output BASE/suite.json",
    "python experiments/smollm2/summarize.py RUNS_DIR --baseline default_model=BASE/suite.json "
    "bm25=BASE/suite.bm25.json all-MiniLM-L6-v2=BASE/suite.minilm.json",
]


def read_run(folder: Path) -> dict:
    """One finished run: its benchmark scores, its mteb scores and its last training loss."""
    suite = json.loads((folder / "suite.json").read_text(encoding="utf-8"))
    mteb_file = folder / "mteb.json"
    mteb = json.loads(mteb_file.read_text(encoding="utf-8")) if mteb_file.is_file() else {}
    states = sorted(folder.glob("checkpoint-*/trainer_state.json"), key=lambda path: int(path.parent.name[11:]))
    history = json.loads(states[-1].read_text(encoding="utf-8"))["log_history"] if states else []
    losses = [entry["loss"] for entry in history if "loss" in entry]
    name, _, seed = folder.name.rpartition("-s")
    return {"variant": name, "seed": int(seed), "suite": suite, "mteb": mteb,
            "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None}


def spread(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values), "n": len(values)}


def summarize(runs: list[dict]) -> dict:
    """Per variant and benchmark: mean, min and max over seeds of nDCG@10 (and of the mteb main score)."""
    summary = {}
    for variant in VARIANT_ORDER:
        chosen = [run for run in runs if run["variant"] == variant]
        if not chosen:
            continue
        benchmarks = sorted(chosen[0]["suite"])
        summary[variant] = {
            "seeds": sorted(run["seed"] for run in chosen),
            "suite": {name: spread([run["suite"][name][METRIC] for run in chosen]) for name in benchmarks},
            "mteb": {task: spread([run["mteb"][task] / 100 for run in chosen if task in run["mteb"]])
                     for task in sorted(chosen[0]["mteb"])},
        }  # fmt: skip
    return summary


def commit() -> str:
    result = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    return result.stdout.strip()


def markdown(record: dict) -> str:
    """The table of ``record`` (mean [min, max] over seeds)."""
    lines = ["| variant | seeds | " + " | ".join(f"{name} nDCG@10 (suite)" for name in record["benchmarks"])
             + " | mteb runner, same task | last training loss |",
             "| --- | --- | " + " | ".join("---:" for _ in record["benchmarks"]) + " | ---: | ---: |"]
    for variant, result in record["summary"].items():
        cells = [f"{result['suite'][name]['mean']:.3f} [{result['suite'][name]['min']:.3f}, "
                 f"{result['suite'][name]['max']:.3f}]" for name in record["benchmarks"]]
        mteb = "; ".join(f"{value['mean']:.3f} [{value['min']:.3f}, {value['max']:.3f}]"
                         for value in result["mteb"].values() if value["n"]) or "-"
        losses = [run["last_loss"] for run in record["runs"] if run["variant"] == variant and run["last_loss"]]
        loss = f"{statistics.fmean(losses):.2f}" if losses else "-"
        lines.append(f"| {VARIANT_LABELS[variant]} | {', '.join(map(str, result['seeds']))} | {' | '.join(cells)} | "
                     f"{mteb} | {loss} |")
    for label, scores in record["baselines"].items():
        cells = [f"{scores[name][METRIC]:.3f}" if name in scores else "-" for name in record["benchmarks"]]
        lines.append(f"| {label} | - | {' | '.join(cells)} | - | - |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, help="the RUNS_DIR given to run_ablation.sh")
    parser.add_argument("--output-dir", type=Path, default=Path(__file__).parent / "results",
                        help="where ablation.json and ablation.md go")
    parser.add_argument("--baseline", nargs="+", default=[], metavar="LABEL=SUITE_JSON",
                        help="a reference model's python -m evaluation.suite --output on the same benchmarks")
    args = parser.parse_args()
    baselines = {}
    for item in args.baseline:
        label, separator, path = item.rpartition("=")
        if not separator or not Path(path).is_file():
            parser.error(f"--baseline {item!r}: write LABEL=FILE, FILE a suite --output JSON that exists.")
        baselines[label] = json.loads(Path(path).read_text(encoding="utf-8"))
    runs = [read_run(folder) for folder in sorted(args.runs.iterdir()) if (folder / "suite.json").is_file()]
    if not runs:
        parser.error(f"{args.runs} holds no finished run (VARIANT-sSEED/suite.json): run run_ablation.sh first.")
    record = {"commands": COMMANDS, "commit": commit(), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
              "benchmarks": sorted(runs[0]["suite"]), "metric": METRIC, "runs": runs, "summary": summarize(runs),
              "baselines": baselines}
    args.output_dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("ablation.json", json.dumps(record, indent=2) + "\n"), ("ablation.md", markdown(record))):
        partial = args.output_dir / f".{name}.tmp"
        partial.write_text(text, encoding="utf-8")
        partial.rename(args.output_dir / name)


if __name__ == "__main__":
    main()
