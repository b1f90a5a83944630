"""An mteb `ModelMeta` filled from a model folder, for MTEB runs and the leaderboard submission.

    python -m evaluation.model_meta RELEASE_FOLDER --name ORG/C2LLM-0.5B-repro --revision HUB_COMMIT \
        --recipe train/configs/c2llm-0.5b.yaml --release-date YYYY-MM-DD --training-code URL

prints the `ModelMeta(...)` entry to add to mteb's `mteb/models/model_implementations/codefuse_models.py`
in the mteb PR (see `evaluation.mteb_entry`). The MTEB runner (`python -m evaluation.mteb_code`) files
its results under the same `ModelMeta` (`model_meta_from_folder`), so `model_meta.json` and the entry agree.
Every field comes from the folder, the options or the training recipe:

- parameters, embedding parameters and memory: the tensors of every `*.safetensors` file (headers only);
- embedding dim: the last module that declares one (Dense `out_features`, Pooling
  `word_embedding_dimension`), else `config.json` (`pma_dim`, then `hidden_size`);
- max tokens: what the backbone can take (`config.json` `max_position_embeddings`, mteb's convention),
  else `sentence_bert_config.json`; output dtype: `config.json` `dtype`;
- similarity and prompts: `config_sentence_transformers.json`;
- license, languages, base model, citation: the README's YAML front matter (`license`, `language`,
  `base_model`) and its first ```bibtex block; the card language `code` stands for the programming
  languages of the tasks the model trained on;
- training datasets: the mteb tasks whose data the recipe's `data.datasets` trains on (`--recipe`), else
  the card's `datasets`;
- loader: for C2LLM folders, mteb's `InstructSentenceTransformerModel` set up as mteb's C2LLM entries
  (`c2llm_loader_kwargs`); other folders get mteb's `SentenceTransformerEncoderWrapper`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mteb.models import ModelMeta

logger = logging.getLogger(__name__)

MEBIBYTE = 1024**2
FRAMEWORKS = ["Sentence Transformers", "PyTorch", "safetensors", "Transformers"]
DEFAULT_SIMILARITY = "cosine"
HUB_URL = "https://huggingface.co/"
LOCAL_NAME_PREFIX = "local/"
CARD_CODE_LANGUAGE = "code"  # the model card tag for "programming languages"
PROGRAMMING_LANGUAGE_SUFFIX = "-Code"  # mteb's script code of programming languages ("python-Code")
# Tensor name endings of the token embedding table in the backbones we use (Qwen2, BERT, GPT-2).
EMBEDDING_TENSOR_SUFFIXES = ("embed_tokens.weight", "word_embeddings.weight", "wte.weight")
# Config keys that state a module's output size, most specific first.
MODULE_DIMENSION_KEYS = ("out_features", "embedding_dimension", "embedding_dim", "output_dim", "word_embedding_dimension")
MODEL_DIMENSION_KEYS = ("pma_dim", "compressed_dim", "hidden_size")
FLOAT_DTYPE_PREFIXES = ("F", "BF")  # safetensors dtype names: F64, F32, F16, BF16, F8_E4M3, ...
_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.DOTALL)
_BIBTEX_BLOCK = re.compile(r"```bibtex\s*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class TensorStatistics:
    """What the safetensors headers of a model folder say about its size."""

    n_parameters: int
    n_embedding_parameters: int | None
    n_bytes: int


def model_file_folders(folder: Path) -> list[Path]:
    """The folder and its module subfolders (modules.json): where a model's own files are.

    Only these are read, so that checkpoints or other models stored below a model folder (our
    repository top is one) do not count.
    """
    modules = _read_json(folder / "modules.json") or []  # a list of {"path": ..., "type": ...}
    subfolders = [folder / module["path"] for module in modules if module.get("path")]
    return [folder, *(subfolder for subfolder in subfolders if subfolder.is_dir())]


def tensor_statistics(folder: Path) -> TensorStatistics:
    """Count parameters and bytes over the `*.safetensors` files of the model in `folder`."""
    from safetensors import safe_open

    files = sorted(path for directory in model_file_folders(folder) for path in directory.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder} has no *.safetensors file to count parameters from.")
    n_parameters = n_bytes = 0
    n_embedding = None
    for path in files:
        # Reading the header only: no tensor data is loaded, so this is instant even for 7B models.
        with safe_open(path, framework="numpy") as tensors:
            for name in tensors.keys():
                tensor = tensors.get_slice(name)
                if not tensor.get_dtype().startswith(FLOAT_DTYPE_PREFIXES):
                    continue  # integer buffers such as BERT's position_ids are not parameters
                count = 1
                for size in tensor.get_shape():
                    count *= size
                n_parameters += count
                n_bytes += count * _dtype_bytes(tensor.get_dtype())
                if name.endswith(EMBEDDING_TENSOR_SUFFIXES):
                    n_embedding = (n_embedding or 0) + count
    return TensorStatistics(n_parameters, n_embedding, n_bytes)


def _dtype_bytes(dtype: str) -> int:
    """Bytes per element of a safetensors float dtype name such as F32, BF16, F8_E4M3."""
    bits = int(re.search(r"\d+", dtype).group())
    return max(1, bits // 8)


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def read_model_card(folder: Path) -> tuple[dict[str, Any], str]:
    """(YAML front matter as a dict, full text) of the folder's README.md; ({}, "") without one."""
    import yaml

    readme = folder / "README.md"
    if not readme.is_file():
        return {}, ""
    text = readme.read_text(encoding="utf-8")
    match = _FRONT_MATTER.match(text)
    return (yaml.safe_load(match.group(1)) or {}) if match else {}, text


