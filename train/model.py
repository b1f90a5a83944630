"""What every start model shares once it is a sentence-transformers folder (``train/start_models.py`` makes it one).

- ``load_sentence_transformer``: a folder (start model, checkpoint, ``mining.model``) as a SentenceTransformer, with
  the recipe's attention kernel and dtype.
- ``add_lora``: peft LoRA on the backbone's linear layers; the PMA head is trained in full and saved with the adapter
  (peft ``modules_to_save``); ``train.merge`` folds them back.
- ``freeze_below_top_layers``: full fine-tuning of only the top N transformer layers (+ head).
- ``resolve_model_path``, ``looks_like_local_path``: model paths as the recipe writes them.

The repository root must be importable (``python -m train.train`` from the root does that) for the model core.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import torch
from torch import nn

from .args import ConfigError, LoraArguments, ModelArguments

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]


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


def looks_like_local_path(value: str) -> bool:
    """A Hub id is `name` or `org/name`; anything else (absolute, ./, ../, deeper) names a local folder."""
    return Path(value).is_absolute() or value.startswith((".", "~")) or value.count("/") > 1


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


PMA_HEAD = "pma"  # C2LLMModel's pooling head module, and the name of its pooling


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
    # A parameter-free pooling (C2LLM's last_token and mean ablations) has no PMA module to train.
    parameter_free = getattr(backbone.config, "pooling", PMA_HEAD) != PMA_HEAD
    head_modules = [head for head in args.head_modules if not (parameter_free and head == PMA_HEAD)]
    for head in head_modules:
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
            modules_to_save=head_modules or None,
        )
    )


def freeze_below_top_layers(model, top_layers: int) -> list[str]:
    """Train only the top ``top_layers`` transformer layers of ``model``'s backbone and its later modules (the head);
    returns the names of the trainable backbone parameters. Layers are found by their index in the parameter name
    (``encoder.layer.N.`` in BERT, ``layers.N.`` in Qwen2)."""
    backbone = model[0]
    numbered = re.compile(r"\.(?:layer|layers|h|block)\.(\d+)\.")
    indices = {int(match.group(1)) for name, _ in backbone.named_parameters() if (match := numbered.search(f".{name}"))}
    if not indices:
        raise ConfigError("model.train_top_layers: the backbone has no numbered layers (encoder.layer.N, layers.N).")
    if top_layers > len(indices):
        raise ConfigError(f"model.train_top_layers={top_layers}, but the backbone has {len(indices)} layers.")
    trained_layers = set(sorted(indices)[-top_layers:])
    trainable = []
    for name, parameter in backbone.named_parameters():
        match = numbered.search(f".{name}")
        parameter.requires_grad = bool(match) and int(match.group(1)) in trained_layers
        if parameter.requires_grad:
            trainable.append(name)
    for module in list(model)[1:]:
        for parameter in module.parameters():
            parameter.requires_grad = True
    logger.info("training the top %d of %d layers (%d backbone tensors) and the head", top_layers, len(indices),
                len(trainable))  # fmt: skip
    return trainable
