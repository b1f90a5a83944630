"""Training data: every source mapped to one schema, checked, cleaned and grouped by (source, language).

The schema (one row = one training pair), shared by hub sources, local files and the mining cache:

    query: str            the text the Table 1 query instruction is applied to
    positive: str         the relevant document (code, answer, diff, SQL, ...)
    negatives: list[str]  optional hard negatives (empty when none are given; mining fills them)
    source: str           source name, e.g. "apps" (decides the instruction and the loss weight)
    language: str         programming language, e.g. "python" or "java->csharp" (decides the batch group)

- ``SOURCES``: the paper's training sources (section 4.1), each with its hub layout and MTEB task (Table 1).
- Row mappers (``map_*``, ``pairs_from_beir``, ``docstring_pairs``) are pure functions on plain rows.
- ``load_training_data`` loads every configured source, checks the schema, drops bad rows and counts them.
- ``group_by_source_language`` / ``split_heldout`` / ``to_training_columns`` shape the data for the trainer.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import json
import logging
import random
import re
import textwrap
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasets import Dataset, Features, List, Value, concatenate_datasets

from c2llm_data.tasks import TRAINING_SOURCES

from .args import ConfigError, DatasetSpec
from .decontaminate import Exclusions
from .docstrings import function_without_docstring, python_functions, python_topics

logger = logging.getLogger(__name__)

TEXT_COLUMNS = ("query", "positive", "source", "language")
FEATURES = Features(
    {
        "query": Value("string"),
        "positive": Value("string"),
        "negatives": List(Value("string")),
        "source": Value("string"),
        "language": Value("string"),
    }
)
MIN_DOCSTRING_WORDS = 3  # CodeSearchNet-style filter: shorter docstrings are rarely usable queries
MISSING_SOURCE = "<missing source>"  # report key for rows without a source name


class SchemaError(ValueError):
    """Data whose columns or types do not match the training schema."""


# ---------------------------------------------------------------------------------------------------------------
# Row mappers: plain dict in, schema fields out. Empty strings mark unusable rows; cleaning counts them.


def strip_python_docstring(code: str) -> str:
    """Remove the docstring of the first function in ``code`` (unparsable code is returned unchanged)."""
    try:
        tree = ast.parse(textwrap.dedent(code))
    except SyntaxError:
        return code
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and ast.get_docstring(node) is not None:
            return function_without_docstring(textwrap.dedent(code).splitlines(), node)
    return code


def docstring_pairs(code: str, min_words: int = MIN_DOCSTRING_WORDS) -> Iterator[tuple[str, str]]:
    """Yield (first docstring paragraph, function without its docstring) for every documented function."""
    for function in python_functions(code):
        if function.summary and function.code_without_docstring and len(function.summary.split()) >= min_words:
            yield function.summary, function.code_without_docstring


def map_codesearchnet(row: dict[str, Any]) -> dict[str, str]:
    """code_search_net row -> docstring query, code without that docstring (text-to-code)."""
    docstring = row.get("func_documentation_string") or ""
    code = row.get("func_code_string") or ""
    language = row.get("language") or ""
    code = strip_python_docstring(code) if language == "python" else code.replace(docstring, "", 1)
    return {"query": docstring, "positive": code, "language": language}


def map_codeeditsearch(row: dict[str, Any]) -> dict[str, str]:
    """CodeEditSearch row (CommitPackFT-derived) -> change instruction, unified diff."""
    return {"query": row.get("instruction") or "", "positive": row.get("diff") or ""}


def map_text2sql(row: dict[str, Any]) -> dict[str, str]:
    """synthetic_text_to_sql row -> natural-language question, SQL answer."""
    return {"query": row.get("sql_prompt") or "", "positive": row.get("sql") or ""}


def pairs_from_beir(
    queries: list[dict[str, Any]], corpus: list[dict[str, Any]], qrels: list[dict[str, Any]]
) -> list[dict[str, str]]:
    """BEIR rows (queries/corpus with `_id`, `text`; qrels with `query-id`, `corpus-id`, `score`) -> pairs.

    One pair per relevant (score > 0) judgement. A judgement naming an unknown id yields an empty field, so
    cleaning counts it instead of it vanishing.
    """
    query_text = {str(row["_id"]): row.get("text") for row in queries}
    document_text = {str(row["_id"]): _beir_document(row) for row in corpus}
    return [
        {"query": query_text.get(str(j["query-id"])) or "", "positive": document_text.get(str(j["corpus-id"])) or ""}
        for j in qrels
        if float(j.get("score", 1)) > 0
    ]


def _beir_document(row: dict[str, Any]) -> str | None:
    from c2llm_data.beir import document_text  # one title + text join for training and evaluation

    return document_text(row.get("title"), row["text"]) if row.get("text") else row.get("text")


# ---------------------------------------------------------------------------------------------------------------
# The paper's sources (C2LLM report, section 4.1) and the MTEB task whose Table 1 instruction each one uses.

CSN_LANGUAGES = ("python", "javascript", "go", "ruby", "java", "php")
CODE_EDIT_LANGUAGES = (
    "python", "javascript", "typescript", "go", "ruby", "java", "php", "c", "c++", "rust", "swift", "scala", "shell",
)  # fmt: skip


@dataclass(frozen=True)
class Source:
    """How one named source is loaded; its MTEB task and Hub dataset are ``c2llm_data.tasks.TRAINING_SOURCES[name]``.

    layout: "beir" (hub configs corpus/queries/default, or "{subset}-corpus" etc.), "rows" (a plain hub dataset
    mapped by ``row_mapper``; subsets passed as ``subset_argument``), or "python_ast" (docstring/function pairs
    mined from installed Python modules, offline).
    """

    name: str
    layout: str
    language: str | None = None
    subsets: tuple[str, ...] = ()
    subset_argument: str = "name"
    row_mapper: Callable[[dict[str, Any]], dict[str, str]] | None = None

    @property
    def task(self) -> str:
        return TRAINING_SOURCES[self.name].task

    @property
    def hub_id(self) -> str | None:
        return TRAINING_SOURCES[self.name].hub_id


SOURCES: dict[str, Source] = {
    source.name: source
    for source in (
        Source("codesearchnet", "rows", subsets=CSN_LANGUAGES, row_mapper=map_codesearchnet),
        Source("codesearchnet_ccr", "beir", subsets=CSN_LANGUAGES),
        Source("coir_codesearchnet", "beir", subsets=CSN_LANGUAGES),
        Source("apps", "beir", language="python"),
        Source("codefeedback_st", "beir", language="mixed"),
        Source("codefeedback_mt", "beir", language="mixed"),
        Source("codeeditsearch", "rows", subsets=CODE_EDIT_LANGUAGES, subset_argument="data_dir",
               row_mapper=map_codeeditsearch),
        Source("cosqa", "beir", language="python"),
        Source("stackoverflowqa", "beir", language="mixed"),
        Source("synthetic_text2sql", "rows", language="sql", row_mapper=map_text2sql),
        Source("codetransocean_contest", "beir", language="python->c++"),
        Source("codetransocean_dl", "beir", language="python"),
        Source("python_docstrings", "python_ast", language="python"),
        Source("python_topics", "python_ast", language="python"),
    )
}


def get_source(name: str) -> Source:
    if name not in SOURCES:
        raise ConfigError(f"Unknown dataset name {name!r}. Registered sources: {', '.join(sorted(SOURCES))}.")
    return SOURCES[name]


# ---------------------------------------------------------------------------------------------------------------
# Loading


@dataclass
class TrainingData:
    """All configured sources in the schema, plus what each source name needs downstream."""

    dataset: Dataset
    tasks: dict[str, str]  # source -> MTEB task (prompt names "{task}-query" / "{task}-document")
    loss_weights: dict[str, float]  # source -> loss multiplier
    bad_rows: dict[str, dict[str, int]]  # source -> reason -> count
    rows_loaded: dict[str, int] = field(default_factory=dict)  # source -> rows before cleaning


def load_training_data(
    specs: list[DatasetSpec],
    root: Path,
    max_bad_row_fraction: float,
    load_dataset: Callable | None = None,
    num_proc: int | None = None,
    decontaminate: Callable[[Dataset], tuple[Dataset, dict[str, dict[str, int]]]] | None = None,
) -> TrainingData:
    """Load, check and clean every dataset entry. ``load_dataset`` defaults to ``datasets.load_dataset``.

    ``decontaminate`` (``train.decontaminate.drop_overlaps`` bound to an index) drops rows that overlap the benchmarks,
    before any query is rewritten; its counts land in ``bad_rows`` under ``benchmark overlap: <reason>``."""
    if not specs:
        raise ConfigError("data.datasets is empty: name at least one source or local file.")
    parts, tasks, weights, bad_rows, loaded = [], {}, {}, {}, Counter()
    for spec in specs:
        dataset = load_spec(spec, root, load_dataset, num_proc)
        if spec.languages:
            dataset = dataset.filter(
                lambda batch, wanted: [lang in wanted for lang in batch["language"]],
                batched=True,
                fn_kwargs={"wanted": set(spec.languages)},
                num_proc=num_proc,
            )
        if spec.max_rows is not None:
            dataset = dataset.select(range(min(spec.max_rows, len(dataset))))
        if decontaminate is not None:
            dataset, overlaps = decontaminate(dataset)
            for source, reasons in overlaps.items():
                bad_rows.setdefault(source, Counter()).update(
                    {f"benchmark overlap: {reason}": count for reason, count in reasons.items()}
                )
        if spec.web_query_fraction:
            from .augment import web_queries

            dataset = web_queries(dataset, spec.web_query_fraction)
        loaded.update(source or MISSING_SOURCE for source in dataset["source"])
        total = len(dataset)
        dataset, reasons = drop_bad_rows(dataset)
        bad = total - len(dataset)
        if total == 0 or bad / total > max_bad_row_fraction:
            raise SchemaError(
                f"{spec.label}: {bad} of {total} rows are bad ({dict(_merge_counts(reasons))}), above "
                f"data.max_bad_row_fraction={max_bad_row_fraction}. Check the source or raise the limit."
            )
        for source in sorted(set(dataset.unique("source"))):
            _set_once(tasks, source, spec.task or _registered_task(source, spec), "task")
            _set_once(weights, source, spec.loss_weight, "loss_weight")
        for source, counts in reasons.items():
            bad_rows.setdefault(source, Counter()).update(counts)
        parts.append(dataset)
    dataset = concatenate_datasets(parts) if len(parts) > 1 else parts[0]
    # Sources loaded by different entries may still repeat pairs.
    dataset, cross_duplicates = drop_bad_rows(dataset)
    for source, counts in cross_duplicates.items():
        bad_rows.setdefault(source, Counter()).update(counts)
    return TrainingData(
        dataset=dataset,
        tasks=tasks,
        loss_weights=weights,
        bad_rows={source: dict(counts) for source, counts in bad_rows.items()},
        rows_loaded=dict(loaded),
    )


def _registered_task(source: str, spec: DatasetSpec) -> str:
    if source in SOURCES:
        return SOURCES[source].task
    if spec.name in SOURCES:  # a registered source whose rows were renamed with `source:`
        return SOURCES[spec.name].task
    raise ConfigError(
        f"{spec.label}: rows have source {source!r}, which is not a registered dataset name, so its instruction is "
        f"unknown. Set `task:` on this entry (an MTEB task from Table 1) or use one of: {', '.join(sorted(SOURCES))}."
    )


def _set_once(mapping: dict[str, Any], key: str, value: Any, what: str) -> None:
    if mapping.setdefault(key, value) != value:
        raise ConfigError(f"Source {key!r} is configured twice with different {what}: {mapping[key]!r} and {value!r}.")


def _merge_counts(reasons: dict[str, Counter]) -> Counter:
    return sum(reasons.values(), Counter())


def check_sources(specs: list[DatasetSpec], root: Path, exclusions: Exclusions | None = None) -> list[DatasetSpec]:
    """The entries to load, checked before any work starts: local files and folders exist, python_docstrings and
    python_topics modules are installed and (with ``exclusions``) none comes from a refused upstream. An
    ``optional`` entry whose local path is missing is left out with a warning."""
    kept = []
    for spec in specs:
        if spec.path is not None and not _local_path(spec, root).exists():
            where = f"{_local_path(spec, root)} does not exist"
            if spec.optional:
                logger.warning("skipping optional source %s: %s", spec.label, where)
                continue
            raise ConfigError(f"{spec.label}: {where}. Fix the path, or mark the entry `optional: true`.")
        if spec.path is not None:
            check_local_file(spec, _local_path(spec, root))
        if spec.name is not None and get_source(spec.name).layout == "python_ast":
            _module_files(spec.modules or [])
            refusals = [(module, exclusions.module_refusal(module)) for module in spec.modules] if exclusions else []
            for module, reason in refusals:
                if reason is not None:
                    raise ConfigError(f"{spec.label} ({spec.source or spec.name}): module {module!r} may not be "
                                      f"mined ({reason}); remove it from `modules:`.")
        kept.append(spec)
    if not kept:
        raise ConfigError("data.datasets: every source is optional and missing; nothing to train on.")
    return kept


LOCAL_FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}  # suffix -> `datasets` builder


def check_local_file(spec: DatasetSpec, path: Path) -> None:
    """A local source is readable before any work starts: a BEIR folder that parses, or a non-empty JSON/JSONL
    file whose every line (or whole array) parses, or a Parquet file with a readable footer. Errors name the
    file (and line)."""
    if path.is_dir():
        read_beir_pairs(path)
        return
    if path.suffix not in LOCAL_FILE_BUILDERS:
        raise ConfigError(f"{spec.label}: {path} is neither a .jsonl, .json or .parquet file nor a BEIR folder.")
    if path.suffix == ".parquet":
        import pyarrow.parquet  # a dependency of datasets

        try:
            rows = pyarrow.parquet.ParquetFile(path).metadata.num_rows
        except Exception as error:  # pyarrow raises several types for a broken footer
            raise ConfigError(f"{spec.label}: {path} is not a readable Parquet file ({error}).") from None
    else:
        rows = _count_json_records(spec, path)
    if rows == 0:
        raise ConfigError(f"{spec.label}: {path} holds no rows; point the entry at a file with training pairs.")


def _count_json_records(spec: DatasetSpec, path: Path) -> int:
    """Records of a JSON array or JSON Lines file; a syntax or encoding error names the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        line = path.read_bytes()[: error.start].count(b"\n") + 1
        raise ConfigError(f"{spec.label}: {path}:{line} is not UTF-8 ({error.reason}).") from None
    if text.lstrip().startswith("["):
        try:
            return len(json.loads(text))
        except json.JSONDecodeError as error:
            raise ConfigError(f"{spec.label}: {path}:{error.lineno}: not JSON ({error.msg}).") from None
    records = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            json.loads(line)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{spec.label}: {path}:{number}: not a JSON line ({error.msg}).") from None
        records += 1
    return records


