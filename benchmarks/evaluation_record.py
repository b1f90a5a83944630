"""Run the offline evaluation suite and keep its figures as one record in benchmarks/results/.

    python benchmarks/evaluation_record.py NAME SUITE_ARGUMENTS...

    B=../shared/data/benchmarks
    python benchmarks/evaluation_record.py offline_quality --model default --compare minilm bm25 \\
        --data $B/cosqa_test $B/mbpp $B/humaneval $B/spider_dev_text2sql $B/conala_en \\
        $B/csn_python_from_cosqa_codebase $B/humanevalx_py2cpp $B/humanevalx_py2rust \\
        $B/codexglue_refine_small_test --max-seq-length 256 --dtype float32

SUITE_ARGUMENTS are `python -m evaluation.suite`'s (without --output: the record replaces it). The record
`benchmarks/results/NAME.json` (`benchmarks.common.write_record`) holds, under `metrics`, every model's figures per
benchmark folder (`models`: {label: {folder: {metric: value}}}, truncated widths as `label@width`) and each folder's
size as evaluated (`sets`: {folder: {queries, corpus}}); `python -m benchmarks.render` writes the docs' tables from it.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/evaluation_record.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.common import RESULTS_DIR, commit_line, load_line, write_record  # noqa: E402

RUN_STEM = "run"


def suite_figures(output_dir: Path, first_label: str) -> dict[str, dict]:
    """{label: {folder: metrics}} from one suite run's --output files: `run.json` is --model's (`first_label`),
    `run.LABEL.json` a compared model's, `run@D.json` / `run.LABEL@D.json` a truncated width's."""
    figures = {}
    for path in sorted(output_dir.glob(f"{RUN_STEM}*.json")):
        suffix = path.stem[len(RUN_STEM):]
        label = suffix[1:] if suffix.startswith(".") else first_label + suffix
        figures[label] = json.loads(path.read_text(encoding="utf-8"))
    return figures


def set_sizes(suite_args: argparse.Namespace) -> dict[str, dict[str, int]]:
    """Each benchmark folder's judged queries and corpus documents, cut as the run cut them."""
    from c2llm_data.beir import expand_benchmark_folders, load_beir

    sizes = {}
    for folder in expand_benchmark_folders(suite_args.data):
        dataset = load_beir(folder, suite_args.max_queries, suite_args.max_corpus)
        sizes[dataset.name] = {"queries": len(dataset.queries), "corpus": len(dataset.corpus)}
    return sizes


def main(argv: list[str] | None = None) -> int:
    from evaluation import suite
    from evaluation.models import resolve_model

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python benchmarks/evaluation_record.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="the record's name: benchmarks/results/NAME.json (e.g. offline_quality)")
    parser.add_argument("--record-dir", type=Path, default=RESULTS_DIR, metavar="DIR",
                        help="folder of the record (default: benchmarks/results); give another for trial runs")
    args, suite_argv = parser.parse_known_args(argv)
    suite_args = suite.build_parser().parse_args(suite_argv)
    if suite_args.output is not None:
        parser.error("leave out --output: the record (benchmarks/results/NAME.json) holds the figures")
    loads, commit = [load_line("start")], commit_line()  # the code that runs, however long the run takes
    with tempfile.TemporaryDirectory(prefix="evaluation-record-") as scratch:
        code = suite.main([*suite_argv, "--output", str(Path(scratch) / f"{RUN_STEM}.json")])
        if code:
            return code
        models = suite_figures(Path(scratch), resolve_model(suite_args.model).label)
    loads.append(load_line("end"))
    path = write_record(args.name, {"models": models, "sets": set_sizes(suite_args)}, loads, args.record_dir,
                        argv=[__file__, *argv], commit=commit)
    print(f"record: {path}")
    return 0


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from statistics import mean  # noqa: E402

from benchmarks.tables import IN_DISTRIBUTION, NINE_SETS, SET_NAMES, markdown_table, number  # noqa: E402


# the offline_quality record's models (the suite's labels), as the README's headline table names them; the shipped
# one is in bold
OFFLINE_MODELS = {"bm25": "BM25", "minilm": "all-MiniLM-L6-v2 (stock)", "default": "default_model"}


SHIPPED_MODEL = "default"


def offline_quality(record: dict) -> str:
    """nDCG@10 of BM25, the stock all-MiniLM-L6-v2 and the default model on the nine sets (all queries, full
    corpora) from one suite run, their average, and the average of the sets the default model did not train on."""
    models = record["metrics"]["models"]
    unseen = [data for data in NINE_SETS if data != IN_DISTRIBUTION]
    rows = []
    for label, title in OFFLINE_MODELS.items():
        scores = {data: models[label][data]["ndcg@10"] for data in NINE_SETS}
        average = number(mean(scores.values()))
        if label == SHIPPED_MODEL:
            title, average = f"**{title}**", f"**{average}**"
        rows.append([title, *map(number, scores.values()), average, number(mean(scores[data] for data in unseen))])
    return markdown_table(["", *NINE_SETS.values(), "average", f"without {NINE_SETS[IN_DISTRIBUTION]}"], rows,
                          "l" + "r" * (len(NINE_SETS) + 2))


def suite_sizes(record: dict, data: str) -> str:
    sizes = record["metrics"]["sets"][data]
    return f"{sizes['queries']:,} / {sizes['corpus']:,}"


def evaluation_bm25(record: dict) -> str:
    """BM25 on all thirteen folders: nDCG@10, MRR@10, Recall@100 per folder and their averages."""
    scores = record["metrics"]["models"]["bm25"]
    names = ("ndcg@10", "mrr@10", "recall@100")
    rows = [[data, suite_sizes(record, data), *(number(scores[data][name]) for name in names)] for data in scores]
    rows.append(["**average**", "", *(number(mean(values[name] for values in scores.values())) for name in names)])
    return markdown_table(["benchmark", "queries / corpus", "nDCG@10", "MRR@10", "Recall@100"], rows, "lrrrr")


def evaluation_ndcg(record: dict) -> str:
    """nDCG@10 of every model of an evaluation record on each of its benchmark folders: each model, then its
    truncated widths (`label@width`), widest first."""
    sets = list(record["metrics"]["sets"])

    def order(label: str) -> tuple[str, int]:
        model, _, width = label.partition("@")
        return model, -int(width or sys.maxsize)

    models = record["metrics"]["models"]
    rows = [[label, *(number(models[label][data]["ndcg@10"]) for data in sets)] for label in sorted(models, key=order)]
    return markdown_table(["model", *(SET_NAMES.get(data, data) for data in sets)], rows, "l" + "r" * len(sets))


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "offline_quality": (("offline_quality",), offline_quality),
    "offline_quality_all": (("offline_quality",), evaluation_ndcg),
    "evaluation_bm25": (("evaluation_bm25",), evaluation_bm25),
}


if __name__ == "__main__":
    sys.exit(main())
