"""Write a C2LLM model folder in the release layout, loadable from a local path or the Hub.

    config.json                 C2LLMConfig + auto_map (AutoConfig, AutoModel)
    model.safetensors           backbone + PMA head, the only weights file
    configuration_c2llm.py      \
    modeling_c2llm.py            > the code `trust_remote_code=True` runs, flat files
    sentence_c2llm.py           /
    tokenizer*.json, vocab.json, merges.txt    Qwen2.5 tokenizer, left padding
    modules.json                C2LLMTransformer -> C2LLMPooling -> Normalize
    sentence_bert_config.json   max_seq_length
    config_sentence_transformers.json          prompts, cosine similarity
    pooling/config.json         embedding dimension
    README.md                   model card (optional)

The repository root holds the same JSON files as templates for C2LLM-0.5B (`--write-root-templates`),
so that they are generated from this one place; a test checks that they are up to date.

Usage:
    python -m train.release --write-root-templates
"""

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from c2llm_data.prompts import sentence_transformers_prompts
from modeling_c2llm import DEFAULT_MAX_LENGTH
from train.tokenizer import write_tokenizer_files

REPO_ROOT = Path(__file__).resolve().parents[1]
CODE_FILES = (
    "configuration_c2llm.py", "modeling_c2llm.py", "packing_c2llm.py", "pooling_c2llm.py", "sentence_c2llm.py"
)
# What a sentence-transformers pipeline with `PMAPoolingHead` on another backbone runs (e.g. default_model/).
HEAD_CODE_FILES = ("pooling_c2llm.py", "sentence_c2llm.py")
AUTO_MAP = {"AutoConfig": "configuration_c2llm.C2LLMConfig", "AutoModel": "modeling_c2llm.C2LLMModel"}
# Serving length of a released folder: the published model's `encode` and mteb's C2LLM entry embed up to
# 2,048 tokens (training itself uses 1,024, paper section 4.1).
SERVING_MAX_LENGTH = DEFAULT_MAX_LENGTH
POOLING_DIR = "pooling"
# Oldest sentence-transformers major we support: a newer number here would make 5.x warn on load.
ST_FORMAT_VERSION = "5.1.0"
# Qwen2.5-Coder-0.5B-Instruct's shape, plus the paper's PMA settings: the C2LLM-0.5B template.
C2LLM_05B_CONFIG = dict(
    vocab_size=151936,
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    max_window_layers=21,
    rms_norm_eps=1e-6,
    rope_theta=1000000.0,
    tie_word_embeddings=True,
    bos_token_id=151643,
    eos_token_id=151643,
    pad_token_id=151643,
    torch_dtype="bfloat16",
    pma_num_heads=32,
    pma_dim=896,
)


def modules_config() -> list[dict]:
    """modules.json. Type strings must import in sentence-transformers 5 and 6: the custom classes
    resolve as `file.Class` from the model folder, Normalize through its legacy path."""
    return [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_c2llm.C2LLMTransformer"},
        {"idx": 1, "name": "1", "path": POOLING_DIR, "type": "sentence_c2llm.C2LLMPooling"},
        {"idx": 2, "name": "2", "path": "normalize", "type": "sentence_transformers.models.Normalize"},
    ]


def sentence_transformers_config() -> dict:
    return {
        "__version__": {"sentence_transformers": ST_FORMAT_VERSION},
        "prompts": sentence_transformers_prompts(),
        "default_prompt_name": None,
        "similarity_fn_name": "cosine",
    }


# sentence-transformers 6 saves its own modules under import paths that 5.x cannot import (e.g.
# `sentence_transformers.base.modules.normalize.Normalize`); `sentence_transformers.models.X` loads in both.
LEGACY_MODULE_CLASSES = ("Normalize", "Pooling", "Transformer", "Dense")


def use_legacy_module_types(folder: str | Path) -> None:
    """Rewrite a saved folder's modules.json so that sentence-transformers 5 and 6 both load it."""
    path = Path(folder) / "modules.json"
    modules = json.loads(path.read_text(encoding="utf-8"))
    for module in modules:
        package, _, class_name = module["type"].rpartition(".")
        if package.startswith("sentence_transformers.") and class_name in LEGACY_MODULE_CLASSES:
            module["type"] = f"sentence_transformers.models.{class_name}"
    write_json(path, modules)


def copy_code_files(folder: str | Path, names: tuple[str, ...] = CODE_FILES) -> None:
    """Put flat code files at a model folder's root, where Hub loading looks for them.

    Needed for any saved sentence-transformers pipeline that uses `sentence_c2llm` classes imported from
    this repository (sentence-transformers copies code only for classes it loaded from a model folder);
    `names=HEAD_CODE_FILES` for a pipeline whose only C2LLM part is `PMAPoolingHead`.
    """
    for name in names:
        shutil.copyfile(REPO_ROOT / name, Path(folder) / name)