def embedding_dimension(folder: Path) -> int | None:
    """Output size of a sentence-transformers folder, from its module configs (see module docstring)."""
    modules = _read_json(folder / "modules.json") or []  # a list of {"path": ..., "type": ...}
    for module in reversed(modules):
        config = _read_json(folder / module.get("path", "") / "config.json") if module.get("path") else {}
        for key in MODULE_DIMENSION_KEYS:
            if isinstance(config.get(key), int):
                return config[key]
    model_config = _read_json(folder / "config.json")
    return next((model_config[key] for key in MODEL_DIMENSION_KEYS if isinstance(model_config.get(key), int)), None)


def max_tokens(folder: Path) -> int | None:
    """What the model can take (mteb's convention: `max_position_embeddings`), else its sequence length."""
    model_config = _read_json(folder / "config.json")
    if model_config.get("max_position_embeddings"):
        return model_config["max_position_embeddings"]
    return _read_json(folder / "sentence_bert_config.json").get("max_seq_length")


def output_dtypes(folder: Path):
    """mteb's `OutputDType` of the weights the model loads with (`config.json` dtype); None for float32."""
    from mteb.types import OutputDType

    model_config = _read_json(folder / "config.json")
    dtype = model_config.get("dtype") or model_config.get("torch_dtype")
    return {"bfloat16": OutputDType.BF16, "float16": OutputDType.FLOAT16}.get(dtype)


def task_programming_languages(task_names: Iterable[str]) -> list[str]:
    """The programming languages (mteb codes such as "python-Code") the named mteb tasks are in."""
    import mteb

    task_names = sorted(task_names)
    if not task_names:
        return []  # mteb.get_tasks(tasks=[]) would mean every task
    languages = set()
    for task in mteb.get_tasks(tasks=task_names, exclude_superseded=False):
        eval_langs = task.metadata.eval_langs
        for codes in eval_langs.values() if isinstance(eval_langs, dict) else [eval_langs]:
            languages.update(code for code in codes if code.endswith(PROGRAMMING_LANGUAGE_SUFFIX))
    return sorted(languages)


