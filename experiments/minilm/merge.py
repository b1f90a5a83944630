"""Merge a trained MiniLM run with the stock model's weights (weight-space ensembling), to keep what the stock
model knew about inputs unlike the training data (CoSQA's web queries) while keeping most of the fine-tuning.

    python experiments/minilm/merge.py --run /work/cache/c2llm_minilm/runs/pma_s0_gw --stock-weight 0.3 \
        --out /work/cache/c2llm_minilm/runs/pma_s0_gw_m30

The paper's final model is a weighted merge of checkpoints (section 4.1); here one of the two merged models is
the untrained start. `SentenceTransformer.merge` (mergekit's linear method) needs two models with the same
modules, so the stock side is the run itself with its backbone weights reset to the packaged all-MiniLM-L6-v2:
the pooling head (PMA or parameter-free) is the run's own on both sides and comes out unchanged.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def merge_with_stock(run: Path, stock_weight: float):
    """The run's model with backbone = (1 - stock_weight) * run + stock_weight * stock."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    from evaluation.baselines import packaged_minilm_folder

    if not 0.0 <= stock_weight < 1.0:
        raise SystemExit(f"--stock-weight must be in [0, 1), got {stock_weight}")
    trained = SentenceTransformer(str(run), device="cpu", trust_remote_code=True)
    stock_side = copy.deepcopy(trained)
    stock_backbone = AutoModel.from_pretrained(str(packaged_minilm_folder()))
    stock_side[0].auto_model.load_state_dict(stock_backbone.state_dict())  # same architecture: strict load
    merged = SentenceTransformer.merge([trained, stock_side], method="linear",
                                       parameters={"weight": [1.0 - stock_weight, stock_weight]})
    # Tensors training never touched (frozen layers) come back bit-identical, not off by a rounding: the shipped
    # default stores only the tensors that differ from the packaged backbone.
    stock_state, merged_state = stock_backbone.state_dict(), merged[0].auto_model.state_dict()
    with torch.no_grad():
        for name, tensor in trained[0].auto_model.state_dict().items():
            if torch.equal(tensor, stock_state[name]):
                merged_state[name].copy_(tensor)
    return merged


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a folder saved by experiments/minilm/train.py")
    parser.add_argument("--stock-weight", type=float, required=True, help="weight of the stock backbone, in [0, 1)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if not (args.run / "modules.json").is_file():
        raise SystemExit(f"{args.run} is not a sentence-transformers folder (no modules.json): pass a train.py run")
    merged = merge_with_stock(args.run, args.stock_weight)
    merged.save(str(args.out))
    if (args.run / "sentence_c2llm.py").is_file():  # the PMA head's code travels with the folder
        from tools.release import copy_code_files

        copy_code_files(str(args.out))
    log = json.loads((args.run / "train_log.json").read_text()) if (args.run / "train_log.json").is_file() else {}
    log["merged_with_stock"] = {"run": str(args.run), "stock_weight": args.stock_weight}
    (args.out / "train_log.json").write_text(json.dumps(log, indent=1))
    print(f"saved {args.out}: {1 - args.stock_weight:.2f} x {args.run.name} + {args.stock_weight:.2f} x stock")


if __name__ == "__main__":
    main()