def write_json(path: Path, content) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_sentence_transformers_files(output_dir: Path, embedding_dim: int, max_seq_length: int) -> None:
    write_json(output_dir / "modules.json", modules_config())
    write_json(output_dir / "sentence_bert_config.json", {"max_seq_length": max_seq_length, "do_lower_case": False})
    write_json(output_dir / "config_sentence_transformers.json", sentence_transformers_config())
    write_json(output_dir / POOLING_DIR / "config.json", {"embedding_dimension": embedding_dim})


def with_legacy_keys(content: dict) -> dict:
    """Add the key spellings transformers 4.x reads to a config written by transformers 5.

    transformers 5 stores the RoPE base inside `rope_parameters` and the dtype as `dtype`; 4.x would
    silently fall back to its default RoPE base (10,000 instead of Qwen2.5's 1,000,000) and ignore the
    dtype. Both spellings are kept so one config.json loads correctly under both majors.
    """
    rope_parameters = content.get("rope_parameters") or {}
    if "rope_theta" not in content and "rope_theta" in rope_parameters:
        content["rope_theta"] = rope_parameters["rope_theta"]
    if "dtype" in content and "torch_dtype" not in content:
        content["torch_dtype"] = content["dtype"]
    return content


def release_config_dict(config) -> dict:
    """config.json content: the model config's non-default fields, auto_map and architectures."""
    content = config.to_diff_dict()
    content["auto_map"] = dict(AUTO_MAP)
    content["architectures"] = ["C2LLMModel"]
    content.pop("_name_or_path", None)
    content.pop("transformers_version", None)
    return with_legacy_keys(content)


def make_shareable(folder: Path) -> None:
    """rwxr-xr-x folders and rw-r--r-- files: mkdtemp makes folders private and some writers (transformers 5's
    safetensors save) make files private, while a model folder is meant to be read by other users."""
    folder.chmod(0o755)
    for path in folder.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)


def write_release_folder(
    model,
    output_dir: str | Path,
    tokenizer_dir: str | Path,
    max_seq_length: int = SERVING_MAX_LENGTH,
    model_card: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Save `model` (a `C2LLMModel`) with everything needed to load it by AutoModel and SentenceTransformer.

    The folder is built in a temporary sibling directory and moved into place at the end, so a crash
    never leaves a half-written model. An existing non-empty `output_dir` is an error unless
    `overwrite=True`.
    """
    output_dir = Path(output_dir)
    if output_dir.exists() and any(output_dir.iterdir()) and not overwrite:
        raise FileExistsError(
            f"{output_dir} already exists and is not empty; choose another folder or pass overwrite=True."
        )
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}-", dir=output_dir.parent))
    try:
        model.config.auto_map = dict(AUTO_MAP)
        model.config.architectures = ["C2LLMModel"]
        model.save_pretrained(staging, safe_serialization=True)
        saved_config = json.loads((staging / "config.json").read_text(encoding="utf-8"))
        write_json(staging / "config.json", with_legacy_keys(saved_config))
        copy_code_files(staging)
        write_tokenizer_files(tokenizer_dir, staging, model_max_length=max_seq_length)
        write_sentence_transformers_files(staging, model.config.embedding_dim, max_seq_length)
        if model_card is not None:
            (staging / "README.md").write_text(model_card, encoding="utf-8")
        if output_dir.exists():
            shutil.rmtree(output_dir)
        make_shareable(staging)
        staging.rename(output_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return output_dir


def write_root_templates(root: Path = REPO_ROOT) -> list[Path]:
    """(Re)write the repository root's config.json and sentence-transformers files for C2LLM-0.5B."""
    from configuration_c2llm import C2LLMConfig

    config = C2LLMConfig(**C2LLM_05B_CONFIG)
    write_json(root / "config.json", release_config_dict(config))
    write_sentence_transformers_files(root, config.embedding_dim, SERVING_MAX_LENGTH)
    tokenizer_config = {
        "padding_side": "left", "model_max_length": SERVING_MAX_LENGTH, "tokenizer_class": "Qwen2Tokenizer"
    }  # fmt: skip
    write_json(root / "tokenizer_config.json", tokenizer_config)
    return [root / name for name in ("config.json", "modules.json", "sentence_bert_config.json",
                                     "config_sentence_transformers.json", f"{POOLING_DIR}/config.json",
                                     "tokenizer_config.json")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--write-root-templates",
        action="store_true",
        help="rewrite config.json and the sentence-transformers JSON files at the repository root",
    )
    args = parser.parse_args()
    if not args.write_root_templates:
        parser.error("nothing to do: pass --write-root-templates")
    for path in write_root_templates():
        print(f"wrote {path.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
