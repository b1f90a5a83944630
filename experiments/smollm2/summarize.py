"""The pooling ablation's record and table, from the runs of experiments/smollm2/run_ablation.sh; or the learning
curve's (``--curve``), from runs made with STEPS=N into CURVE_DIR/steps-N/.

    python experiments/smollm2/summarize.py RUNS_DIR [--output-dir experiments/smollm2/results] \
        [--baseline LABEL=SUITE_JSON ...]
    python experiments/smollm2/summarize.py --curve CURVE_DIR    # curve.{json,md}; references from ablation.json

Reads each RUNS_DIR/VARIANT-sSEED/ (suite.json: the product evaluation; mteb.json: the mteb runner's score x100;
checkpoint-*/trainer_state.json: the training losses), and reference models' suite outputs on the same benchmarks
(``--baseline``: python -m evaluation.suite --output), and writes ablation.json, the project's record
(c2llm_plumbing.records: this command, the commit, lock, machine and load; its metrics every run, the commands that
made them and the summary) and ablation.md (mean and spread per variant, rendered from the record's metrics).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # run as `python experiments/smollm2/summarize.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from c2llm_plumbing.atomic import write_atomically  # noqa: E402
from c2llm_plumbing.records import load_line, write_record  # noqa: E402
VARIANT_ORDER = ("pma", "last_token", "mean", "pma128")
VARIANT_LABELS = {"pma": "PMA, d=576", "last_token": "last token", "mean": "mean", "pma128": "PMA, d=128"}
METRIC = "ndcg@10"
BENCHMARK_ARGUMENTS = ("--data ../shared/data/benchmarks/humaneval ../shared/data/benchmarks/humanevalx_py2cpp "
                       "--max-seq-length 128 --dtype float32")
COMMANDS = [
    "bash experiments/smollm2/run_ablation.sh RUNS_DIR VARIANT:SEED ...  # two side by side, disjoint variants",
    f"python -m evaluation.suite --model default --compare bm25 minilm {BENCHMARK_ARGUMENTS} --output BASE/suite.json",
    f"for v in pma last_token mean; do python -m evaluation.suite --model RUNS_DIR/$v-s0/init {BENCHMARK_ARGUMENTS} "
    "--output BASE/untrained-$v.json; done",
    "python -m train.train train/configs/smollm2-cpu.yaml --output-dir RECIPE_DIR",
    f"python -m evaluation.suite --model RECIPE_DIR/final {BENCHMARK_ARGUMENTS} --output BASE/recipe.json",
    "python experiments/smollm2/summarize.py RUNS_DIR --baseline LABEL=BASE/FILE.json ...  # labels: the README",
]
CURVE_COMMANDS = [
    "for steps in 4 8 16 32; do BENCHMARKS=humaneval STEPS=$steps ROWS=600 nice -n 10 bash "
    "experiments/smollm2/run_ablation.sh CURVE_DIR/steps-$steps pma:0; done",
    "BENCHMARKS=humaneval STEPS=32 ROWS=600 nice -n 10 bash experiments/smollm2/run_ablation.sh "
    "CURVE_DIR/steps-32 pma:1",
    "python experiments/smollm2/summarize.py --curve CURVE_DIR",
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
    # the dev loss (training.dev_loss_patience): one eval_GROUP_loss per held-out group and evaluation
    dev = {}
    for entry in history:
        for key, value in entry.items():
            if key.startswith("eval_") and key.endswith("_loss"):
                dev.setdefault(entry["step"], []).append(value)
    dev_losses = [[step, statistics.fmean(values)] for step, values in sorted(dev.items())]
    recipe = json.loads((folder / "recipe.json").read_text(encoding="utf-8")) if (folder / "recipe.json").is_file() \
        else {}
    training = recipe.get("training", {})
    steps = int(states[-1].parent.name[11:]) if states else None
    return {"variant": name, "seed": int(seed), "suite": suite, "mteb": mteb,
            "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
            "steps": steps, "max_steps": training.get("max_steps"),
            "stopped_by_dev_loss": bool(steps and training.get("max_steps") and steps < training["max_steps"]),
            "dev_losses": dev_losses, "lowest_dev_loss": min((loss for _, loss in dev_losses), default=None),
            # held-out retrieval of the dev pairs (nDCG@10, the recipe's metrics.json): before and after training
            "dev_ndcg": {moment: scores.get("sequential_score") for moment, scores in json.loads(
                (folder / "metrics.json").read_text(encoding="utf-8")).items()} if (folder / "metrics.json").is_file()
            else {},
            # from the run's start (its recipe.json written) to its last checkpoint: data, evaluations and steps
            "train_seconds": states[-1].stat().st_mtime - (folder / "recipe.json").stat().st_mtime
            if states and (folder / "recipe.json").is_file() else None}


def read_curve(root: Path) -> list[dict]:
    """Every finished run under ROOT/steps-N/, with the training pairs it saw (steps x rows per step, its recipe)."""
    runs = []
    for folder in sorted(root.glob("steps-*/*-s*")):
        if not (folder / "suite.json").is_file():
            continue
        training = json.loads((folder / "recipe.json").read_text(encoding="utf-8"))["training"]
        run = read_run(folder)
        run["pairs"] = training["max_steps"] * training["per_device_train_batch_size"]
        runs.append(run)
    return sorted(runs, key=lambda run: (VARIANT_ORDER.index(run["variant"]), run["pairs"], run["seed"]))


def curve_markdown(record: dict) -> str:
    """nDCG@10 against training pairs seen, then the references and the untrained start model (pairs 0)."""
    lines = ["| model | pairs seen | seed | " + " | ".join(f"{name} nDCG@10" for name in record["benchmarks"])
             + " | last training loss |",
             "| --- | ---: | ---: | " + " | ".join("---:" for _ in record["benchmarks"]) + " | ---: |"]
    for run in record["runs"]:
        cells = [f"{run['suite'][name][METRIC]:.3f}" for name in record["benchmarks"]]
        lines.append(f"| {VARIANT_LABELS[run['variant']]} | {run['pairs']} | {run['seed']} | {' | '.join(cells)} | "
                     f"{run['last_loss']:.2f} |")
    for label, scores in record["baselines"].items():
        cells = [f"{scores[name][METRIC]:.3f}" if name in scores else "-" for name in record["benchmarks"]]
        pairs = "0" if "untrained" in label else "-"
        lines.append(f"| {label} | {pairs} | - | {' | '.join(cells)} | - |")
    return "\n".join(lines) + "\n"


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


def markdown(record: dict) -> str:
    """The table of ``record`` (a record's metrics: mean [min, max] over seeds); the MTEB-Code runner's column only
    where a run has it."""
    with_mteb = any(result["mteb"] for result in record["summary"].values())
    mteb_header, mteb_rule = (" | MTEB-Code runner, same tasks", " | ---:") if with_mteb else ("", "")
    with_dev = any(run.get("dev_losses") for run in record["runs"])
    dev_header, dev_rule = ((" | steps (stop) | lowest dev loss | dev nDCG@10 before -> after"
                             " | minutes to the last checkpoint", " | ---: | ---: | ---: | ---:") if with_dev
                            else ("", ""))
    lines = ["| variant | seeds | " + " | ".join(f"{name} nDCG@10" for name in record["benchmarks"])
             + mteb_header + " | last training loss" + dev_header + " |",
             "| --- | --- | " + " | ".join("---:" for _ in record["benchmarks"]) + mteb_rule + " | ---:" + dev_rule
             + " |"]
    for variant, result in record["summary"].items():
        cells = [f"{result['suite'][name]['mean']:.3f} [{result['suite'][name]['min']:.3f}, "
                 f"{result['suite'][name]['max']:.3f}]" for name in record["benchmarks"]]
        if with_mteb:
            cells.append("; ".join(f"{value['mean']:.3f} [{value['min']:.3f}, {value['max']:.3f}]"
                                   for value in result["mteb"].values() if value["n"]) or "-")
        chosen = [run for run in record["runs"] if run["variant"] == variant]
        losses = [run["last_loss"] for run in chosen if run["last_loss"]]
        loss = f"{statistics.fmean(losses):.2f}" if losses else "-"
        if with_dev:
            stops = ", ".join(f"{run['steps']} ({'dev loss' if run['stopped_by_dev_loss'] else 'max'})"
                              for run in chosen)
            dev = [run["lowest_dev_loss"] for run in chosen if run.get("lowest_dev_loss") is not None]
            minutes = [run["train_seconds"] / 60 for run in chosen if run.get("train_seconds")]
            before = [run["dev_ndcg"]["before"] for run in chosen if run.get("dev_ndcg", {}).get("before")]
            after = [run["dev_ndcg"]["final"] for run in chosen if run.get("dev_ndcg", {}).get("final")]
            ndcg = (f"{statistics.fmean(before):.3f} -> {statistics.fmean(after):.3f}" if before and after else "-")
            loss += (f" | {stops} | {statistics.fmean(dev):.3f}" if dev else f" | {stops} | -") + f" | {ndcg}" + (
                f" | {statistics.fmean(minutes):.0f}" if minutes else " | -")
        lines.append(f"| {VARIANT_LABELS[variant]} | {', '.join(map(str, result['seeds']))} | {' | '.join(cells)} | "
                     f"{loss} |")
    for label, scores in record["baselines"].items():
        cells = [f"{scores[name][METRIC]:.3f}" if name in scores else "-" for name in record["benchmarks"]]
        lines.append(f"| {label} | - | {' | '.join(cells)}{' | -' if with_mteb else ''} | -"
                     f"{' | - | - | - | -' if with_dev else ''} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="?", help="the RUNS_DIR given to run_ablation.sh")
    parser.add_argument("--curve", type=Path, metavar="CURVE_DIR",
                        help="summarize the learning curve's runs (CURVE_DIR/steps-N/VARIANT-sSEED) instead")
    parser.add_argument("--output-dir", type=Path, default=Path(__file__).parent / "results",
                        help="where ablation.json and ablation.md go")
    parser.add_argument("--baseline", nargs="+", default=[], metavar="LABEL=SUITE_JSON",
                        help="a reference model's python -m evaluation.suite --output on the same benchmarks")
    parser.add_argument("--baselines-from", type=Path, metavar="RECORD",
                        help="take the reference rows of an earlier record of this script (same benchmarks, length "
                             "and start models), e.g. results/ablation.json")
    parser.add_argument("--name", default="ablation",
                        help="NAME.json and NAME.md in --output-dir (default ablation)")
    args = parser.parse_args()
    if args.curve:
        write_curve(parser, args.curve, args.output_dir)
        return
    if args.runs is None:
        parser.error("pass RUNS_DIR (the ablation) or --curve CURVE_DIR (the learning curve)")
    baselines = {}
    for item in args.baseline:
        label, separator, path = item.rpartition("=")
        if not separator or not Path(path).is_file():
            parser.error(f"--baseline {item!r}: write LABEL=FILE, FILE a suite --output JSON that exists.")
        baselines[label] = json.loads(Path(path).read_text(encoding="utf-8"))
    if args.baselines_from is not None:
        if not args.baselines_from.is_file():
            parser.error(f"--baselines-from {args.baselines_from}: no such record; give a NAME.json this script wrote.")
        baselines = {**json.loads(args.baselines_from.read_text(encoding="utf-8"))["metrics"]["baselines"],
                     **baselines}
    runs = [read_run(folder) for folder in sorted(args.runs.iterdir()) if (folder / "suite.json").is_file()]
    if not runs:
        parser.error(f"{args.runs} holds no finished run (VARIANT-sSEED/suite.json): run run_ablation.sh first.")
    metrics = {"commands": COMMANDS, "benchmarks": sorted(runs[0]["suite"]), "metric": METRIC, "runs": runs,
               "summary": summarize(runs), "baselines": baselines}
    write_summary(args.output_dir, args.name, metrics, markdown(metrics))


def write_curve(parser: argparse.ArgumentParser, root: Path, output_dir: Path) -> None:
    """curve.json and curve.md, the references and the untrained start model taken from ablation.json (same
    benchmark, length and protocol)."""
    runs = read_curve(root)
    if not runs:
        parser.error(f"{root} holds no finished run (steps-N/VARIANT-sSEED/suite.json): run run_ablation.sh with "
                     "STEPS=N first.")
    ablation_file = output_dir / "ablation.json"
    if not ablation_file.is_file():
        parser.error(f"{ablation_file} is missing: the curve takes its reference rows from the ablation's record; "
                     "pass the --output-dir that holds it")
    ablation = json.loads(ablation_file.read_text(encoding="utf-8"))["metrics"]
    metrics = {"commands": CURVE_COMMANDS, "benchmarks": sorted(runs[0]["suite"]), "metric": METRIC, "runs": runs,
               "baselines": {label: scores for label, scores in ablation["baselines"].items()
                             if label.startswith("PMA") or "reference" in label}}
    write_summary(output_dir, "curve", metrics, curve_markdown(metrics))


def write_summary(folder: Path, name: str, metrics: dict, table: str) -> None:
    """FOLDER/NAME.json, the record (c2llm_plumbing.records), then FOLDER/NAME.md, the table rendered from it; each
    atomically, so a kill leaves every file whole."""
    write_record(name, metrics, [load_line("the end")], folder)
    write_atomically(folder / f"{name}.md", table)


if __name__ == "__main__":
    main()
