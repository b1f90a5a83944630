"""An mteb `ModelMeta` of a model folder, for MTEB runs and the leaderboard submission.

    python -m evaluation.model_meta RELEASE_FOLDER --name ORG/C2LLM-0.5B-repro --revision HUB_COMMIT \
        --release-date YYYY-MM-DD --training-code URL

prints the `ModelMeta(...)` entry to add to mteb's `mteb/models/model_implementations/codefuse_models.py`
in the mteb PR (see `evaluation.mteb_entry`). The MTEB runner (`python -m evaluation.mteb_code`) files
its results under the same `ModelMeta` (`model_meta_from_folder`), so `model_meta.json` and the entry agree.
Everything comes from the folder and the options, through the libraries that define the fields:

- mteb's `ModelMeta.from_sentence_transformer_model` on the folder loaded on the meta device (no weights are
  read, so a 7B folder takes seconds): embedding dim, similarity, loader; parameters and memory are those of
  the loaded model in the dtype its config stores; embedding parameters, its token embedding table;
- max tokens: what the backbone can take (`max_position_embeddings`, the convention of mteb's Hub reader and
  of its C2LLM entries), else the sequence length; output dtype: the dtype the weights are stored in;
- license, languages, base model, training datasets: the model card's front matter read by huggingface_hub
  (`license`, `language`, `base_model`, `datasets`), which the trainer's export writes from the recipe
  (`train/card.py`); the citation is the card's first ```bibtex block; the card language `code` stands for
  the programming languages of the tasks the model trained on;
- loader: for C2LLM folders, mteb's `InstructSentenceTransformerModel` set up as mteb's C2LLM entries
  (`c2llm_loader_kwargs`); other folders get mteb's `SentenceTransformerEncoderWrapper`.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import logging
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from c2llm_data.tasks import TRAINING_SOURCES
from c2llm_plumbing.compat_mteb import card_language_to_mteb
from evaluation.submission import (
    LOCAL_NAME_PREFIX,
    SubmissionError,
    check_submission_identity,
    check_training_datasets_known,
)

if TYPE_CHECKING:
    from huggingface_hub import ModelCardData
    from mteb.models import ModelMeta
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

MEBIBYTE = 1024**2
FRAMEWORKS = ["Sentence Transformers", "PyTorch", "safetensors", "Transformers"]
HUB_URL = "https://huggingface.co/"
CARD_CODE_LANGUAGE = "code"  # the model card tag for "programming languages"
PROGRAMMING_LANGUAGE_SUFFIX = "-Code"  # mteb's script code of programming languages ("python-Code")
_BIBTEX_BLOCK = re.compile(r"```bibtex\s*\n(.*?)```", re.DOTALL)


def model_file_folders(folder: Path) -> list[Path]:
    """The folder and its module subfolders (modules.json): where a model's own files are.

    Only these are read, so that checkpoints or other models stored below a model folder (our
    repository top is one) do not count.
    """
    modules_file = folder / "modules.json"
    modules = json.loads(modules_file.read_text(encoding="utf-8")) if modules_file.is_file() else []
    subfolders = [folder / module["path"] for module in modules if module.get("path")]
    return [folder, *(subfolder for subfolder in subfolders if subfolder.is_dir())]


def needs_remote_code(folder: Path) -> bool:
    """Whether the folder ships code that it loads (a `*.py` beside its configs: auto_map or custom modules)."""
    return any(path.suffix == ".py" for directory in model_file_folders(folder) for path in directory.iterdir())


def load_without_weights(folder: Path) -> SentenceTransformer:
    """The folder as a SentenceTransformer on the meta device, in the dtype its config stores: shapes, no data."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(
        str(folder), trust_remote_code=needs_remote_code(folder), model_kwargs={"device_map": "meta", "dtype": "auto"}
    )


def read_card_data(folder: Path) -> tuple[ModelCardData, str]:
    """(front matter, body) of the folder's README.md through huggingface_hub; empty ones without a README."""
    from huggingface_hub import ModelCard, ModelCardData

    readme = folder / "README.md"
    if not readme.is_file():
        return ModelCardData(), ""
    card = ModelCard.load(readme)
    return card.data, card.text


def backbone_config(model: SentenceTransformer) -> Any:
    """The transformers config of the model's first module (its backbone); None for modules without one."""
    return getattr(getattr(model[0], "auto_model", None), "config", None)


def output_dtypes(model: SentenceTransformer):
    """mteb's `OutputDType` of the weights as stored (loaded with dtype "auto"); None for float32."""
    import torch
    from mteb.types import OutputDType

    dtype = next(model.parameters()).dtype
    return {torch.bfloat16: OutputDType.BF16, torch.float16: OutputDType.FLOAT16}.get(dtype)


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
            code = card_language_to_mteb(language)
        if code:
            languages.append(code)
        else:
            logger.info("model card language %r has no mteb code; left out", language)
    return sorted(set(languages)) or None


