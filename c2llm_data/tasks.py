"""Task names: the 12 MTEB-Code tasks, the training sources behind them, the local benchmarks' closest task, prompts.

Our model folder's `config_sentence_transformers.json` holds prompts named `"{MTEBTask}-query"` and
`"{MTEBTask}-document"` for the 12 tasks, plus generic `"query"` and `"document"`. A local benchmark
folder gets the prompts of the MTEB task it resembles most (`LOCAL_BENCHMARK_TASKS`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# The 12 tasks of MTEB(Code, v1) in the column order of the C2LLM paper's Table 2, with its headers.
MTEB_CODE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("AppsRetrieval", "APPS"),
    ("CodeSearchNetRetrieval", "CSN"),
    ("CodeSearchNetCCRetrieval", "CCR"),
    ("COIRCodeSearchNetRetrieval", "CoIR-CSN"),
    ("CodeEditSearchRetrieval", "CodeEdit"),
    ("CodeFeedbackMT", "CodeFeedback MT"),
    ("CodeFeedbackST", "CodeFeedback ST"),
    ("CodeTransOceanContest", "CodeTransOcean Contest"),
    ("CodeTransOceanDL", "CodeTransOcean DL"),
    ("CosQA", "CosQA"),
    ("StackOverflowQA", "StackOverflowQA"),
    ("SyntheticText2SQL", "SyntheticText2SQL"),
)
MTEB_CODE_TASKS: tuple[str, ...] = tuple(task for task, _ in MTEB_CODE_COLUMNS)


@dataclass(frozen=True)
class TrainingSource:
    """A training source registered by name: the MTEB task it belongs to and the Hub dataset its rows come from.

    The task decides the Table 1 instruction a source trains with (`train.data`) and, for a model card's
    `datasets`, which mteb task the model is not zero-shot on (`evaluation.model_meta`): several MTEB-Code
    tasks store a processed copy of their source elsewhere (CodeSearchNetRetrieval is `mteb/CodeSearchNetRetrieval`,
    built from `code-search-net/code_search_net`), so only this table links a source dataset to its task.
    """

    task: str
    hub_id: str | None  # None: rows made offline (docstrings mined from installed modules), no mteb data


# The C2LLM report's training sources (section 4.1) by the names recipes use (`data.datasets[].name`).
TRAINING_SOURCES: dict[str, TrainingSource] = {
    "codesearchnet": TrainingSource("CodeSearchNetRetrieval", "code-search-net/code_search_net"),
    "codesearchnet_ccr": TrainingSource("CodeSearchNetCCRetrieval", "CoIR-Retrieval/CodeSearchNet-ccr"),
    "coir_codesearchnet": TrainingSource("COIRCodeSearchNetRetrieval", "CoIR-Retrieval/CodeSearchNet"),
    "apps": TrainingSource("AppsRetrieval", "CoIR-Retrieval/apps"),
    "codefeedback_st": TrainingSource("CodeFeedbackST", "CoIR-Retrieval/codefeedback-st"),
    "codefeedback_mt": TrainingSource("CodeFeedbackMT", "CoIR-Retrieval/codefeedback-mt"),
    "codeeditsearch": TrainingSource("CodeEditSearchRetrieval", "cassanof/CodeEditSearch"),
    "cosqa": TrainingSource("CosQA", "CoIR-Retrieval/cosqa"),
    "stackoverflowqa": TrainingSource("StackOverflowQA", "CoIR-Retrieval/stackoverflow-qa"),
    "synthetic_text2sql": TrainingSource("SyntheticText2SQL", "gretelai/synthetic_text_to_sql"),
    "codetransocean_contest": TrainingSource("CodeTransOceanContest", "CoIR-Retrieval/codetrans-contest"),
    "codetransocean_dl": TrainingSource("CodeTransOceanDL", "CoIR-Retrieval/codetrans-dl"),
    "python_docstrings": TrainingSource("CodeSearchNetRetrieval", None),
    "python_topics": TrainingSource("CodeSearchNetRetrieval", None),  # module/class docstring -> code it describes
}

# Local benchmark folder name prefix -> closest MTEB-Code task, whose prompts the folder gets.
# First matching prefix wins, so "humanevalx_" must come before "humaneval".
LOCAL_BENCHMARK_TASKS: tuple[tuple[str, str], ...] = (
    ("cosqa", "CosQA"),  # web query -> Python function: the same data as MTEB's CosQA
    ("csn_", "CodeSearchNetRetrieval"),  # docstring -> function without its docstring
    ("humanevalx_", "CodeTransOceanContest"),  # contest solution -> same solution in another language
    # Problem statement -> solution: APPS is the MTEB-Code task built the same way (HumanEval and MBPP
    # have MTEB tasks of their own, but they are not among the 12 our model has prompts for).
    ("humaneval", "AppsRetrieval"),
    ("mbpp", "AppsRetrieval"),
    ("spider", "SyntheticText2SQL"),  # question -> SQL
    ("conala", "StackOverflowQA"),  # StackOverflow intent -> snippet
    ("codexglue_java2cs", "CodeTransOceanContest"),  # Java -> C#: translation between languages
    # Buggy -> fixed Java method: same-language code -> code, like DL's framework-to-framework Python.
    ("codexglue_refine", "CodeTransOceanDL"),
)

QUERY_SIDE = "query"
DOCUMENT_SIDE = "document"
# mteb's type for every MTEB-Code task, used in prompt names such as "Retrieval-query".
RETRIEVAL_TASK_TYPE = "Retrieval"


class UnknownNameError(ValueError):
    """A name (task, benchmark, ...) that is not among the known ones; the message lists close matches."""


def unknown_name_error(kind: str, name: str, known: Iterable[str], hint: str = "") -> UnknownNameError:
    """Build an error for an unknown `name` of the given `kind`, suggesting the closest `known` names."""
    known = sorted(set(known))
    by_lowercase = {candidate.lower(): candidate for candidate in known}
    matches = [by_lowercase[m] for m in difflib.get_close_matches(name.lower(), by_lowercase, n=5, cutoff=0.5)]
    suggestion = f" Did you mean: {', '.join(matches)}?" if matches else " No similar name found."
    return UnknownNameError(f"Unknown {kind} {name!r}.{suggestion}{(' ' + hint) if hint else ''}")


def closest_mteb_task(benchmark_name: str, overrides: Mapping[str, str] | None = None) -> str | None:
    """The MTEB-Code task whose prompts a local benchmark folder gets, or None for an unfamiliar folder.

    `overrides` (folder name -> task) comes from the command line's `--prompt-task` and wins.
    """
    if overrides and benchmark_name in overrides:
        return overrides[benchmark_name]
    for prefix, task in LOCAL_BENCHMARK_TASKS:
        if benchmark_name.startswith(prefix):
            return task
    return None


def parse_prompt_task_overrides(pairs: Iterable[str]) -> dict[str, str]:
    """Parse `FOLDER=MTEBTask` pairs; the task must be one of the 12 MTEB-Code tasks."""
    overrides = {}
    for pair in pairs:
        folder, separator, task = pair.partition("=")
        if not separator or not folder or not task:
            raise ValueError(f"--prompt-task expects FOLDER=MTEBTask (e.g. my_bench=CosQA), got {pair!r}.")
        if task not in MTEB_CODE_TASKS:
            raise unknown_name_error("MTEB-Code task", task, MTEB_CODE_TASKS)
        overrides[folder] = task
    return overrides


def prompt_name_for(prompts: Mapping[str, str] | None, task: str | None, side: str) -> str | None:
    """The name of the prompt a model should get for one side (query/document) of `task`.

    Same order of preference as mteb's sentence-transformers wrapper, so the suite and the MTEB runner
    give a model the same prompts: "{task}-{side}", "{task}", "Retrieval-{side}", "Retrieval",
    "{side}"; None if the model defines none of them (it then encodes the raw text).
    """
    if not prompts:
        return None
    candidates = [f"{RETRIEVAL_TASK_TYPE}-{side}", RETRIEVAL_TASK_TYPE, side]
    if task:
        candidates = [f"{task}-{side}", task, *candidates]
    return next((name for name in candidates if name in prompts), None)
