"""MTEB(Code, v1) runner: our per-task prompts, mteb's result cache, the paper's table.

    python -m evaluation.mteb_code --model RELEASE --model-name ORG/NAME --revision HUB_COMMIT

runs the 12 tasks of the C2LLM paper's Table 2 through `mteb.evaluate` and prints their main score
(nDCG@10, x100) in the paper's column order. A model folder is loaded by the loader of its `ModelMeta`
(`evaluation.model_meta`): a C2LLM folder as mteb's C2LLM entries load the published weights (each
task's prompts in `prompts_dict`), any other folder by mteb's sentence-transformers wrapper, which gives
each task the model's "{Task}-query" / "{Task}-document" prompt (falling back to "query" / "document").
Results land in mteb's `ResultCache` layout, `CACHE/results/ORG__NAME/REVISION/TASK.json` plus
`model_meta.json`, ready for `ResultCache.submit_results` (see `--submit` and evaluation/README.md).

Offline, mteb cannot download task data; `--mock` runs mteb's own mock retrieval task and `--local-data`
runs local BEIR folders wrapped as mteb retrieval tasks (each with the prompts of its closest MTEB task).
Their results go to a cache of their own (`CACHE/offline-checks`), never beside a real run's.
`--mock-run FILE` writes the report of mteb's `mteb mock-run` check that mteb's pull request template asks for.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING

from c2llm_data.beir import expand_benchmark_folders, load_beir
from c2llm_data.packaged_minilm import PACKAGE as MINILM_PACKAGE
from c2llm_data.tasks import MTEB_CODE_COLUMNS, MTEB_CODE_TASKS, closest_mteb_task, unknown_name_error
from c2llm_plumbing.atomic import write_atomically
from evaluation.local_tasks import alias_local_task_prompts, local_beir_task
from evaluation.model_meta import add_model_meta_arguments, model_meta_from_folder, mteb_task_index, release_details
from evaluation.models import (
    MINILM,
    ModelChoice,
    ModelNotFoundError,
    add_model_loading_arguments,
    hub_load_error,
    load_sentence_transformer,
    resolve_model,
    sentence_transformer_kwargs,
)
from evaluation.outputs import check_output_files, is_json_of_numbers
from evaluation.submission import (
    SubmissionError,
    check_no_earlier_submission_branch,
    check_not_yet_in_mteb,
    check_submission_identity,
    check_training_datasets_known,
    write_mock_run_report,
)

if TYPE_CHECKING:
    from mteb import AbsTask
    from mteb.results import ModelResult

logger = logging.getLogger("evaluation.mteb_code")

BENCHMARK_NAME = "MTEB(Code, v1)"
MOCK_TASK_NAME = "MockRetrievalTask"
OFFLINE_CACHE_FOLDER = "offline-checks"  # inside the results cache: mock and local runs, kept apart from real ones
# Beside a model's cached results: the sha256 of the weight files that produced them. mteb's cache keys results by
# (name, revision) only, so other weights under the same pair would reuse, print and submit the first ones.
WEIGHTS_DIGEST_FILE = "weights_sha256.txt"
SCORE_SCALE = 100  # the paper reports nDCG@10 x 100
TABLE_DECIMALS = 2
MISSING = "-"


def select_tasks(names: list[str] | None) -> list[AbsTask]:
    """The benchmark's 12 tasks, or the named mteb tasks; unknown names fail with close matches."""
    import mteb

    if not names:
        return list(mteb.get_benchmark(BENCHMARK_NAME).tasks)
    known = mteb_task_index()[0]
    for name in names:
        if name not in known:
            hint = f"The {BENCHMARK_NAME} tasks are: {', '.join(MTEB_CODE_TASKS)}."
            raise unknown_name_error("mteb task", name, known, hint=hint)
    return list(mteb.get_tasks(tasks=names, exclude_superseded=False))


def mock_retrieval_task() -> AbsTask:
    """mteb's own two-query mock retrieval task (needs no download)."""
    from mteb.mocks.mock_tasks.retrieval import MockRetrievalTask

    return MockRetrievalTask()


def default_name_and_revision(choice: ModelChoice, args: argparse.Namespace) -> tuple[str | None, str | None]:
    """Name and revision the results are filed under; the packaged MiniLM is filed under its Hub id."""
    if choice.label == MINILM and choice.is_folder:
        from importlib.metadata import version

        return args.model_name or choice.hub_id, args.revision or f"{MINILM_PACKAGE}-{version(MINILM_PACKAGE)}"
    return args.model_name, args.revision


