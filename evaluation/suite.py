"""Offline benchmark suite: nDCG@10 (headline), MRR@10 and Recall@100 on local BEIR folders.

    python -m evaluation.suite --model . --compare bm25 minilm \\
        --data ../shared/data/benchmarks/* --output c2llm.json

Evaluates `--model` (and every `--compare` model, in the same run and table) on each BEIR folder,
prints a Markdown table, and writes `{benchmark_folder_name: {"ndcg@10": x, "mrr@10": y,
"recall@100": z}, ...}` to `--output` (compared models to `OUTPUT_STEM.LABEL.json` beside it).
Dense models get the prompts of the MTEB-Code task closest to each benchmark (see `evaluation.tasks`).
`--truncate-dim 256 128` also scores every dense model's embeddings cut to those widths (rows `LABEL@256`, ...),
from the same full-width encoding.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING

from evaluation.baselines import BM25Baseline
from evaluation.beir import BeirDataset, expand_benchmark_folders, load_beir
from evaluation.metrics import METRIC_NAMES, build_evaluator, headline_metrics
from evaluation.models import (
    ModelChoice,
    ModelNotFoundError,
    add_model_loading_arguments,
    load_sentence_transformer,
    resolve_model,
)
from evaluation.outputs import check_output_files, is_json_of_numbers, output_problem, write_text_atomically
from evaluation.tasks import (
    DOCUMENT_SIDE,
    QUERY_SIDE,
    closest_mteb_task,
    parse_prompt_task_overrides,
    prompt_name_for,
)

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger("evaluation.suite")

JSON_DECIMALS = 4
TABLE_DECIMALS = 3
METRIC_HEADERS = {"ndcg@10": "nDCG@10", "mrr@10": "MRR@10", "recall@100": "Recall@100"}
NO_PROMPT = "-"


@dataclass
class ModelRun:
    """One model's results: benchmark -> metrics, plus what it took and which prompts it got."""

    choice: ModelChoice
    width: int | None = None  # embeddings truncated to this many dimensions (None: as the model gives them)
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.choice.label if self.width is None else f"{self.choice.label}@{self.width}"


class FullWidthCache:
    """Stands in for a SentenceTransformer in `InformationRetrievalEvaluator`: every text list is encoded once, at
    full width, and an evaluator with `truncate_dim` gets the first columns of it, as sentence-transformers' own
    truncation would give (cosine scores normalise the cut vectors)."""

    def __init__(self, model: SentenceTransformer) -> None:
        self.model, self.encoded = model, {}

    def _encode(self, side: str, sentences, truncate_dim: int | None = None, **kwargs):
        key = (side, kwargs.get("prompt_name"), kwargs.get("prompt"), tuple(sentences))
        if key not in self.encoded:
            self.encoded[key] = getattr(self.model, f"encode_{side}")(sentences, **kwargs)  # (n, d)
        return self.encoded[key][:, :truncate_dim]  # (n, truncate_dim or d)

    def encode_query(self, sentences, **kwargs):
        return self._encode("query", sentences, **kwargs)

    def encode_document(self, sentences, **kwargs):
        return self._encode("document", sentences, **kwargs)


def prompt_names_for(model: SentenceTransformer, task: str | None) -> tuple[str | None, str | None]:
    """(query, document) prompt names `model` defines for `task`, in mteb's order of preference."""
    return prompt_name_for(model.prompts, task, QUERY_SIDE), prompt_name_for(model.prompts, task, DOCUMENT_SIDE)


def describe_prompts(model: SentenceTransformer, names: tuple[str | None, str | None]) -> str:
    """For the table: "CosQA" for the pair CosQA-query / CosQA-document, else "query name / document
    name"; empty prompts (e.g. MiniLM's) count as none."""
    query_name, document_name = (name if name and model.prompts.get(name) else NO_PROMPT for name in names)
    task = query_name.removesuffix(f"-{QUERY_SIDE}")
    if task != query_name and document_name == f"{task}-{DOCUMENT_SIDE}":
        return task
    return NO_PROMPT if query_name == document_name == NO_PROMPT else f"{query_name} / {document_name}"