def mteb_languages(card_languages: str | Iterable[str] | None, code_languages: Iterable[str] = ()) -> list[str] | None:
    """Model card languages ("en", "python", ...) as mteb codes ("eng-Latn", "python-Code").

    The card tag `code` (any programming language) becomes `code_languages`; mteb has no code for it.
    """
    from mteb.languages.iso_mappings import _hf_lang_to_iso_lang_script  # the converter mteb uses for model cards
    from mteb.languages.programming_languages import PROGRAMMING_LANGS

    if not card_languages:
        return None
    languages = []
    for language in [card_languages] if isinstance(card_languages, str) else card_languages:
        language = str(language).strip().lower()
        if language == CARD_CODE_LANGUAGE:
            languages.extend(code_languages)
            continue
        if language in PROGRAMMING_LANGS:
            code = f"{language}{PROGRAMMING_LANGUAGE_SUFFIX}"
        else:
            code = _hf_lang_to_iso_lang_script(language)
        if code:
            languages.append(code)
        else:
            logger.info("model card language %r has no mteb code; left out", language)
    return sorted(set(languages)) or None


def _dataset_key(dataset_id: str) -> str:
    """Loose key of a dataset id: last path part, lowercase, letters and digits only (ms_marco -> msmarco)."""
    return re.sub(r"[^a-z0-9]", "", dataset_id.rsplit("/", 1)[-1].lower())


def training_source_tasks() -> dict[str, str]:
    """Hub dataset id -> mteb task, for the datasets the training recipe loads (`train.data.SOURCES`).

    Several MTEB-Code tasks store a processed copy of their source elsewhere (mteb's
    CodeSearchNetRetrieval is `mteb/CodeSearchNetRetrieval`, built from `code-search-net/code_search_net`),
    so the recipe's own table is what links a source dataset to its task.
    """
    from train.data import SOURCES

    return {source.hub_id: source.task for source in SOURCES.values() if source.hub_id}


def mteb_training_datasets(card_datasets: str | Iterable[str] | None) -> set[str] | None:
    """Model card datasets (Hub dataset ids or mteb task names) as the names of the mteb tasks they feed.

    mteb marks a model as not zero-shot on the tasks named here. A card dataset is matched, in this
    order, as an mteb task name, as the Hub id of an mteb task's data, as a source dataset of the
    training recipe (`training_source_tasks`), or by loose key (`_dataset_key`) against task names
    (ms_marco -> MSMARCO). Matching loose keys against data paths would be wrong: the key of
    `code-search-net/code_search_net` equals that of COIRCodeSearchNetRetrieval's `CoIR-Retrieval/CodeSearchNet`.
    One that matches nothing is logged and left out.
    """
    import mteb

    if not card_datasets:
        return None
    card_datasets = [card_datasets] if isinstance(card_datasets, str) else [str(d) for d in card_datasets]
    names: set[str] = set()
    by_path: dict[str, set[str]] = {}
    by_key: dict[str, set[str]] = {}
    for task in mteb.get_tasks(exclude_superseded=False):
        names.add(task.metadata.name)
        by_path.setdefault(task.metadata.dataset["path"], set()).add(task.metadata.name)
        by_key.setdefault(_dataset_key(task.metadata.name), set()).add(task.metadata.name)
    source_tasks = training_source_tasks()
    matched, unmatched = set(), []
    for dataset in card_datasets:
        if dataset in names:
            matches = {dataset}
        elif dataset in by_path:
            matches = by_path[dataset]
        elif dataset in source_tasks:
            matches = {source_tasks[dataset]}
        else:
            matches = by_key.get(_dataset_key(dataset), set())
        matched |= matches
        if not matches:
            unmatched.append(dataset)
    if unmatched:
        logger.info("training datasets that no mteb task uses, left out: %s", ", ".join(unmatched))
    return matched


def recipe_training_tasks(recipe_path: Path | str) -> set[str]:
    """The mteb tasks whose data a training recipe's `data.datasets` trains on (`train/configs/*.yaml`).

    Hub sources count by their data; local files and docstrings mined from installed modules
    (`python_docstrings`) are not mteb data, whatever instruction (`task:`) they are trained with.
    """
    from train.recipe import load_recipe
    from train.data import SOURCES

    tasks = set()
    for spec in load_recipe(recipe_path).data.datasets:
        source = SOURCES.get(spec.name) if spec.name else None
        if source is None or source.hub_id is None:
            logger.info("training source %s is not an mteb task's data; not a training dataset", spec.label)
            continue
        tasks.add(source.task)
    return tasks


