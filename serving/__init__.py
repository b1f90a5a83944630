"""Serving C2LLM: an OpenAI-compatible embeddings server (`python -m serving`, on LitServe) and corpus embedding
on Ray Data (`python -m serving.embed_corpus`). Both need the `serve` extra (`pip install -e ".[serve]"`, or
`bash setup.sh --dev`); docs/serving.md has the commands."""

import argparse
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from c2llm_plumbing.arguments import positive_int
from c2llm_plumbing.models import ModelError, prompts, resolve_model


def missing_serve_extra(*modules: str) -> str | None:
    """A message naming the fix when the `serve` extra's packages are not installed, else None."""
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    return (f"{', '.join(missing)} not installed: install the serve extra (pip install -e '.[serve]', or "
            "bash setup.sh --dev)")


@dataclass(frozen=True)
class ModelOptions:
    """The checked model folder and how it encodes: what `add_model_options` asks, as the workers that load the
    model take it (the server's inference worker, the corpus job's actors)."""

    folder: Path
    encode_batch_size: int  # texts per forward pass
    max_seq_length: int | None  # tokens read per text; None: the model's own

    @classmethod
    def from_args(cls, args: argparse.Namespace, folder: Path) -> "ModelOptions":
        """The options of `add_model_options` in `args`, with `folder` as `checked_model` resolved `--model`."""
        return cls(folder, args.encode_batch_size, args.max_seq_length)


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """The options both commands share: the model folder and how it encodes."""
    parser.add_argument("--model", required=True,
                        help="a model folder with modules.json (a C2LLM release folder, or any sentence-transformers "
                             "folder), or 'default' for default_model/")
    parser.add_argument("--encode-batch-size", type=positive_int, default=32,
                        help="texts per forward pass (default: 32)")
    parser.add_argument("--max-seq-length", type=positive_int,
                        help="tokens read per text (default: the model's; C2LLM: 2048)")


def checked_model(parser: argparse.ArgumentParser, model: str, prompt_option: str, prompt_name: str | None,
                  *modules: str) -> Path:
    """The model folder, after checking the serve extra's `modules`, the folder and the prompt name given with
    `prompt_option`; a problem ends the command with a message naming the fix, before any work."""
    missing = missing_serve_extra(*modules)
    if missing:
        parser.error(missing)
    try:
        model_dir = resolve_model(model)
    except ModelError as error:
        parser.error(str(error))
    names = sorted(prompts(model_dir))
    if prompt_name is not None and prompt_name not in names:
        parser.error(f"{prompt_option} {prompt_name!r} is not a prompt of {model_dir}; pass one of: "
                     f"{', '.join(names) or 'none (the model has no prompts: leave the option out)'}")
    return model_dir