def evaluate_sentence_transformer(
    model: SentenceTransformer, dataset: BeirDataset, task: str | None, *, batch_size: int, show_progress: bool,
    widths: tuple[int | None, ...] = (None,),
) -> tuple[list[dict[str, float]], str]:
    """Metrics of a dense model on `dataset` with the prompts of `task`, one per entry of `widths` (None: full
    width; the texts are encoded once), and a description of those prompts."""
    query_prompt, document_prompt = prompt_names_for(model, task)
    cache, metrics = FullWidthCache(model), []
    for width in widths:
        evaluator = build_evaluator(
            dataset,
            batch_size=batch_size,
            show_progress_bar=show_progress,
            query_prompt_name=query_prompt,
            document_prompt_name=document_prompt,
            score_functions={model.similarity_fn_name: model.similarity},
            truncate_dim=width,
        )
        scores = evaluator.compute_all_metrics(cache if len(widths) > 1 else model)
        metrics.append(headline_metrics(scores[model.similarity_fn_name]))
    return metrics, describe_prompts(model, (query_prompt, document_prompt))


def run_model(
    choice: ModelChoice,
    datasets: list[BeirDataset],
    args: argparse.Namespace,
    prompt_tasks: dict[str, str],
    on_benchmark_done: Callable[[ModelRun], None] | None = None,
) -> list[ModelRun]:
    """Evaluate one model on every dataset, at full width and at each `--truncate-dim` below the model's own;
    `on_benchmark_done(run)` after each dataset (e.g. to save progress). One run per width, full width first."""
    # Imported before the clock starts, so the first benchmark's time is comparable with the others'.
    import sentence_transformers.sentence_transformer.evaluation  # noqa: F401
    from tqdm.auto import tqdm

    model = None if choice.is_bm25 else load_sentence_transformer(choice, args)
    full_width = None
    if model is not None:  # get_embedding_dimension: sentence-transformers >= 6; the other name: 5.x
        full_width = getattr(model, "get_embedding_dimension", model.get_sentence_embedding_dimension)()
    widths = (None, *(width for width in args.truncate_dim if full_width and width < full_width))
    runs = [ModelRun(choice, width) for width in widths]
    for dataset in tqdm(datasets, desc=f"{choice.label}: benchmarks", disable=args.no_progress):
        started = time.perf_counter()
        if model is None:
            metrics, prompts = [BM25Baseline().evaluate(dataset, show_progress=not args.no_progress)], NO_PROMPT
        else:
            task = closest_mteb_task(dataset.name, prompt_tasks)
            metrics, prompts = evaluate_sentence_transformer(
                model, dataset, task, batch_size=args.batch_size, show_progress=not args.no_progress, widths=widths
            )
        seconds = time.perf_counter() - started  # one encoding serves every width
        for run, run_metrics in zip(runs, metrics):
            run.metrics[dataset.name], run.prompts[dataset.name] = run_metrics, prompts
            run.seconds[dataset.name] = seconds
            logger.info("%s on %s: %s", run.label, dataset.name, format_metrics(run_metrics))
        if on_benchmark_done is not None:
            for run in runs:
                on_benchmark_done(run)
    return runs


def save_metrics(path: Path, run: ModelRun) -> None:
    """The run's metrics so far as `--output` JSON (`STEM@WIDTH.json` beside it for a truncated width), atomically."""
    if run.width is not None:
        path = path.with_name(f"{path.stem}@{run.width}{path.suffix}")
    write_text_atomically(path, json.dumps(rounded(run.metrics), indent=2) + "\n")


def format_metrics(metrics: dict[str, float]) -> str:
    return ", ".join(f"{METRIC_HEADERS[name]} {metrics[name]:.{TABLE_DECIMALS}f}" for name in METRIC_NAMES)


