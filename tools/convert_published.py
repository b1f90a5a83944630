"""Convert a published C2LLM checkpoint (codefuse-ai/C2LLM-*) into this repository's layout.

The published checkpoints keep the backbone under `plm_model.model.*` (plus an LM head,
`plm_model.lm_head.*`, that embeddings never use) and the pooling head under `mha_pma.*`, named after
the Set Transformer code: `S` (the query), `mab.fc_q/fc_k/fc_v/fc_o` and `mab.ln0/ln1`. This tool
renames every tensor, drops the LM head, loads the result strictly (zero missing or unexpected keys,
or it stops and lists them) and writes a release folder.

    python -m tools.convert_published PUBLISHED_DIR OUTPUT_DIR

PUBLISHED_DIR is a local download (`hf download codefuse-ai/C2LLM-0.5B --local-dir ...`). Every compressed
dimension converts, in either reading of the PMA residual: the query's width (`pma_query_dim`) is taken from the
checkpoint's `S`. The default, `--pma-residual projected_query`, is what the published model computes (its
`PMA_v2` block adds the projected seed); `--pma-residual query` writes CodeFuse-CGE's reading (the raw seed), which
`python -m tools.parity_check` uses to show which reading reproduces the published vectors.
"""

import argparse
import json
import re
from pathlib import Path

# Published config fields that do not describe the model: the published config asks for flash_attention_2,
# which is optional here (the converted folder uses the transformers default, sdpa, unless asked otherwise).
PUBLISHED_RUNTIME_FIELDS = ("model_type", "auto_map", "architectures", "_name_or_path", "transformers_version",
                            "attn_implementation", "_attn_implementation")
# (published key pattern, our key template); the first match wins.
KEY_RENAMES = (
    (r"^plm_model\.model\.(.+)$", r"model.\1"),
    (r"^mha_pma\.S$", "pma.query"),
    (r"^mha_pma\.mab\.fc_q\.(weight|bias)$", r"pma.q_proj.\1"),
    (r"^mha_pma\.mab\.fc_k\.(weight|bias)$", r"pma.k_proj.\1"),
    (r"^mha_pma\.mab\.fc_v\.(weight|bias)$", r"pma.v_proj.\1"),
    (r"^mha_pma\.mab\.fc_o\.(weight|bias)$", r"pma.o_proj.\1"),
    (r"^mha_pma\.mab\.ln0\.(weight|bias)$", r"pma.attention_norm.\1"),
    (r"^mha_pma\.mab\.ln1\.(weight|bias)$", r"pma.output_norm.\1"),
)
DROPPED_KEYS = re.compile(r"^plm_model\.lm_head\.")


def rename_published_key(key: str) -> str | None:
    """Our name for a published tensor name, None for tensors we drop; ValueError for unknown ones."""
    if DROPPED_KEYS.match(key):
        return None
    for pattern, template in KEY_RENAMES:
        if re.match(pattern, key):
            return re.sub(pattern, template, key)
    patterns = [pattern for pattern, _ in KEY_RENAMES]
    raise ValueError(f"Unknown tensor {key!r} in the published checkpoint: it matches none of {patterns}.")


def load_safetensors_folder(folder: Path) -> dict:
    """All tensors of a folder's model.safetensors (single file or sharded with an index)."""
    from safetensors.torch import load_file

    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        files = [folder / shard for shard in shards]
    else:
        files = [folder / "model.safetensors"]
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        raise FileNotFoundError(
            f"Missing weight files {missing}: only safetensors checkpoints are converted (no pickle)."
        )
    tensors = {}
    for path in files:
        tensors.update(load_file(path))
    return tensors


def convert_state_dict(published: dict) -> tuple[dict, list[str]]:
    """Rename published tensors; returns (our state dict, names of the dropped tensors)."""
    converted, dropped = {}, []
    for key, tensor in published.items():
        new_key = rename_published_key(key)
        if new_key is None:
            dropped.append(key)
        else:
            converted[new_key] = tensor.reshape(1, 1, -1) if new_key == "pma.query" else tensor
    return converted, dropped


def convert_published_checkpoint(published_dir: str | Path, output_dir: str | Path, overwrite: bool = False,
                                 pma_residual: str = "projected_query") -> Path:
    """Convert the folder and write a release folder; raises if any key is missing or unexpected.

    The renamed tensors are saved to a scratch folder and loaded with transformers' own
    `from_pretrained`, which reports missing and unexpected keys; both lists must be empty.
    """
    import tempfile

    from safetensors.torch import save_file

    from configuration_c2llm import C2LLMConfig
    from modeling_c2llm import DTYPE_ARGUMENT, C2LLMModel
    from train.release import write_release_folder

    published_dir = Path(published_dir)
    config_path = published_dir / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(
            f"{config_path} not found: PUBLISHED_DIR must be a local download of a C2LLM repository."
        )
    config_fields = json.loads(config_path.read_text(encoding="utf-8"))
    for key in PUBLISHED_RUNTIME_FIELDS:
        config_fields.pop(key, None)
    state_dict, dropped = convert_state_dict(load_safetensors_folder(published_dir))
    if "pma.query" in state_dict:  # the query's width is the checkpoint's (compressed_dim in the published layout)
        config_fields["pma_query_dim"] = state_dict["pma.query"].shape[-1]
    # published field names (compressed_dim, pma_ln, pma_norm_mode, ...) are accepted, unsupported values refused
    config = C2LLMConfig(**{**config_fields, "pma_residual": pma_residual})
    with tempfile.TemporaryDirectory(prefix="c2llm-convert-") as scratch:
        config.save_pretrained(scratch)
        save_file({key: tensor.contiguous() for key, tensor in state_dict.items()}, f"{scratch}/model.safetensors",
                  metadata={"format": "pt"})
        # Keep the checkpoint's own precision (the model's default would be the machine's preferred dtype).
        weights_dtype = state_dict["model.embed_tokens.weight"].dtype
        model, loading_info = C2LLMModel.from_pretrained(scratch, output_loading_info=True,
                                                         **{DTYPE_ARGUMENT: weights_dtype})
    problems = {
        kind: keys for kind, keys in loading_info.items() if kind in ("missing_keys", "unexpected_keys") and keys
    }
    if problems:
        raise ValueError(f"Conversion incomplete: {problems}")
    model.eval()
    print(
        f"converted {len(state_dict)} tensors; dropped {len(dropped)} unused LM-head tensors; 0 missing, 0 unexpected"
    )
    return write_release_folder(model, output_dir, tokenizer_dir=published_dir, overwrite=overwrite)


def main() -> None:
    from pooling_c2llm import PMA_RESIDUALS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "published_dir", help="local folder of a published C2LLM checkpoint (config.json + safetensors)"
    )
    parser.add_argument("output_dir", help="where to write the converted release folder")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing non-empty output folder")
    parser.add_argument("--pma-residual", choices=PMA_RESIDUALS, default=PMA_RESIDUALS[0],
                        help="what the PMA adds back: the projected seed (projected_query, the published model's "
                             "PMA_v2, default) or the raw seed (query, CodeFuse-CGE's block)")
    args = parser.parse_args()
    try:
        folder = convert_published_checkpoint(args.published_dir, args.output_dir, overwrite=args.overwrite,
                                              pma_residual=args.pma_residual)
    except (ValueError, FileNotFoundError, FileExistsError) as error:
        parser.exit(2, f"error: {error}\n")
    print(f"wrote {folder}")


if __name__ == "__main__":
    main()