def _local_path(spec: DatasetSpec, root: Path) -> Path:
    return Path(spec.path) if Path(spec.path).is_absolute() else root / spec.path


def load_spec(
    spec: DatasetSpec, root: Path, load_dataset: Callable | None = None, num_proc: int | None = None
) -> Dataset:
    """One dataset entry -> Dataset with exactly the schema columns (rows not yet cleaned)."""
    if spec.path is not None:
        return load_local(spec, root)
    source = get_source(spec.name)
    if source.layout == "python_ast":
        if spec.name == "python_topics":
            rows = python_topic_rows(spec.modules or [])
        else:
            rows = python_docstring_rows(spec.modules or [], spec.keep_docstring_fraction)
        # `source:` names the entry's group (e.g. one per package: batches of functions from one library)
        return conform(Dataset.from_list(rows) if rows else _empty(), spec, spec.source or spec.name, source.language)
    if load_dataset is None:
        from datasets import load_dataset
    subsets = [s for s in source.subsets if not spec.languages or s in spec.languages] or [None]
    parts = []
    for subset in subsets:
        rows = _load_hub_rows(source, subset, spec.revision, load_dataset, num_proc)
        parts.append(conform(rows, spec, spec.name, subset or source.language))
    return concatenate_datasets(parts) if len(parts) > 1 else parts[0]