def load_encoder(choice: ModelChoice, args: argparse.Namespace):
    """An mteb encoder for `choice` whose `mteb_model_meta` names the results (see `--model-name`).

    A folder gets the loader of its `ModelMeta` (for C2LLM, mteb's C2LLM loader), so the run uses
    the same prompts, length and padding as the entry printed for mteb.
    """
    import mteb
    from mteb.models import SentenceTransformerEncoderWrapper

    if choice.is_bm25:
        raise ModelNotFoundError("--model bm25 is a baseline of the offline suite (python -m evaluation.suite).")
    if not choice.is_folder and choice.hub_id in {meta.name for meta in mteb.get_model_metas()}:
        # mteb knows this model: use its loader, which gives the model the prompts its authors intended.
        try:
            return mteb.get_model(
                choice.hub_id, revision=args.revision, device=args.device, **sentence_transformer_kwargs(choice, args)
            )
        except OSError as error:
            raise hub_load_error(choice, error) from error
    name, revision = default_name_and_revision(choice, args)
    if choice.is_folder:
        meta = model_meta_from_folder(choice.location, name=name, revision=revision, release=release_details(args))
        if meta.loader is not SentenceTransformerEncoderWrapper:
            encoder = load_with_meta_loader(meta, choice, args)
            encoder.mteb_model_meta = meta
            return encoder
    encoder = SentenceTransformerEncoderWrapper(load_sentence_transformer(choice, args))
    if not choice.is_folder:
        meta = encoder.mteb_model_meta.model_copy(update={"name": name or choice.hub_id, "revision": revision})
    encoder.mteb_model_meta = meta
    return encoder


def load_with_meta_loader(meta, choice: ModelChoice, args: argparse.Namespace):
    """The folder loaded by the loader of its ModelMeta, with the loading options on top of its arguments."""
    kwargs = dict(meta.loader_kwargs)
    st_kwargs = sentence_transformer_kwargs(choice, args)
    if st_kwargs["model_kwargs"]:
        kwargs["model_kwargs"] = {**kwargs.get("model_kwargs", {}), **st_kwargs["model_kwargs"]}
    if args.max_seq_length is not None:  # 0 is refused by the CLIs before loading
        kwargs["max_seq_length"] = args.max_seq_length
    # revision=None: the revision names the results; a local folder has no Hub revision to load.
    return meta.loader(choice.location, revision=None, device=args.device, **kwargs)


def main_scores(result: ModelResult) -> dict[str, float]:
    """Task name -> main score x 100, averaged over splits and subsets as the leaderboard does."""
    return {task_result.task_name: SCORE_SCALE * task_result.get_score() for task_result in result.task_results}