def _table(header: list[str], rows: list[list[str]], text_columns: int = 1) -> list[str]:
    """A Markdown table; the first `text_columns` columns are left-aligned, numbers right-aligned."""
    alignments = [":---" if i < text_columns else "---:" for i in range(len(header))]
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(alignments) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _number(value: float) -> str:
    return f"{value:.{TABLE_DECIMALS}f}"


def hardware_description(device: str | None) -> str:
    """CPU (or GPU) model, core count and library versions, for the line under the table."""
    import torch

    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        lines = cpuinfo.read_text().splitlines()
        names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
        cpu = names[0] if names else cpu
    parts = [f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} (threads: {torch.get_num_threads()})"]
    if (device or "").startswith("cuda") or (device is None and torch.cuda.is_available()):
        parts.append(f"GPU {torch.cuda.get_device_name()}")
    else:
        parts.append("no GPU")
    return ", ".join(parts)


def markdown_report(runs: list[ModelRun], datasets: list[BeirDataset], command: str, hardware: str) -> str:
    """Markdown tables: nDCG@10 of every model side by side, then each model's three metrics."""
    names = [dataset.name for dataset in datasets]
    sizes = {dataset.name: (len(dataset.queries), len(dataset.corpus)) for dataset in datasets}
    lines = []
    if len(runs) > 1:
        header = ["benchmark", "queries", "corpus", *(f"{run.label} nDCG@10" for run in runs)]
        rows = [
            [name, str(sizes[name][0]), str(sizes[name][1]), *(_number(run.metrics[name]["ndcg@10"]) for run in runs)]
            for name in names
        ]
        rows.append(["**average**", "", "", *(_number(mean(run.metrics[n]["ndcg@10"] for n in names)) for run in runs)])
        lines += ["#### nDCG@10", "", *_table(header, rows), ""]
    for run in runs:
        header = ["benchmark", "prompts", *(METRIC_HEADERS[m] for m in METRIC_NAMES), "time (s)"]
        rows = [
            [
                name, run.prompts[name], *(_number(run.metrics[name][metric]) for metric in METRIC_NAMES),
                f"{run.seconds[name]:.0f}",
            ]
            for name in names
        ]
        averages = [_number(mean(run.metrics[n][m] for n in names)) for m in METRIC_NAMES]
        rows.append(["**average**", "", *averages, f"{sum(run.seconds.values()):.0f}"])
        title = f"#### {run.label} ({run.choice.location or 'bm25s'})"
        lines += [title, "", *_table(header, rows, text_columns=2), ""]
    lines += [f"Command: `{command}`", "", f"Hardware: {hardware}", ""]
    return "\n".join(lines)


def output_paths(output: Path, choices: list[ModelChoice]) -> list[Path]:
    """`output` for the first model; `STEM.LABEL.json` beside it for each compared model."""
    paths = [output]
    for choice in choices[1:]:
        candidate = output.with_name(f"{output.stem}.{choice.label}{output.suffix or '.json'}")
        while candidate in paths:  # two compared folders with the same name
            candidate = candidate.with_name(f"{candidate.stem}_{len(paths)}{candidate.suffix}")
        paths.append(candidate)
    return paths


def is_suite_results(text: str) -> bool:
    """Whether a file's text is an earlier `--output` of this command ({benchmark: {metric: number}})."""
    return is_json_of_numbers(text, depth=2)


def is_suite_report(text: str) -> bool:
    """Whether a file's text is an earlier `--markdown` report of this command."""
    return "Command: `python -m evaluation.suite" in text