def _load_hub_rows(
    source: Source, subset: str | None, revision: str | None, load_dataset: Callable, num_proc: int | None
) -> Dataset:
    if source.layout == "beir":
        prefix = f"{subset}-" if subset else ""
        parts = {
            name: _single_split(load_dataset(source.hub_id, config, revision=revision), split)
            for name, config, split in (
                ("corpus", f"{prefix}corpus", "corpus"),
                ("queries", f"{prefix}queries", "queries"),
                ("qrels", f"{prefix}qrels" if subset else "default", "train"),
            )
        }
        return Dataset.from_list(pairs_from_beir(list(parts["queries"]), list(parts["corpus"]), list(parts["qrels"])))
    kwargs = {source.subset_argument: subset} if subset else {}
    rows = load_dataset(source.hub_id, split="train", revision=revision, **kwargs)
    return rows.map(source.row_mapper, remove_columns=rows.column_names, num_proc=num_proc)


def _single_split(dataset_dict: Any, preferred: str) -> Dataset:
    if isinstance(dataset_dict, Dataset):
        return dataset_dict
    if preferred in dataset_dict:
        return dataset_dict[preferred]
    if len(dataset_dict) == 1:
        return next(iter(dataset_dict.values()))
    raise SchemaError(f"Expected a {preferred!r} split, found {sorted(dataset_dict)}.")


