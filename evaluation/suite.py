"""Offline benchmark suite: nDCG@10 (headline), MRR@10 and Recall@100 on local BEIR folders.

    python -m evaluation.suite --model . --compare bm25 minilm \\
        --data ../shared/data/benchmarks/* --output c2llm.json

Evaluates `--model` (and every `--compare` model, in the same run and table) on each BEIR folder,
prints a Markdown table, and writes `{benchmark_folder_name: {"ndcg@10": x, "mrr@10": y,
"recall@100": z}, ...}` to `--output` (compared models to `OUTPUT_STEM.LABEL.json` beside it).
Dense models get the prompts of the MTEB-Code task closest to each benchmark (see `c2llm_data.tasks`).
`--truncate-dim 256 128` also scores every dense model's embeddings cut to those widths (rows `LABEL@256`, ...),
from the same full-width encoding.

mteb computes every number: each folder runs as the mteb retrieval task `LocalBEIR-FOLDER` (`evaluation.local_tasks`),
dense models through mteb's sentence-transformers wrapper, BM25 through mteb's `BM25Search` with the project's code
tokens; this module picks the models and prompts and writes the report. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from operator import itemgetter
from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING

from c2llm_data.beir import BeirDataset, expand_benchmark_folders, load_beir
from c2llm_data.markdown import markdown_table
from c2llm_data.tasks import (
    DOCUMENT_SIDE,
    QUERY_SIDE,
    closest_mteb_task,
    parse_prompt_task_overrides,
    prompt_name_for,
)
from c2llm_data.tokens import code_tokens
from c2llm_plumbing.atomic import write_atomically
from evaluation.local_tasks import alias_local_task_prompts, local_beir_task
from evaluation.models import (
    ModelChoice,
    ModelNotFoundError,
    add_model_loading_arguments,
    load_sentence_transformer,
    resolve_model,
)
from evaluation.outputs import check_output_files, is_json_of_numbers, output_problem

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger("evaluation.suite")

JSON_DECIMALS = 4
TABLE_DECIMALS = 3
METRIC_HEADERS = {"ndcg@10": "nDCG@10", "mrr@10": "MRR@10", "recall@100": "Recall@100"}
NO_PROMPT = "-"
# The suite's metrics, in table order (nDCG@10 is the headline), and mteb's names for them.
MTEB_METRICS = {"ndcg@10": "ndcg_at_10", "mrr@10": "mrr_at_10", "recall@100": "recall_at_100"}
METRIC_NAMES = tuple(MTEB_METRICS)
MTEB_BM25 = "mteb/baseline-bm25s"  # mteb's registered BM25 (bm25s) baseline


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


class TruncatedEncoder:
    """An mteb encoder giving the first `width` dimensions of another encoder's embeddings, as sentence-transformers'
    `truncate_dim` does (Matryoshka); the model's similarity (cosine) normalises the cut vectors."""

    def __init__(self, encoder, width: int) -> None:
        self.encoder, self.width = encoder, width

    @property
    def mteb_model_meta(self):
        return self.encoder.mteb_model_meta

    def encode(self, inputs, **kwargs):
        return self.encoder.encode(inputs, **kwargs)[:, : self.width]  # (n, d) -> (n, width)

    def similarity(self, embeddings1, embeddings2):
        return self.encoder.similarity(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1, embeddings2):
        return self.encoder.similarity_pairwise(embeddings1, embeddings2)


def bm25_search():
    """mteb's BM25 search over the project's code tokens (those codesearch's index ranks with).

    `freq_threshold=0`: no word is dropped as too frequent, as in codesearch; mteb's default would drop the words of
    90% of a corpus's documents. The registered `mteb/baseline-bm25s` entry names it (it is loaded directly because
    mteb's loader demands PyStemmer, which a custom tokenizer never uses).
    """
    import bm25s
    import mteb
    from mteb.models.model_implementations.bm25 import BM25Search

    logging.getLogger(bm25s.__name__).setLevel(logging.WARNING)  # bm25s sets its own logger to DEBUG on import
    search = BM25Search(tokenizer=code_tokens, freq_threshold=0)
    search.mteb_model_meta = mteb.get_model_meta(MTEB_BM25)
    return search


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


def headline_metrics(task_result) -> dict[str, float]:
    """The suite's three numbers from mteb's result of one local task."""
    return {name: float(task_result.get_score(getter=itemgetter(key))) for name, key in MTEB_METRICS.items()}