def rounded(metrics: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    return {bench: {name: round(value, JSON_DECIMALS) for name, value in values.items()} for bench, values in
            metrics.items()}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.suite",
        description=__doc__.split("\n\n")[0],
        epilog="Details, benchmark list and measured tables: evaluation/README.md",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--model", required=True,
        help="model to evaluate: a model folder (e.g. . for C2LLM), a Hub id, or bm25 / minilm / default.",
    )
    parser.add_argument(
        "--compare", nargs="+", default=[], metavar="MODEL",
        help="more models for the same run and table, e.g. --compare bm25 minilm (same forms as --model).",
    )
    parser.add_argument(
        "--data", nargs="+", required=True, type=Path, metavar="DIR",
        help="BEIR folders (queries.jsonl, corpus.jsonl, qrels.tsv), or a folder of them, "
        "e.g. ../shared/data/benchmarks/*.",
    )
    parser.add_argument(
        "--output", type=Path, default=None, metavar="FILE",
        help="JSON file for --model's results ({benchmark: {ndcg@10, mrr@10, recall@100}}); "
        "compared models go to OUTPUT_STEM.LABEL.json beside it.",
    )
    parser.add_argument(
        "--markdown", type=Path, default=None, metavar="FILE", help="also write the Markdown report to this file."
    )
    parser.add_argument(
        "--max-queries", type=int, default=None, metavar="N",
        help="evaluate only the first N judged queries of each benchmark (for quick runs and CI).",
    )
    parser.add_argument(
        "--max-corpus", type=int, default=None, metavar="N",
        help="cut each corpus to N documents: the relevant ones of the kept queries, then the first others.",
    )
    parser.add_argument(
        "--prompt-task", nargs="+", default=[], metavar="FOLDER=TASK",
        help="use the prompts of this MTEB-Code task for this benchmark folder (overrides the built-in map).",
    )
    parser.add_argument(
        "--truncate-dim", nargs="+", type=int, default=[], metavar="D",
        help="also score each dense model's embeddings truncated to these widths (Matryoshka-style; widths at or "
        "above a model's own are skipped), from the same encoding.",
    )
    add_model_loading_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the suite; returns the process exit code (2 for a usage or data error)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    logging.getLogger("evaluation").setLevel(args.log_level)
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets its own logger to DEBUG on import
    if any(width < 1 for width in args.truncate_dim):
        parser.error(f"--truncate-dim widths must be at least 1, got {args.truncate_dim}.")
    for option in ("max_queries", "max_corpus", "batch_size", "max_seq_length"):
        if getattr(args, option) is not None and getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be at least 1.")
    check_output_files(parser, args, {"output": is_suite_results, "markdown": is_suite_report})
    try:
        prompt_tasks = parse_prompt_task_overrides(args.prompt_task)
        choices = [resolve_model(value) for value in [args.model, *args.compare]]
        folders = expand_benchmark_folders(args.data)
        datasets = [load_beir(folder, args.max_queries, args.max_corpus) for folder in folders]
    except (ValueError, ModelNotFoundError) as error:  # BeirFormatError, UnknownNameError, bad --prompt-task
        parser.error(str(error))
    duplicates = sorted({d.name for d in datasets if [x.name for x in datasets].count(d.name) > 1})
    if duplicates:
        parser.error(f"benchmark folder names must be unique (they key the results): {', '.join(duplicates)}")
    unused = sorted(set(prompt_tasks) - {dataset.name for dataset in datasets})
    if unused:
        parser.error(f"--prompt-task names {', '.join(unused)}, which --data does not hold: give the name of a "
                     f"benchmark folder of this run ({', '.join(dataset.name for dataset in datasets)}).")

    paths = output_paths(args.output, choices) if args.output else [None] * len(choices)
    for path in paths[1:]:  # the compared models' files beside --output
        problem = output_problem(path, is_suite_results)
        if problem:
            parser.error(f"{path} (a compared model's results, named after --output) {problem}")
    try:
        # Each benchmark's results are written as soon as they exist: a crash late in a long run keeps them.
        runs = [run for choice, path in zip(choices, paths)
                for run in run_model(choice, datasets, args, prompt_tasks, path and partial(save_metrics, path))]
    except ModelNotFoundError as error:
        parser.exit(2, f"error: {error}\n")
    command = "python -m evaluation.suite " + shlex.join(argv)
    report = markdown_report(runs, datasets, command, hardware_description(args.device))
    print(report)
    if args.markdown:
        write_text_atomically(args.markdown, report)
    for choice, path in zip(choices, paths):
        if path is not None:
            logger.info("wrote %s results to %s", choice.label, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