def is_c2llm_folder(folder: Path) -> bool:
    """Whether `folder` holds a C2LLM model (config.json model_type), which mteb loads like its C2LLM entries."""
    from configuration_c2llm import C2LLMConfig

    return _read_json(folder / "config.json").get("model_type") == C2LLMConfig.model_type


def c2llm_loader_kwargs() -> dict[str, Any]:
    """Arguments of mteb's `InstructSentenceTransformerModel` for C2LLM, as in mteb's C2LLM entries.

    Each MTEB-Code task gets its query instruction and the document prompt of `evaluation.prompts`;
    inputs are cut to `DEFAULT_MAX_LENGTH` tokens and padded on the left.
    """
    from modeling_c2llm import DEFAULT_MAX_LENGTH
    from evaluation.prompts import DOCUMENT_PROMPT, TASK_INSTRUCTIONS, query_prompt

    return dict(
        trust_remote_code=True,
        prompts_dict={
            task: {"query": query_prompt(instruction), "document": DOCUMENT_PROMPT}
            for task, instruction in TASK_INSTRUCTIONS.items()
        },
        apply_instruction_to_passages=True,
        max_seq_length=DEFAULT_MAX_LENGTH,
        padding_side="left",
    )


def folder_revision(folder: Path) -> str:
    """A stand-in revision for a local folder: changes whenever a weight or config file is rewritten.

    mteb's cache keys results by (name, revision), so a retrained model must not reuse a revision.
    Pass the Hub commit with --revision for a submission.
    """
    digest = hashlib.sha256()
    for path in sorted(path for directory in model_file_folders(folder) for path in directory.iterdir()):
        if path.is_file() and path.suffix in {".safetensors", ".json", ".py"}:
            stat = path.stat()
            digest.update(f"{path.relative_to(folder)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return "local-" + digest.hexdigest()[:12]


def model_meta_from_folder(
    folder: Path | str,
    *,
    name: str | None = None,
    revision: str | None = None,
    release_date: str | None = None,
    public_training_code: str | None = None,
    public_training_data: str | None = None,
    training_recipe: Path | str | None = None,
    embed_dim: int | None = None,
) -> ModelMeta:
    """An mteb `ModelMeta` for the sentence-transformers model in `folder` (see the module docstring).

    `name` is the Hub id (`org/model`; default `local/FOLDER_NAME`), `revision` the Hub commit
    (default `folder_revision`), `training_recipe` the recipe file the weights were trained with.
    `embed_dim` overrides the value read from the configs (pass `model.get_embedding_dimension()`
    when the model is loaded anyway).
    """
    from mteb.models import ModelMeta, SentenceTransformerEncoderWrapper
    from mteb.models.instruct_wrapper import InstructSentenceTransformerModel

    folder = Path(folder).resolve()
    name = name or f"{LOCAL_NAME_PREFIX}{folder.name}"
    card, card_text = read_model_card(folder)
    statistics = tensor_statistics(folder)
    st_config = _read_json(folder / "config_sentence_transformers.json")
    base_model = card.get("base_model")
    bibtex = _BIBTEX_BLOCK.search(card_text)
    training_datasets = (
        recipe_training_tasks(training_recipe) if training_recipe else mteb_training_datasets(card.get("datasets"))
    )
    if is_c2llm_folder(folder):
        loader, loader_kwargs = InstructSentenceTransformerModel, c2llm_loader_kwargs()
    else:
        # Folders with their own modeling code (auto_map) load only with trust_remote_code.
        needs_remote_code = "auto_map" in _read_json(folder / "config.json")
        loader = SentenceTransformerEncoderWrapper
        loader_kwargs = {"trust_remote_code": True} if needs_remote_code else {}
    return ModelMeta(
        loader=loader,
        loader_kwargs=loader_kwargs,
        name=name,
        revision=revision or folder_revision(folder),
        release_date=release_date,
        languages=mteb_languages(card.get("language"), task_programming_languages(training_datasets or ())),
        n_parameters=statistics.n_parameters,
        n_embedding_parameters=statistics.n_embedding_parameters,
        memory_usage_mb=round(statistics.n_bytes / MEBIBYTE),
        max_tokens=max_tokens(folder),
        embed_dim=embed_dim or embedding_dimension(folder),
        license=card.get("license"),
        open_weights=True,
        public_training_code=public_training_code,
        public_training_data=public_training_data,
        framework=FRAMEWORKS,
        reference=None if name.startswith(LOCAL_NAME_PREFIX) else HUB_URL + name,
        similarity_fn_name=st_config.get("similarity_fn_name") or DEFAULT_SIMILARITY,
        use_instructions=any((st_config.get("prompts") or {}).values()),
        training_datasets=training_datasets,
        adapted_from=base_model[0] if isinstance(base_model, list) else base_model,
        citation=bibtex.group(1).strip() if bibtex else None,
        output_dtypes=output_dtypes(folder),
    )


def add_model_meta_arguments(parser: argparse.ArgumentParser) -> None:
    """The ModelMeta options both CLIs share, so the runner's model_meta.json and the mteb entry agree."""
    group = parser.add_argument_group("model metadata (mteb ModelMeta)")
    group.add_argument(
        "--recipe", type=Path, default=None, metavar="FILE",
        help="training recipe the weights come from (e.g. train/configs/c2llm-0.5b.yaml): its data section "
        "gives the mteb tasks the model trained on (default: the model card's datasets).",
    )
    group.add_argument("--release-date", default=None, metavar="YYYY-MM-DD", help="date the weights were published.")
    group.add_argument("--training-code", default=None, metavar="URL", help="URL of the public training code.")
    group.add_argument("--training-data", default=None, metavar="URL", help="URL of the public training data.")


def model_meta_options(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments of `model_meta_from_folder` from the options of `add_model_meta_arguments`."""
    if args.recipe is not None and not args.recipe.is_file():
        raise FileNotFoundError(f"--recipe {args.recipe}: no such file (the recipes are in train/configs/).")
    return dict(
        release_date=args.release_date, public_training_code=args.training_code,
        public_training_data=args.training_data, training_recipe=args.recipe,
    )


def main(argv: list[str] | None = None) -> int:
    from evaluation.mteb_entry import mteb_entry_source

    parser = argparse.ArgumentParser(
        prog="python -m evaluation.model_meta",
        description="Print the mteb ModelMeta entry of a model folder, for the mteb PR (see evaluation/README.md).",
    )
    parser.add_argument("folder", type=Path, help="sentence-transformers model folder, e.g. . for C2LLM.")
    parser.add_argument("--name", default=None, help="Hub id org/model (default: local/FOLDER_NAME).")
    parser.add_argument("--revision", default=None, help="Hub commit of the weights (default: a local stand-in).")
    parser.add_argument("--json", action="store_true", help="print JSON (as saved in mteb's results) instead of Python.")
    parser.add_argument("--draft", action="store_true",
                        help="print the entry of a model that is not released yet (local name or revision, unknown "
                        "training data); mteb's registry would not accept it.")
    add_model_meta_arguments(parser)
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"{args.folder} is not a folder.")
    from pydantic import ValidationError

    from evaluation.submission import SubmissionError, check_submission_identity, check_training_datasets_known

    try:
        if not args.draft:
            check_submission_identity(args.name, args.revision, name_flag="--name",
                                      command="an mteb entry (or --draft)")
        meta = model_meta_from_folder(args.folder, name=args.name, revision=args.revision, **model_meta_options(args))
        if not args.draft:
            check_training_datasets_known(meta)
    except ValidationError as error:  # mteb's ModelMeta refuses a field: name it, not pydantic's report
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in error.errors())
        parser.error(f"mteb's ModelMeta refuses this entry ({problems}).")
    except (FileNotFoundError, ValueError, SubmissionError) as error:  # ConfigError of a bad recipe is a ValueError
        parser.error(str(error))
    print(json.dumps(meta.to_dict(), indent=2, default=str) if args.json else mteb_entry_source(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