def summary_table(scores: dict[str, float]) -> str:
    """Markdown table: the MTEB-Code tasks in the paper's column order (Avg over the 12), then other tasks."""
    lines = []
    present = [scores[task] for task in MTEB_CODE_TASKS if task in scores]
    if present:
        average = f"{mean(present):.{TABLE_DECIMALS}f}"
        if len(present) < len(MTEB_CODE_TASKS):
            average += f" ({len(present)}/{len(MTEB_CODE_TASKS)} tasks)"
        headers = [header for _, header in MTEB_CODE_COLUMNS] + ["Avg"]
        cells = [f"{scores[task]:.{TABLE_DECIMALS}f}" if task in scores else MISSING for task in MTEB_CODE_TASKS]
        header_row, rule = "| " + " | ".join(headers) + " |", "|" + "---:|" * len(headers)
        lines += [header_row, rule, "| " + " | ".join([*cells, average]) + " |", ""]
    others = {task: score for task, score in scores.items() if task not in MTEB_CODE_TASKS}
    if others:
        lines += ["| task | nDCG@10 x100 |", "| :--- | ---: |"]
        lines += [f"| {task} | {score:.{TABLE_DECIMALS}f} |" for task, score in others.items()]
        lines.append("")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.mteb_code",
        description=__doc__.split("\n\n")[0],
        epilog="Submission steps and offline use: evaluation/README.md",
    )
    parser.add_argument(
        "--model", required=True,
        help="a model folder (e.g. . for C2LLM), a Hub id, minilm, or default (see evaluation/models.py).",
    )
    parser.add_argument(
        "--model-name", default=None,
        help="org/name the results are filed under; use the Hub id for a submission (default: local/FOLDER_NAME).",
    )
    parser.add_argument(
        "--revision", default=None,
        help="revision the results are filed under; use the Hub commit for a submission "
        "(default for folders: a stand-in that changes when the files change).",
    )
    source = parser.add_argument_group("tasks (default: the 12 tasks of MTEB(Code, v1))")
    source.add_argument("--tasks", nargs="+", default=None, metavar="TASK", help="only these mteb tasks, e.g. CosQA.")
    source.add_argument("--mock", action="store_true", help=f"run mteb's {MOCK_TASK_NAME} (offline check).")
    source.add_argument(
        "--local-data", nargs="+", type=Path, default=None, metavar="DIR",
        help="run local BEIR folders (or a folder of them) as mteb retrieval tasks, offline.",
    )
    source.add_argument(
        "--max-queries", type=int, default=None, metavar="N", help="with --local-data: first N judged queries."
    )
    source.add_argument(
        "--max-corpus", type=int, default=None, metavar="N", help="with --local-data: corpus cut to N documents."
    )
    source.add_argument(
        "--mock-run", type=Path, default=None, metavar="FILE",
        help="run mteb's mock-run check (every mock task the model supports, offline) and write its report "
        "(mteb_mock_run_results.md in mteb's words) to FILE; exit code 1 if a task fails.",
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=None, metavar="DIR",
        help="mteb ResultCache folder (default: mteb's, ~/.cache/mteb or $MTEB_CACHE); --mock and --local-data "
        f"runs use its {OFFLINE_CACHE_FOLDER}/ subfolder.",
    )
    parser.add_argument("--overwrite", action="store_true", help="re-run tasks whose results are already cached.")
    parser.add_argument(
        "--output", type=Path, default=None, metavar="FILE", help="also write {task: main score x100} as JSON."
    )
    parser.add_argument(
        "--submit", action="store_true",
        help="after the run, commit the 12 tasks' results to a local clone of mteb's results repository "
        "(ResultCache.submit_results; needs network and git). Needs --model-name ORG/NAME, --revision HUB_COMMIT "
        "(40 hex digits) and known training data (the card's datasets or --training-datasets); see "
        "evaluation/README.md.",
    )
    add_model_meta_arguments(parser)
    add_model_loading_arguments(parser)
    return parser


def result_cache(args: argparse.Namespace, offline: bool):
    """mteb's ResultCache for this run: `--cache-dir` (or mteb's default), offline checks in a subfolder.

    Mock and local tasks are filed under the model's real name and revision too, so in the same
    cache their results and run settings would sit beside the real run's and be submitted with it.
    """
    import mteb

    root = args.cache_dir or mteb.ResultCache().cache_path
    return mteb.ResultCache(root / OFFLINE_CACHE_FOLDER if offline else root)


def weights_digest(folder: Path) -> str:
    """sha256 over the content of a model folder's weight files (every *.safetensors, by relative path)."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.safetensors")):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 24), b""):
                digest.update(block)
    return digest.hexdigest()


def check_cached_results_are_these_weights(results_folder: Path, digest: str | None, overwrite: bool) -> None:
    """Refuse to reuse (and so to print or submit) cached results that other weights produced under the same
    (name, revision); --overwrite computes them again. Hub models (no local folder, digest None) are not checked:
    their revision is a commit that names the weights."""
    cached = sorted(results_folder.glob("*.json")) if results_folder.is_dir() else []
    if digest is None or overwrite or not [path for path in cached if path.name != "model_meta.json"]:
        return
    recorded = results_folder / WEIGHTS_DIGEST_FILE
    recorded_digest = recorded.read_text().strip() if recorded.is_file() else None
    if recorded_digest != digest:
        produced_by = (f"weights with sha256 {recorded_digest[:12]}..." if recorded_digest
                       else "weights this tool cannot identify (no record of them)")
        raise ValueError(
            f"{results_folder} holds results of {produced_by}, not of this folder's (sha256 {digest[:12]}...), under "
            "the same name and revision: they would be reused, printed and submitted as this model's. Pass "
            "--overwrite to compute them again, or give these weights their own --revision or --cache-dir."
        )


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors found from the command line alone, before anything is loaded or run."""
    check_output_files(parser, args, {"output": is_json_of_numbers})  # {task: main score x100}
    for option in ("max_queries", "max_corpus", "batch_size", "max_seq_length"):
        if getattr(args, option) is not None and getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be at least 1.")
    offline = args.mock or args.local_data
    if args.mock_run and (offline or args.tasks or args.submit):
        parser.error("--mock-run is a check of its own: run it without --tasks, --mock, --local-data or --submit.")
    if offline and args.tasks:
        parser.error(
            "--tasks selects real MTEB tasks, --mock / --local-data offline checks whose results are kept in a cache "
            "of their own: run them separately."
        )
    if args.submit:
        if offline:
            parser.error("--submit submits the real MTEB tasks' results; it cannot be combined with offline checks.")
        outside = [task for task in args.tasks or [] if task not in MTEB_CODE_TASKS]
        if outside:
            parser.error(f"--submit submits MTEB(Code, v1) results, and --tasks names tasks outside it "
                         f"({', '.join(outside)}): pick among {', '.join(MTEB_CODE_TASKS)}, or leave --tasks out.")
        try:
            check_submission_identity(args.model_name, args.revision)
            check_not_yet_in_mteb(args.model_name, args.revision)
            check_no_earlier_submission_branch(result_cache(args, offline=False).remote_repo_path, args.model_name,
                                               args.revision)
        except SubmissionError as error:
            parser.error(str(error))