def load_local(spec: DatasetSpec, root: Path) -> Dataset:
    """A local JSONL/Parquet file in the schema, or a BEIR folder (queries.jsonl, corpus.jsonl, qrels.tsv)."""
    from datasets import load_dataset

    path = _local_path(spec, root)
    if path.is_dir():
        return conform(Dataset.from_list(read_beir_pairs(path)), spec, spec.source or path.name, spec.language)
    check_local_file(spec, path)
    dataset = load_dataset(LOCAL_FILE_BUILDERS[path.suffix], data_files=str(path), split="train")
    return conform(dataset, spec, spec.source, spec.language)


def read_beir_pairs(folder: Path) -> list[dict[str, str]]:
    """Pairs of a local BEIR folder (the layout of ../shared/data/benchmarks/*), read by the evaluation's BEIR
    reader: a malformed folder is a ConfigError naming the file and line."""
    from c2llm_data.beir import BeirFormatError, judged_pairs, load_beir

    try:
        return judged_pairs(load_beir(folder))
    except BeirFormatError as error:
        raise ConfigError(str(error)) from None


def conform(dataset: Dataset, spec: DatasetSpec, source: str | None, language: str | None) -> Dataset:
    """Check the schema columns and types; fill `source`/`language` from the entry when a file lacks them."""
    columns = set(dataset.column_names)
    filled = {"source": source, "language": language}
    missing = [c for c in TEXT_COLUMNS if c not in columns and filled.get(c) is None]
    wrong_type = [
        f"{c} (every value is null)" if dataset.features[c] == Value("null") else f"{c} ({dataset.features[c]})"
        for c in TEXT_COLUMNS
        if c in columns and dataset.features[c] != Value("string") and dataset.features[c] != Value("large_string")
    ]
    if "negatives" in columns and not _is_string_list(dataset.features["negatives"]):
        wrong_type.append(f"negatives ({dataset.features['negatives']})")
    if missing or wrong_type:
        raise SchemaError(
            f"{spec.label}: schema mismatch. Missing columns: {missing or 'none'}; "
            f"wrong types: {wrong_type or 'none'}. "
            f"Expected query, positive, source, language (strings) and optional negatives (list of strings); "
            f"found {sorted(columns)}. Columns that a file lacks can be set on the entry (`source:`, `language:`)."
        )
    if spec.group_column is not None and (spec.group_column not in columns or dataset.features[spec.group_column]
                                          not in (Value("string"), Value("large_string"))):
        raise SchemaError(f"{spec.label}: group_column {spec.group_column!r} is not a column of strings in the file "
                          f"(columns: {sorted(columns)}); name one, or drop group_column.")
    for name, value in filled.items():
        if name not in columns:
            dataset = dataset.add_column(name, [value] * len(dataset))
    if spec.group_column is not None:
        dataset = dataset.map(lambda batch: {"source": [f"{source}/{group}" for source, group in
                                                        zip(batch["source"], batch[spec.group_column])]},
                              batched=True)
    if spec.neighbour_negatives_column is not None:
        dataset = with_neighbour_negatives(dataset, spec)
    if "negatives" not in dataset.column_names:  # neighbour_negatives_column may have filled them
        dataset = dataset.add_column("negatives", [[] for _ in range(len(dataset))])
    extra = columns - set(FEATURES) - {spec.group_column, spec.neighbour_negatives_column}  # those two were read
    if extra:
        logger.info("%s: ignoring extra columns %s", spec.label, sorted(extra))
    return dataset.select_columns(list(FEATURES)).cast(FEATURES)