def _dataset_key(dataset_id: str) -> str:
    """Loose key of a dataset id: last path part, lowercase, letters and digits only (ms_marco -> msmarco)."""
    return re.sub(r"[^a-z0-9]", "", dataset_id.rsplit("/", 1)[-1].lower())


def training_source_tasks() -> dict[str, str]:
    """Hub dataset id -> mteb task, for the registered training sources (`c2llm_data.tasks.TRAINING_SOURCES`)."""
    return {source.hub_id: source.task for source in TRAINING_SOURCES.values() if source.hub_id}


@functools.cache  # building every mteb task takes seconds; the installed mteb cannot change within a process
def mteb_task_index() -> tuple[frozenset[str], dict[str, frozenset[str]], dict[str, frozenset[str]]]:
    """Every mteb task name, and the task names by data path and by loose key of the name (`_dataset_key`)."""
    import mteb

    by_path: dict[str, set[str]] = {}
    by_key: dict[str, set[str]] = {}
    tasks = mteb.get_tasks(exclude_superseded=False)
    for task in tasks:
        by_path.setdefault(task.metadata.dataset["path"], set()).add(task.metadata.name)
        by_key.setdefault(_dataset_key(task.metadata.name), set()).add(task.metadata.name)
    names = frozenset(task.metadata.name for task in tasks)
    return names, {path: frozenset(found) for path, found in by_path.items()}, {
        key: frozenset(found) for key, found in by_key.items()}


def mteb_training_datasets(card_datasets: str | Iterable[str] | None) -> set[str] | None:
    """Model card datasets (Hub dataset ids or mteb task names) as the names of the mteb tasks they feed.

    mteb marks a model as not zero-shot on the tasks named here. A card dataset is matched, in this
    order, as an mteb task name, as the Hub id of an mteb task's data, as the Hub dataset of a registered
    training source (`training_source_tasks`), or by loose key (`_dataset_key`) against task names
    (ms_marco -> MSMARCO). Matching loose keys against data paths would be wrong: the key of
    `code-search-net/code_search_net` equals that of COIRCodeSearchNetRetrieval's `CoIR-Retrieval/CodeSearchNet`.
    One that matches nothing is logged and left out.
    """
    if not card_datasets:
        return None
    card_datasets = [card_datasets] if isinstance(card_datasets, str) else [str(d) for d in card_datasets]
    names, by_path, by_key = mteb_task_index()
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


def c2llm_loader_kwargs() -> dict[str, Any]:
    """Arguments of mteb's `InstructSentenceTransformerModel` for C2LLM, as in mteb's C2LLM entries.

    Each MTEB-Code task gets its query instruction and the document prompt of `c2llm_data.prompts`;
    inputs are cut to `DEFAULT_MAX_LENGTH` tokens and padded on the left.
    """
    from modeling_c2llm import DEFAULT_MAX_LENGTH
    from c2llm_data.prompts import DOCUMENT_PROMPT, TASK_INSTRUCTIONS, query_prompt

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


@dataclass(frozen=True)
class ReleaseDetails:
    """What a model folder cannot tell about its weights' release: the options of `add_model_meta_arguments`, as
    `ModelMeta` names them (None leaves the field to its default)."""

    release_date: str | None = None  # YYYY-MM-DD
    public_training_code: str | None = None  # URL
    public_training_data: str | None = None  # URL
    # Hub dataset ids or mteb task names the weights were trained on; None: the model card's `datasets`
    training_datasets: tuple[str, ...] | None = None


