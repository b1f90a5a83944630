"""Turn a run of this experiment's train.py/merge.py (a full sentence-transformers folder) into the small shipped
layout, with the product's exporter (`train/export.py`, what `export.layout: packaged_delta` runs):

    python experiments/minilm/export.py --run /work/cache/c2llm_minilm/runs/pma_s0 --out /tmp/default_model

The folder holds modules.json (PackagedMiniLMTransformer -> pooling head -> Normalize), packaged_backbone.json +
delta.safetensors (fine-tuned minus packaged weights, float16, only the tensors training changed), the head's folder
and the code files; it is checked to reload to the run's embeddings (cosine >= 0.999) before it replaces OUT.
The default model itself is now made by the recipe (train/configs/default-minilm.yaml).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def export(run: Path, out: Path, card: str | None = None) -> dict:
    from sentence_transformers import SentenceTransformer

    from train.export import export_packaged_delta

    trained = SentenceTransformer(str(run), trust_remote_code=True, device="cpu")
    return {**export_packaged_delta(trained, out, trained[0].max_seq_length, card), "run": str(run)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a folder saved by train.py or merge.py")
    parser.add_argument("--out", type=Path, required=True, help="the folder to write (replaced if it exists)")
    parser.add_argument("--card", type=Path, default=REPO / "train" / "configs" / "default-minilm-card.md",
                        help="README.md to put in the exported folder (if the file exists)")
    args = parser.parse_args(argv)
    card = args.card.read_text() if args.card and args.card.is_file() else None
    print(json.dumps(export(args.run, args.out, card), indent=1))


if __name__ == "__main__":
    main()