def with_neighbour_negatives(dataset: Dataset, spec: DatasetSpec) -> Dataset:
    """``dataset`` with a `negatives` column of one neighbour per row (``neighbour_positives``), by the entry's
    ``neighbour_negatives_column`` and then its batch group (`source`, already split by its ``group_column``)."""
    unit_column = spec.neighbour_negatives_column
    if "negatives" in dataset.column_names:
        raise SchemaError(f"{spec.label}: the file brings its own `negatives`; drop neighbour_negatives_column, or "
                          "the file's negatives column.")
    if unit_column not in dataset.column_names or dataset.features[unit_column] not in (Value("string"),
                                                                                       Value("large_string")):
        raise SchemaError(f"{spec.label}: neighbour_negatives_column {unit_column!r} is not a column of strings in "
                          f"the file (columns: {sorted(dataset.column_names)}); name one, e.g. `path`.")
    negatives = neighbour_positives(dataset["positive"], [dataset[unit_column], dataset["source"]])
    return dataset.add_column("negatives", [[negative] if negative is not None else [] for negative in negatives])


def neighbour_positives(positives: list[str], unit_columns: list[list[str]]) -> list[str | None]:
    """Each row's neighbour: the positive of the next row of its unit in the first of ``unit_columns`` (rows in file
    order: mined functions in the order of their file), the previous for a unit's last row, skipping copies of the
    row's own positive; where the unit holds none, the same in the next column (a wider unit: the file's package);
    None where no column gives one. A unit is named by its column and every wider one (`src/lib.rs` of two packages
    is two files)."""
    neighbours: list[str | None] = [None] * len(positives)
    for level in range(len(unit_columns)):
        members = defaultdict(list)
        for row, unit in enumerate(zip(*unit_columns[level:])):
            members[unit].append(row)
        for rows in members.values():
            for position, row in enumerate(rows):
                if neighbours[row] is None:  # the rows after it first, then those before it, nearest first
                    nearest = itertools.chain(range(position + 1, len(rows)), range(position - 1, -1, -1))
                    neighbours[row] = next((positives[rows[other]] for other in nearest
                                            if positives[rows[other]] != positives[row]), None)
    return neighbours


