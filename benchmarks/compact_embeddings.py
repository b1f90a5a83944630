"""Compact embeddings three ways, on the offline default recipe: nDCG@10 on the nine sets at d = 384, 256, 128, 64.

    python benchmarks/compact_embeddings.py [--runs-dir runs] [--record-name compact_embeddings]

(a) a PMA head of width d (the C2LLM report's way to compact embeddings; one model per d),
(b) Matryoshka training at full width (MatryoshkaLoss at 384/256/128/64), truncated to d,
(c) the shipped default model (no Matryoshka) truncated to d,
plus the bytes a float32 vector takes. Every model comes from train/configs/default-minilm.yaml with one change
(same data, steps and start model), trained by:

    python -m train.train train/configs/default-minilm.yaml --output-dir runs/mrl \\
        --set 'loss.matryoshka_dims=[384,256,128,64]'
    python -m train.train train/configs/default-minilm.yaml --output-dir runs/pma128 --set model.head_dim=128
    (and runs/pma256, runs/pma64 alike; the width-384 head is the default recipe itself: default_model/)

Each model is scored by `python -m evaluation.suite` (all queries, full corpora, fp32, 256 tokens), at full width
and with `--truncate-dim` from one encoding; its results are kept as JSON under --runs-dir/compact-eval, so a
model is evaluated once and the table can be printed as the runs finish. A model not trained yet is a row of "-".
The shipped default's scores come from the offline headline's record (benchmarks/results/offline_quality.json)
when that run evaluated the same sets the same way and default_model/ has not changed since its commit, so one
number is computed once; otherwise the default is evaluated here like the others.
The figures go to the record benchmarks/results/compact_embeddings.json, which the docs' tables render from.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path
from statistics import mean

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/compact_embeddings.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from c2llm_plumbing.atomic import write_atomically  # noqa: E402

WIDTHS = (384, 256, 128, 64)
# how evaluate() runs evaluation.suite; the offline record's command must hold the same to stand in for it
SUITE_OPTIONS = ("--max-seq-length 256", "--dtype float32", "--truncate-dim " + " ".join(map(str, WIDTHS[1:])))
NINE_SETS = ("cosqa_test", "mbpp", "humaneval", "spider_dev_text2sql", "conala_en", "csn_python_from_cosqa_codebase",
             "humanevalx_py2cpp", "humanevalx_py2rust", "codexglue_refine_small_test")
FLOAT32_BYTES = 4


def models(runs_dir: Path) -> dict[str, Path]:
    """Evaluated model name -> folder: (c) the shipped default, (b) the matryoshka run, (a) one run per PMA width."""
    folders = {"default": REPO_ROOT / "default_model", "mrl": runs_dir / "mrl" / "final"}
    folders |= {f"pma{width}": runs_dir / f"pma{width}" / "final" for width in WIDTHS[1:]}
    return folders


def evaluate(name: str, folder: Path, results_dir: Path, benchmarks: Path) -> None:
    """`results_dir/NAME.json` (and NAME@D.json per truncated width) from one evaluation.suite run, unless there."""
    from evaluation import suite

    output = results_dir / f"{name}.json"
    if not (folder / "modules.json").is_file() or set(NINE_SETS) <= set(read_results(output)):
        return  # not trained yet, or evaluated (a run stopped halfway saved only some sets: it is run again)
    options = [word for option in SUITE_OPTIONS for word in option.split()]
    suite.main(["--model", str(folder), "--data", *(str(benchmarks / data) for data in NINE_SETS), *options,
                "--no-progress",
                "--output", str(output), "--markdown", str(results_dir / f"{name}.md")])


def default_from_offline_record(results_dir: Path, record: Path) -> bool:
    """Write the default's `default.json` / `default@D.json` from the offline headline's record, if that run scored
    the nine sets at 256 tokens in float32 with these truncated widths, of the default_model/ in the tree now."""
    if not record.is_file():
        return False
    run = json.loads(record.read_text())
    command = run["command"]
    same_run = all(option in command for option in SUITE_OPTIONS) and all(data in command for data in NINE_SETS)
    unchanged = subprocess.run(["git", "diff", "--quiet", run["commit"], "--", "default_model"], cwd=REPO_ROOT,
                               capture_output=True).returncode == 0  # also False without git or that commit
    models = run["metrics"]["models"]
    names = ["default", *(f"default@{width}" for width in WIDTHS[1:])]
    if not (same_run and unchanged and all(set(NINE_SETS) <= set(models.get(name, {})) for name in names)):
        return False
    for name in names:
        scores = {data: models[name][data] for data in NINE_SETS}
        write_atomically(results_dir / f"{name}.json", json.dumps(scores, indent=2) + "\n")
    return True


def read_results(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def average_ndcg(results_dir: Path, name: str, width: int | None) -> float | None:
    results = read_results(results_dir / (f"{name}.json" if width is None else f"{name}@{width}.json"))
    if not set(NINE_SETS) <= set(results):
        return None
    return mean(results[data]["ndcg@10"] for data in NINE_SETS)


def table(results_dir: Path) -> str:
    """One row per width: (a), (b), (c) average nDCG@10 over the nine sets, and the bytes of a float32 vector."""
    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    lines = ["| d | bytes per vector (float32) | (a) PMA head of width d | (b) Matryoshka, truncated to d | "
             "(c) default model, truncated to d |", "| ---: | ---: | ---: | ---: | ---: |"]
    for width in WIDTHS:
        full = width == WIDTHS[0]
        head = average_ndcg(results_dir, "default" if full else f"pma{width}", None)  # the default head is 384 wide
        matryoshka = average_ndcg(results_dir, "mrl", None if full else width)
        truncated = average_ndcg(results_dir, "default", None if full else width)
        lines.append(f"| {width} | {width * FLOAT32_BYTES} | {cell(head)} | {cell(matryoshka)} | {cell(truncated)} |")
    return "\n".join(lines) + "\n"


def per_set_table(results_dir: Path) -> str:
    """nDCG@10 per set of every evaluated (model, width)."""
    lines = ["| model | " + " | ".join(NINE_SETS) + " | average |", "| --- |" + " ---: |" * (len(NINE_SETS) + 1)]
    for path in sorted(results_dir.glob("*.json")):
        results = read_results(path)
        if not set(NINE_SETS) <= set(results):
            continue
        scores = [results[data]["ndcg@10"] for data in NINE_SETS]
        lines.append(f"| {path.stem} | " + " | ".join(f"{s:.3f}" for s in scores) + f" | {mean(scores):.3f} |")
    return "\n".join(lines) + "\n"


def figures(results_dir: Path) -> dict:
    """The record's metrics: the averages per width and route (None: not run) and every model's per-set scores."""
    averages = {}
    for width in WIDTHS:
        full = width == WIDTHS[0]
        averages[str(width)] = {"pma_head": average_ndcg(results_dir, "default" if full else f"pma{width}", None),
                                "matryoshka": average_ndcg(results_dir, "mrl", None if full else width),
                                "default_truncated": average_ndcg(results_dir, "default", None if full else width)}
    per_set = {}
    for path in sorted(results_dir.glob("*.json")):
        results = read_results(path)
        if set(NINE_SETS) <= set(results):
            scores = {data: results[data]["ndcg@10"] for data in NINE_SETS}
            per_set[path.stem] = {**scores, "average": mean(scores.values())}
    return {"bytes_per_dimension": FLOAT32_BYTES, "averages": averages, "sets": list(NINE_SETS), "per_set": per_set}


def main(argv: list[str] | None = None) -> int:
    from benchmarks.common import add_record_argument, load_line, write_record

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-dir", type=Path, default=REPO_ROOT / "runs", help="where the runs above were trained")
    parser.add_argument("--benchmarks", type=Path, default=REPO_ROOT.parent / "shared" / "data" / "benchmarks",
                        help="the folder holding the nine BEIR sets (../shared/data/benchmarks)")
    parser.add_argument("--offline-record", type=Path, default=REPO_ROOT / "benchmarks" / "results" /
                        "offline_quality.json", help="the offline headline's record, whose default scores are "
                        "reused when it ran the same evaluation (see above)")
    add_record_argument(parser, "compact_embeddings")
    args = parser.parse_args(argv)
    missing = [data for data in NINE_SETS if not (args.benchmarks / data).is_dir()]
    if missing:
        parser.exit(2, f"error: {args.benchmarks} lacks {', '.join(missing)}: the nine sets come with the project's "
                       "data (../shared/data, see its README).\n")
    results_dir = args.runs_dir / "compact-eval"
    results_dir.mkdir(parents=True, exist_ok=True)
    loads = [load_line("start")]
    if not (results_dir / "default.json").is_file() and default_from_offline_record(results_dir, args.offline_record):
        print(f"default: the scores of {args.offline_record.name} (the same evaluation, the same default_model/)")
    for name, folder in models(args.runs_dir).items():
        evaluate(name, folder, results_dir, args.benchmarks)
    print(f"Average nDCG@10 over the nine sets\n\n{table(results_dir)}\nPer set\n\n{per_set_table(results_dir)}")
    loads.append(load_line("end"))
    argv = sys.argv if argv is None else [__file__, *argv]
    print(f"record: {write_record(args.record_name, figures(results_dir), loads, args.record_dir, argv)}")
    return 0


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from benchmarks.tables import SET_NAMES, markdown_table, number  # noqa: E402


def compact_embeddings(record: dict) -> str:
    """Average nDCG@10 of the nine sets per width: a PMA head of width d, Matryoshka cut to d, the default cut."""
    averages = record["metrics"]["averages"]
    rows = []
    for width, routes in averages.items():
        cells = [number(routes[route]) if routes.get(route) is not None else "not run"
                 for route in ("pma_head", "matryoshka", "default_truncated")]
        rows.append([width, f"{int(width) * record['metrics']['bytes_per_dimension']:,}", *cells])
    return markdown_table(["d", "bytes per vector (float32)", "(a) PMA head of width d",
                           "(b) Matryoshka, truncated to d", "(c) default model, truncated to d"], rows, "rrrrr")


def compact_embeddings_per_set(record: dict) -> str:
    """nDCG@10 per set of every evaluated model and width."""
    per_set = record["metrics"]["per_set"]
    sets = record["metrics"]["sets"]
    rows = [[model, *(number(scores[data]) for data in sets), number(scores["average"])]
            for model, scores in per_set.items()]
    return markdown_table(["model", *(SET_NAMES.get(data, data) for data in sets), "average"], rows,
                          "l" + "r" * (len(sets) + 1))


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "compact_embeddings": (("compact_embeddings",), compact_embeddings),
    "compact_embeddings_per_set": (("compact_embeddings",), compact_embeddings_per_set),
}


if __name__ == "__main__":
    sys.exit(main())
