"""An mteb `ModelMeta` filled from a model folder, for MTEB runs and the leaderboard submission.

    python -m evaluation.model_meta . --name ORG/C2LLM-7B --revision HUB_COMMIT > c2llm_models.py

prints the `ModelMeta(...)` to paste into mteb's `mteb/models/model_implementations/` in the mteb PR.
Every field comes from the folder:

- parameters, embedding parameters and memory: the tensors of every `*.safetensors` file (headers only);
- embedding dim: the last module that declares one (Dense `out_features`, Pooling
  `word_embedding_dimension`), else `config.json` (`pma_dim`, then `hidden_size`);
- max tokens: `sentence_bert_config.json`; similarity and prompts: `config_sentence_transformers.json`;
- license, languages, training datasets, base model, citation: the README's YAML front matter
  (`license`, `language`, `datasets`, `base_model`) and its first ```bibtex block.
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
    """The sequence length the model is used with (sentence_bert_config.json), else what it can take."""
    sentence_config = _read_json(folder / "sentence_bert_config.json")
    if sentence_config.get("max_seq_length"):
        return sentence_config["max_seq_length"]
    return _read_json(folder / "config.json").get("max_position_embeddings")


def mteb_languages(card_languages: str | Iterable[str] | None) -> list[str] | None:
    """Model card languages ("en", "python", ...) as mteb codes ("eng-Latn", "python-Code")."""
    from mteb.languages.iso_mappings import _hf_lang_to_iso_lang_script  # the converter mteb uses for model cards
    from mteb.languages.programming_languages import PROGRAMMING_LANGS

    if not card_languages:
        return None
    languages = []
    for language in [card_languages] if isinstance(card_languages, str) else card_languages:
        language = str(language).strip().lower()
        code = f"{language}-Code" if language in PROGRAMMING_LANGS else _hf_lang_to_iso_lang_script(language)
        if code:
            languages.append(code)
        else:
            logger.info("model card language %r has no mteb code; left out", language)
    return sorted(set(languages)) or None


def _dataset_key(dataset_id: str) -> str:
    """Loose key of a dataset id: last path part, lowercase, letters and digits only (ms_marco -> msmarco)."""
    return re.sub(r"[^a-z0-9]", "", dataset_id.rsplit("/", 1)[-1].lower())


def mteb_training_datasets(card_datasets: str | Iterable[str] | None) -> set[str] | None:
    """Model card datasets (Hub dataset ids or mteb task names) as the names of the mteb tasks they feed.

    mteb marks a model as not zero-shot on the tasks named here. A card dataset matches a task whose
    data has the same Hub id, or failing that the same loose key (`_dataset_key`); one that matches
    no task is logged and left out.
    """
    import mteb

    if not card_datasets:
        return None
    card_datasets = [card_datasets] if isinstance(card_datasets, str) else [str(d) for d in card_datasets]
    by_path: dict[str, set[str]] = {}
    by_key: dict[str, set[str]] = {}
    for task in mteb.get_tasks(exclude_superseded=False):
        path, name = task.metadata.dataset["path"], task.metadata.name
        by_path.setdefault(path, set()).add(name)
        by_key.setdefault(_dataset_key(path), set()).add(name)
        by_key.setdefault(_dataset_key(name), set()).add(name)
    names, unmatched = set(), []
    for dataset in card_datasets:
        matches = by_path.get(dataset) or by_key.get(_dataset_key(dataset), set())
        names |= matches
        if not matches:
            unmatched.append(dataset)
    if unmatched:
        logger.info("training datasets that no mteb task uses, left out: %s", ", ".join(unmatched))
    return names


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
    embed_dim: int | None = None,
) -> ModelMeta:
    """An mteb `ModelMeta` for the sentence-transformers model in `folder` (see the module docstring).

    `name` is the Hub id (`org/model`; default `local/FOLDER_NAME`), `revision` the Hub commit
    (default `folder_revision`). `embed_dim` overrides the value read from the configs (pass
    `model.get_embedding_dimension()` when the model is loaded anyway).
    """
    from mteb.models import ModelMeta
    from mteb.models import SentenceTransformerEncoderWrapper

    folder = Path(folder).resolve()
    name = name or f"{LOCAL_NAME_PREFIX}{folder.name}"
    card, card_text = read_model_card(folder)
    statistics = tensor_statistics(folder)
    st_config = _read_json(folder / "config_sentence_transformers.json")
    base_model = card.get("base_model")
    bibtex = _BIBTEX_BLOCK.search(card_text)
    # Folders with their own modeling code (auto_map, like C2LLM) load only with trust_remote_code.
    needs_remote_code = "auto_map" in _read_json(folder / "config.json")
    return ModelMeta(
        loader=SentenceTransformerEncoderWrapper,
        loader_kwargs={"trust_remote_code": True} if needs_remote_code else {},
        name=name,
        revision=revision or folder_revision(folder),
        release_date=release_date,
        languages=mteb_languages(card.get("language")),
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
        training_datasets=mteb_training_datasets(card.get("datasets")),
        adapted_from=base_model[0] if isinstance(base_model, list) else base_model,
        citation=bibtex.group(1) if bibtex else None,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.model_meta",
        description="Print the mteb ModelMeta of a model folder, for the mteb PR (see evaluation/README.md).",
    )
    parser.add_argument("folder", type=Path, help="sentence-transformers model folder, e.g. . for C2LLM.")
    parser.add_argument("--name", default=None, help="Hub id org/model (default: local/FOLDER_NAME).")
    parser.add_argument("--revision", default=None, help="Hub commit of the weights (default: a local stand-in).")
    parser.add_argument("--release-date", default=None, help="YYYY-MM-DD the weights were published.")
    parser.add_argument("--training-code", default=None, help="URL of the public training code.")
    parser.add_argument("--training-data", default=None, help="URL of the public training data.")
    parser.add_argument("--json", action="store_true", help="print JSON (as saved in mteb's results) instead of Python.")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"{args.folder} is not a folder.")
    try:
        meta = model_meta_from_folder(
            args.folder, name=args.name, revision=args.revision, release_date=args.release_date,
            public_training_code=args.training_code, public_training_data=args.training_data,
        )
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    print(json.dumps(meta.to_dict(), indent=2, default=str) if args.json else meta.to_python())
    return 0


if __name__ == "__main__":
    sys.exit(main())