def _is_string_list(feature: Any) -> bool:
    inner = getattr(feature, "feature", None)
    return inner in (Value("string"), Value("large_string"))


def _empty() -> Dataset:
    return Dataset.from_dict(
        {"query": [], "positive": []}, features=Features({"query": Value("string"), "positive": Value("string")})
    )


def python_docstring_rows(modules: list[str], keep_docstring_fraction: float = 0.0) -> list[dict[str, str]]:
    """Docstring -> function pairs from installed modules, read with `ast` (nothing is imported or executed).

    A ``keep_docstring_fraction`` of the positives (chosen by a hash of the code) keep their docstring. Each row
    names its file (`path`, in the file's order: what ``neighbour_negatives_column: path`` reads)."""
    from .augment import hash_fraction

    if not modules:
        raise ConfigError("python_docstrings needs `modules:` (importable names such as json or email).")
    rows = []
    for file, functions in mined_modules(modules, python_functions):
        for function in functions:
            query, code = function.summary, function.code_without_docstring
            if query and code and len(query.split()) >= MIN_DOCSTRING_WORDS:
                keep = keep_docstring_fraction and hash_fraction(function.code, "docstring") < keep_docstring_fraction
                rows.append({"query": query, "positive": function.code if keep else code, "path": str(file)})
    return rows