def main(argv: list[str] | None = None) -> int:
    """Run the tasks; returns the process exit code (2 for a usage or data error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    import mteb  # after parsing, so that --help is instant

    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    logging.getLogger("evaluation").setLevel(args.log_level)
    check_arguments(parser, args)
    offline = bool(args.mock or args.local_data)
    try:
        choice = resolve_model(args.model)
        tasks = [] if offline or args.mock_run else select_tasks(args.tasks)
        if args.mock:
            tasks.append(mock_retrieval_task())
        local_tasks = {}
        for folder in expand_benchmark_folders(args.local_data or []):
            dataset = load_beir(folder, args.max_queries, args.max_corpus)
            tasks.append(local_beir_task(dataset))
            local_tasks[tasks[-1].metadata.name] = closest_mteb_task(dataset.name)
        encoder = load_encoder(choice, args)
        if args.submit:
            check_training_datasets_known(encoder.mteb_model_meta)
    except (ValueError, ModelNotFoundError, FileNotFoundError) as error:  # BeirFormatError, UnknownNameError, ...
        parser.error(str(error))
    alias_local_task_prompts(encoder, local_tasks)
    meta = encoder.mteb_model_meta
    if args.mock_run:
        passed = write_mock_run_report(encoder, args.mock_run)
        print(f"mteb mock-run of {meta.name}: {'all checks passed' if passed else 'FAILED'}; report in {args.mock_run}")
        return 0 if passed else 1

    cache = result_cache(args, offline)
    results_folder = cache.get_task_result_path("any", meta).parent  # CACHE/results/ORG__NAME/REVISION
    digest = weights_digest(Path(choice.location)) if choice.is_folder else None
    try:
        check_cached_results_are_these_weights(results_folder, digest, args.overwrite)
    except ValueError as error:
        parser.error(str(error))
    result = mteb.evaluate(
        encoder,
        tasks,
        cache=cache,
        overwrite_strategy="always" if args.overwrite else "only-missing",
        encode_kwargs={"batch_size": args.batch_size, "show_progress_bar": not args.no_progress},
        show_progress_bar=not args.no_progress,
    )
    if digest is not None:
        write_atomically(results_folder / WEIGHTS_DIGEST_FILE, digest + "\n")
    scores = main_scores(result)
    print(f"{meta.name} (revision {meta.revision}), results in {cache.cache_path / 'results'}\n")
    print(summary_table(scores))
    if args.output:
        rounded = {task: round(score, TABLE_DECIMALS) for task, score in scores.items()}
        write_atomically(args.output, json.dumps(rounded, indent=2) + "\n")
    if args.submit:
        code_tasks = [task.metadata.name for task in tasks if task.metadata.name in MTEB_CODE_TASKS]
        response = cache.submit_results(meta, tasks=code_tasks, create_pr=False)
        print(f"submission: {response}")
        if response["status"] == "no_changes":
            print(
                f"mteb's results repository already has these results for {meta.name} at {meta.revision}: "
                "a submission of other weights needs a new model name."
            )
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
