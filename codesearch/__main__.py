"""Search a folder of code with a natural-language query; prints ranked file:line hits.

    python -m codesearch "read a json file" --path ~/project
    python -m codesearch "parse command line flags" --path . --model path/to/c2llm --top-k 5

The model is any sentence-transformers folder; `default` is the project's offline default. Queries
and code get the model's "query"/"document" prompts when it has them (C2LLM does).
"""

import argparse
import sys
from pathlib import Path

from codesearch.chunking import OTHER_CODE_SUFFIXES, PYTHON_SUFFIXES, code_files, split_into_pieces
from codesearch.models import load_search_model


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m codesearch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("query", help="what you are looking for, in plain words or code")
    parser.add_argument("--path", default=".", help="folder (or file) to search (default: current folder)")
    parser.add_argument("--model", default="default", help="'default' or a sentence-transformers model folder")
    parser.add_argument("--top-k", type=int, default=10, help="how many hits to print (default: 10)")
    parser.add_argument("--batch-size", type=int, default=32, help="pieces embedded per batch (default: 32)")
    parser.add_argument("--max-seq-length", type=int, default=256,
                        help="tokens kept per piece; longer functions are truncated (default: 256)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path(args.path).expanduser()
    if not root.exists():
        print(f"error: {root} does not exist; pass --path with a folder of code", file=sys.stderr)
        return 2
    if args.top_k < 1:
        print("error: --top-k must be at least 1", file=sys.stderr)
        return 2
    pieces = split_into_pieces(code_files(root))
    if not pieces:
        suffixes = " ".join(PYTHON_SUFFIXES + OTHER_CODE_SUFFIXES)
        print(f"error: no code found under {root} (looked for {suffixes}); pass --path with a folder of code",
              file=sys.stderr)
        return 1
    model, description = load_search_model(args.model)
    model.max_seq_length = min(args.max_seq_length, model.max_seq_length or args.max_seq_length)
    print(f"{description}; embedding {len(pieces)} functions/pieces from {root}", file=sys.stderr)
    documents = model.encode_document([piece.text for piece in pieces], batch_size=args.batch_size,
                                      show_progress_bar=True, convert_to_tensor=True, normalize_embeddings=True)
    query = model.encode_query([args.query], convert_to_tensor=True, normalize_embeddings=True)
    scores = (query @ documents.T)[0]
    top = scores.topk(min(args.top_k, len(pieces)))
    for rank, (score, index) in enumerate(zip(top.values.tolist(), top.indices.tolist()), start=1):
        piece = pieces[index]
        location = f"{piece.path.relative_to(root) if root.is_dir() else piece.path}:{piece.line}"
        print(f"{rank:>3}. {score:.3f}  {location}  {piece.title[:80]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