def python_topic_rows(modules: list[str]) -> list[dict[str, str]]:
    """Topic -> code pairs from installed modules (``train.docstrings.python_topics``): each module's and each
    class's docstring summary as a short topic query (``train.augment.topic_style_query``), read with `ast`."""
    from .augment import topic_style_query

    rows = []
    # a test file ("tests for numpy.distutils") is about its subject, not a topic of its own: not even parsed
    for _, topics in mined_modules(modules, python_topics, skip=is_test_module):
        rows.extend({"query": query, "positive": topic.code} for topic in topics
                    if (query := topic_style_query(topic.summary)) is not None)
    # One row per query: a templated docstring ("Base class for model's outputs ...", repeated across transformers'
    # models) would put the same query with several positives into one batch, each the others' false negative.
    return list({row["query"]: row for row in reversed(rows)}.values())[::-1]


def mined_modules(modules: list[str], miner: Callable[[str], Iterator[Any]],
                  skip: Callable[[Path], bool] | None = None) -> Iterator[tuple[Path, list]]:
    """(file, what ``miner`` finds in its source) for every Python file of ``modules`` that ``skip`` does not
    name; a file that does not parse is logged and skipped."""
    for path in _module_files(modules):
        if skip is not None and skip(path):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # SyntaxWarnings of old escape sequences in installed code
                found = list(miner(path.read_text(encoding="utf-8")))
        except (SyntaxError, UnicodeDecodeError, ValueError, RecursionError):
            logger.info("skipping unparsable %s", path)
            continue
        yield path, found


def is_test_module(path: Path) -> bool:
    """A test file of an installed package: under a ``test``/``tests``/``testing`` folder, or ``test_*.py``."""
    return path.name.startswith("test_") or bool({"test", "tests", "testing"} & set(path.parent.parts))


def _module_files(modules: list[str]) -> list[Path]:
    if not modules:
        raise ConfigError("python_docstrings needs `modules:` (importable names such as json or email).")
    files = []
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin in (None, "built-in", "frozen"):
            raise ConfigError(f"python_docstrings: module {name!r} is not installed as Python source.")
        if spec.submodule_search_locations:
            for location in spec.submodule_search_locations:
                files.extend(sorted(Path(location).rglob("*.py")))
        else:
            files.append(Path(spec.origin))
    return files


# ---------------------------------------------------------------------------------------------------------------
# Cleaning, grouping, splitting


def bad_row_reasons(rows: Iterator[tuple[Any, ...]], seen: set[int] | None = None) -> list[str | None]:
    """Reason each row is unusable (None = fine). Rows are (query, positive, source, language) tuples."""
    seen = set() if seen is None else seen
    reasons = []
    for row in rows:
        if any(value is None for value in row):
            reasons.append("missing_field")
        elif any(not value.strip() for value in row):
            reasons.append("empty_text")
        elif (key := hash(row[:2])) in seen:
            reasons.append("duplicate")
        else:
            seen.add(key)
            reasons.append(None)
    return reasons


