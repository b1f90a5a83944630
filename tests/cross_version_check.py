"""Same folder, same vectors, under both supported majors of transformers / sentence-transformers.

CI runs it in two environments (see .ci/run):

    .venv/bin/python tests/cross_version_check.py write DIR          # transformers 5 + sentence-transformers 6
    .venv-compat/bin/python tests/cross_version_check.py check DIR   # transformers 4.51 + sentence-transformers 5

`write` builds a tiny model folder in DIR and stores its embeddings of a few texts (AutoModel and
SentenceTransformer); `check` loads the same folder with the other versions and compares.
"""

import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["def add(a, b):\n    return a + b", "sort a list of tuples by the second item", "SELECT 1;", "x" * 50]
MIN_COSINE = 0.99999


def embeddings(model_dir: Path) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    sys.path.insert(0, str(REPO_ROOT))
    from modeling_c2llm import DTYPE_ARGUMENT

    # float32 on both sides: the check is about the code paths, not about bfloat16 rounding.
    full_precision = {DTYPE_ARGUMENT: torch.float32}
    auto = AutoModel.from_pretrained(model_dir, trust_remote_code=True, **full_precision).encode(TEXTS)
    sentence = SentenceTransformer(str(model_dir), trust_remote_code=True, model_kwargs=full_precision)
    return {
        "automodel": auto.tolist(),
        "st_query": sentence.encode_query(TEXTS).tolist(),
        "st_document": sentence.encode_document(TEXTS).tolist(),
    }


def versions() -> str:
    import sentence_transformers
    import transformers

    return f"transformers {transformers.__version__}, sentence-transformers {sentence_transformers.__version__}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["write", "check"], help="write the reference, or check against it")
    parser.add_argument("folder", type=Path,
                        help="working folder (model in FOLDER/model, reference in FOLDER/reference.json)")
    args = parser.parse_args()
    model_dir, reference_file = args.folder / "model", args.folder / "reference.json"
    if args.action == "write":
        sys.path.insert(0, str(REPO_ROOT))
        from tests.make_tiny_model import make_tiny_model

        make_tiny_model(model_dir, hidden_size=64, pma_dim=32, pma_heads=4, overwrite=True)
        reference_file.write_text(json.dumps({"versions": versions(), **embeddings(model_dir)}))
        print(f"wrote {reference_file} with {versions()}")
        return 0
    import torch

    reference = json.loads(reference_file.read_text())
    current = embeddings(model_dir)
    worst = 1.0
    for name, vectors in current.items():
        cosine = torch.nn.functional.cosine_similarity(torch.tensor(vectors), torch.tensor(reference[name]))
        worst = min(worst, float(cosine.min()))
        print(f"{name}: minimum cosine {float(cosine.min()):.7f}")
    print(f"{versions()} vs {reference['versions']}: minimum cosine {worst:.7f} (needs >= {MIN_COSINE})")
    return 0 if worst >= MIN_COSINE else 1


if __name__ == "__main__":
    sys.exit(main())