def model_meta_from_folder(
    folder: Path | str, *, name: str | None = None, revision: str | None = None,
    release: ReleaseDetails = ReleaseDetails(),
) -> ModelMeta:  # fmt: skip
    """An mteb `ModelMeta` for the sentence-transformers model in `folder` (see the module docstring).

    `name` is the Hub id (`org/model`; default `local/FOLDER_NAME`), `revision` the Hub commit
    (default `folder_revision`), `release` what the folder cannot tell (release date, training code and data).
    """
    from configuration_c2llm import C2LLMConfig
    from mteb.models import ModelMeta
    from mteb.models.instruct_wrapper import InstructSentenceTransformerModel

    folder = Path(folder).resolve()
    name = name or f"{LOCAL_NAME_PREFIX}{folder.name}"
    model = load_without_weights(folder)
    card, card_text = read_card_data(folder)
    config = backbone_config(model)
    bibtex = _BIBTEX_BLOCK.search(card_text)
    trained_on = mteb_training_datasets(list(release.training_datasets or ()) or card.datasets)
    loader: dict[str, Any] = {}  # mteb's sentence-transformers wrapper, as from_sentence_transformer_model sets it
    if getattr(config, "model_type", None) == C2LLMConfig.model_type:
        loader = dict(loader=InstructSentenceTransformerModel, loader_kwargs=c2llm_loader_kwargs())
    elif needs_remote_code(folder):
        loader = dict(loader_kwargs={"trust_remote_code": True})
    from_library = ModelMeta.from_sentence_transformer_model(model, fetch_from_hf=False)
    # Validated again as a whole (model_copy would not check what is added, e.g. a malformed release date).
    return ModelMeta.model_validate(
        dict(from_library)
        | dict(
            name=name,
            revision=revision or folder_revision(folder),
            release_date=release.release_date,
            languages=mteb_languages(card.language, task_programming_languages(trained_on or ())),
            n_parameters=sum(parameter.numel() for parameter in model.parameters()),
            # the token embedding table, counted as mteb's Hub reader and its C2LLM entries count it
            n_embedding_parameters=config.vocab_size * config.hidden_size if config is not None else None,
            memory_usage_mb=round(sum(p.numel() * p.element_size() for p in model.parameters()) / MEBIBYTE),
            # what the backbone can take, as mteb's Hub reader reads it (from_sentence_transformer_model
            # gives the length the folder truncates to)
            max_tokens=getattr(config, "max_position_embeddings", None) or model.max_seq_length,
            license=card.license,
            open_weights=True,
            public_training_code=release.public_training_code,
            public_training_data=release.public_training_data,
            framework=FRAMEWORKS,
            reference=None if name.startswith(LOCAL_NAME_PREFIX) else HUB_URL + name,
            use_instructions=any((model.prompts or {}).values()),
            training_datasets=trained_on,
            adapted_from=card.base_model[0] if isinstance(card.base_model, list) else card.base_model,
            citation=bibtex.group(1).strip() if bibtex else None,
            output_dtypes=output_dtypes(model),
            **loader,
        )
    )


def add_model_meta_arguments(parser: argparse.ArgumentParser) -> None:
    """The ModelMeta options both CLIs share, so the runner's model_meta.json and the mteb entry agree."""
    group = parser.add_argument_group("model metadata (mteb ModelMeta)")
    group.add_argument(
        "--training-datasets", nargs="+", default=None, metavar="DATASET",
        help="Hub dataset ids or mteb task names the weights were trained on (default: the model card's "
        "`datasets`, which the trainer's export writes from its recipe).",
    )  # fmt: skip
    group.add_argument("--release-date", default=None, metavar="YYYY-MM-DD", help="date the weights were published.")
    group.add_argument("--training-code", default=None, metavar="URL", help="URL of the public training code.")
    group.add_argument("--training-data", default=None, metavar="URL", help="URL of the public training data.")


def release_details(args: argparse.Namespace) -> ReleaseDetails:
    """The options of `add_model_meta_arguments`, for `model_meta_from_folder`."""
    return ReleaseDetails(
        release_date=args.release_date, public_training_code=args.training_code,
        public_training_data=args.training_data,
        training_datasets=tuple(args.training_datasets) if args.training_datasets else None,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    from evaluation.mteb_entry import mteb_entry_source

    parser = argparse.ArgumentParser(
        prog="python -m evaluation.model_meta",
        description="Print the mteb ModelMeta entry of a model folder, for the mteb PR (see evaluation/README.md).",
    )
    parser.add_argument("folder", type=Path, help="sentence-transformers model folder, e.g. . for C2LLM.")
    parser.add_argument("--name", default=None, help="Hub id org/model (default: local/FOLDER_NAME).")
    parser.add_argument("--revision", default=None, help="Hub commit of the weights (default: a local stand-in).")
    parser.add_argument(
        "--json", action="store_true", help="print JSON (as saved in mteb's results) instead of Python."
    )
    parser.add_argument(
        "--draft", action="store_true",
        help="print the entry of a model that is not released yet (local name or revision, unknown training data); "
        "mteb's registry would not accept it.",
    )  # fmt: skip
    add_model_meta_arguments(parser)
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"{args.folder} is not a folder.")
    from pydantic import ValidationError

    try:
        if not args.draft:
            check_submission_identity(args.name, args.revision, name_flag="--name",
                                      command="an mteb entry (or --draft)")
        meta = model_meta_from_folder(args.folder, name=args.name, revision=args.revision,
                                      release=release_details(args))
        if not args.draft:
            check_training_datasets_known(meta)
    except ValidationError as error:  # mteb's ModelMeta refuses a field: name it, not pydantic's report
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in error.errors())
        parser.error(f"mteb's ModelMeta refuses this entry ({problems}).")
    except (FileNotFoundError, ValueError, SubmissionError) as error:
        parser.error(str(error))
    print(json.dumps(meta.to_dict(), indent=2, default=str) if args.json else mteb_entry_source(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