def drop_bad_rows(dataset: Dataset, batch_size: int = 10_000) -> tuple[Dataset, dict[str, Counter]]:
    """Drop rows with missing fields, empty text or an already seen (query, positive); count them per source."""
    keep, counts, seen = [], defaultdict(Counter), set()
    for start, batch in zip(range(0, len(dataset), batch_size), dataset.iter(batch_size=batch_size)):
        rows = list(zip(*(batch[column] for column in TEXT_COLUMNS)))
        for offset, (row, reason) in enumerate(zip(rows, bad_row_reasons(rows, seen))):
            if reason is None:
                keep.append(start + offset)
            else:
                counts[row[2] or MISSING_SOURCE][reason] += 1
    if len(keep) == len(dataset):
        return dataset, {}
    return dataset.select(keep), dict(counts)


def group_key(source: str, language: str) -> str:
    """Stable (source, language) group name, e.g. ('my_set', 'java->c#') -> 'my_set__java_csharp'.

    Usable as a DatasetDict key and as a torch module name (the trainer registers one loss per group).
    """

    def slug(text: str) -> str:
        text = text.lower().replace("c++", "cpp").replace("c#", "csharp")
        return re.sub(r"[^a-z0-9]+", "_", text).strip("_") or "unknown"

    return f"{slug(source)}__{slug(language)}"


def group_by_source_language(dataset: Dataset) -> dict[str, Dataset]:
    """One dataset per (source, language), so that every training batch comes from a single group."""
    indices = defaultdict(list)
    for index, (source, language) in enumerate(zip(dataset["source"], dataset["language"])):
        indices[group_key(source, language)].append(index)
    return {key: dataset.select(rows) for key, rows in sorted(indices.items())}


def split_heldout(group: Dataset, fraction: float, max_queries: int, seed: int) -> tuple[Dataset, Dataset | None]:
    """Hold out a fraction of a group's distinct queries (all their rows) for retrieval evaluation."""
    queries = sorted(set(group["query"]))
    count = min(max_queries, int(len(queries) * fraction))
    if count == 0:
        return group, None
    heldout = set(random.Random(seed).sample(queries, count))
    is_heldout = [query in heldout for query in group["query"]]
    train = [i for i, flag in enumerate(is_heldout) if not flag]
    evaluation = [i for i, flag in enumerate(is_heldout) if flag]
    return group.select(train), group.select(evaluation)


def given_negatives(group: Dataset) -> int:
    """How many hard negatives every row of ``group`` brings (0 if one brings none)."""
    return min(map(len, group["negatives"]), default=0)


def to_training_columns(group: Dataset, num_negatives: int) -> Dataset:
    """Schema rows -> the loss columns (query, positive[, negative_1..negative_K]); K=0 gives pairs.

    Rows with fewer than K given negatives are dropped; the caller reports how many.
    """
    if num_negatives == 0:
        return group.select_columns(["query", "positive"])
    group = group.filter(lambda batch: [len(n) >= num_negatives for n in batch["negatives"]], batched=True)

    def expand(batch: dict[str, list]) -> dict[str, list]:
        columns = {"query": batch["query"], "positive": batch["positive"]}
        for k in range(num_negatives):
            columns[f"negative_{k + 1}"] = [negatives[k] for negatives in batch["negatives"]]
        return columns

    return group.map(expand, batched=True, remove_columns=group.column_names)


def retrieval_split(group: Dataset) -> tuple[dict[str, str], dict[str, str], dict[str, set[str]]]:
    """Held-out rows -> (queries, corpus, relevant docs) for an InformationRetrievalEvaluator.

    The corpus is every held-out positive of the group (and given negatives): retrieval among its own kind.
    """
    query_ids, document_ids, relevant = {}, {}, defaultdict(set)
    for query, positive, negatives in zip(group["query"], group["positive"], group["negatives"]):
        qid = query_ids.setdefault(query, f"q{len(query_ids)}")
        for document in [positive, *negatives]:
            document_ids.setdefault(document, f"d{len(document_ids)}")
        relevant[qid].add(document_ids[positive])
    return (
        {qid: query for query, qid in query_ids.items()},
        {did: document for document, did in document_ids.items()},
        dict(relevant),
    )