def encoders_by_width(choice: ModelChoice, args: argparse.Namespace, cache_folder: Path, local_tasks: dict[str, str]):
    """width -> mteb encoder (or BM25 search) of `choice`, full width (None) first, and the model (None for BM25).

    Dense models with `--truncate-dim` widths below their own are encoded once: mteb's `CachedEmbeddingWrapper`
    keeps every full-width embedding in `cache_folder`, and each width cuts those.
    """
    if choice.is_bm25:
        return {None: bm25_search()}, None
    from mteb.models import SentenceTransformerEncoderWrapper
    from mteb.models.cache_wrappers import CachedEmbeddingWrapper

    model = load_sentence_transformer(choice, args)
    encoder = SentenceTransformerEncoderWrapper(model)
    alias_local_task_prompts(encoder, local_tasks)  # each local task gets its closest MTEB-Code task's prompts
    # get_embedding_dimension: sentence-transformers >= 6; the other name: 5.x
    full_width = getattr(model, "get_embedding_dimension", model.get_sentence_embedding_dimension)()
    widths = [width for width in args.truncate_dim if width < full_width]
    if not widths:
        return {None: encoder}, model
    cached = CachedEmbeddingWrapper(encoder, cache_folder / choice.label)
    return {None: cached, **{width: TruncatedEncoder(cached, width) for width in widths}}, model


def run_model(
    choice: ModelChoice,
    datasets: list[BeirDataset],
    args: argparse.Namespace,
    prompt_tasks: dict[str, str],
    on_benchmark_done: Callable[[ModelRun], None] | None = None,
) -> list[ModelRun]:
    """Evaluate one model on every dataset through mteb, at full width and at each `--truncate-dim` below the model's
    own; `on_benchmark_done(run)` after each dataset (e.g. to save progress). One run per width, full width first."""
    import mteb
    from tqdm.auto import tqdm

    tasks = {dataset.name: local_beir_task(dataset) for dataset in datasets}
    closest = {dataset.name: closest_mteb_task(dataset.name, prompt_tasks) for dataset in datasets}
    local_tasks = {task.metadata.name: closest[name] for name, task in tasks.items()}
    with tempfile.TemporaryDirectory(prefix="suite-embeddings-") as cache_folder:
        encoders, model = encoders_by_width(choice, args, Path(cache_folder), local_tasks)
        runs = [ModelRun(choice, width) for width in encoders]
        for dataset in tqdm(datasets, desc=f"{choice.label}: benchmarks", disable=args.no_progress):
            task = closest[dataset.name]
            prompts = NO_PROMPT if model is None else describe_prompts(model, prompt_names_for(model, task))
            for run, encoder in zip(runs, encoders.values()):
                started = time.perf_counter()  # the full width encodes; the truncated widths reuse its embeddings
                if model is None and not any(map(code_tokens, dataset.corpus.values())):
                    metrics = dict.fromkeys(METRIC_NAMES, 0.0)  # bm25s cannot index a corpus without a word
                else:
                    result = mteb.evaluate(
                        encoder, tasks[dataset.name], cache=None, co2_tracker=False, show_progress_bar=False,
                        encode_kwargs={"batch_size": args.batch_size, "show_progress_bar": not args.no_progress},
                    )
                    metrics = headline_metrics(result.task_results[0])
                run.metrics[dataset.name] = metrics
                run.prompts[dataset.name], run.seconds[dataset.name] = prompts, time.perf_counter() - started
                logger.info("%s on %s: %s", run.label, dataset.name, format_metrics(run.metrics[dataset.name]))
                if on_benchmark_done is not None:
                    on_benchmark_done(run)
    return runs


def save_metrics(path: Path, run: ModelRun) -> None:
    """The run's metrics so far as `--output` JSON (`STEM@WIDTH.json` beside it for a truncated width), atomically."""
    if run.width is not None:
        path = path.with_name(f"{path.stem}@{run.width}{path.suffix}")
    write_atomically(path, json.dumps(rounded(run.metrics), indent=2) + "\n")


def format_metrics(metrics: dict[str, float]) -> str:
    return ", ".join(f"{METRIC_HEADERS[name]} {metrics[name]:.{TABLE_DECIMALS}f}" for name in METRIC_NAMES)


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
        lines += ["#### nDCG@10", "", markdown_table(header, rows), ""]
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
        lines += [title, "", markdown_table(header, rows, "ll" + "r" * (len(header) - 2)), ""]
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
    # A new embedding cache is expected: mteb's warnings that it starts empty say nothing.
    logging.getLogger("mteb.models.cache_wrappers").setLevel(logging.ERROR)
    if args.no_progress:  # the bars of the libraries mteb drives, which it gives no show_progress
        import datasets

        datasets.disable_progress_bars()
        os.environ.setdefault("DISABLE_TQDM", "1")  # bm25s reads it when first imported
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
    for path in paths[1:] if args.output else []:  # the compared models' files beside --output
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
        write_atomically(args.markdown, report)
    for choice, path in zip(choices, paths):
        if path is not None:
            logger.info("wrote %s results to %s", choice.label, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
