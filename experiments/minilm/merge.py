"""Merge a trained MiniLM run with the stock model's weights (weight-space ensembling), to keep what the stock
model knew about inputs unlike the training data (CoSQA's web queries) while keeping most of the fine-tuning.

    python experiments/minilm/merge.py --run /work/cache/c2llm_minilm/runs/pma_s0_gw --stock-weight 0.3 \
        --out /work/cache/c2llm_minilm/runs/pma_s0_gw_m30
    # the paper's checkpoint average (equal weights unless --run-weights), then the stock share:
    python experiments/minilm/merge.py --run RUN/checkpoint-200 RUN/checkpoint-400 RUN/checkpoint-600 RUN \
        --stock-weight 0.2 --out RUN_avg4_m20

The paper's final model is a weighted merge of checkpoints (section 4.1); here the untrained start can be one more
merged model, averaged by the recipe's `train.merge.average_state_dicts`. The average needs state dicts with the same
keys, so the stock side is the first run with its backbone weights reset to the packaged all-MiniLM-L6-v2: its
pooling head is that run's own. With several runs the (PMA) heads are merged too; see `merge_with_stock`.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def merge_with_stock(runs: Path | list[Path], stock_weight: float, run_weights: list[float] | None = None):
    """The runs' model with backbone = (1 - stock_weight) * sum_i w_i * run_i + stock_weight * stock (w: run_weights,
    equal by default, summing to 1). The head is merged with the same weights, the stock side carrying the first
    run's head: (1 - stock_weight) * sum_i w_i * head_i + stock_weight * head_0 (just head_0 for a single run)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    from evaluation.baselines import packaged_minilm_folder
    from train.merge import average_state_dicts

    runs = [runs] if isinstance(runs, Path) else list(runs)
    if not 0.0 <= stock_weight < 1.0:
        raise SystemExit(f"--stock-weight must be in [0, 1), got {stock_weight}")
    run_weights = run_weights or [1.0 / len(runs)] * len(runs)
    if len(run_weights) != len(runs) or min(run_weights) < 0 or abs(sum(run_weights) - 1.0) > 1e-6:
        raise SystemExit(f"--run-weights must be {len(runs)} non-negative numbers summing to 1, got {run_weights}")
    trained = [SentenceTransformer(str(run), device="cpu", trust_remote_code=True) for run in runs]
    stock_backbone = AutoModel.from_pretrained(str(packaged_minilm_folder()))
    weights = [(1.0 - stock_weight) * w for w in run_weights]
    models = list(trained)
    if stock_weight > 0:
        stock_side = copy.deepcopy(trained[0])
        stock_side[0].auto_model.load_state_dict(stock_backbone.state_dict())  # same architecture: strict load
        models.append(stock_side)
        weights.append(stock_weight)
    if len(models) == 1:
        return trained[0]
    merged = copy.deepcopy(trained[0])
    merged.load_state_dict(average_state_dicts((model.state_dict() for model in models), weights))
    # Tensors training never touched (frozen layers) come back bit-identical, not off by a rounding: the shipped
    # default stores only the tensors that differ from the packaged backbone.
    stock_state, merged_state = stock_backbone.state_dict(), merged[0].auto_model.state_dict()
    run_states = [run[0].auto_model.state_dict() for run in trained]
    with torch.no_grad():
        for name, tensor in run_states[0].items():
            if all(torch.equal(state[name], stock_state[name]) for state in run_states):
                merged_state[name].copy_(tensor)
    return merged


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, nargs="+", required=True,
                        help="one or more folders saved by experiments/minilm/train.py (a run or its checkpoint-N)")
    parser.add_argument("--run-weights", type=float, nargs="+", help="weights of the runs, summing to 1 (default: equal)")
    parser.add_argument("--stock-weight", type=float, required=True, help="weight of the stock backbone, in [0, 1)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    for run in args.run:
        if not (run / "modules.json").is_file():
            raise SystemExit(f"{run} is not a sentence-transformers folder (no modules.json): pass a train.py run")
    merged = merge_with_stock(args.run, args.stock_weight, args.run_weights)
    merged.save(str(args.out))
    if (args.run[0] / "sentence_c2llm.py").is_file():  # the PMA head's code travels with the folder
        from train.release import HEAD_CODE_FILES, copy_code_files

        copy_code_files(str(args.out), HEAD_CODE_FILES)
    logs = [run / "train_log.json" for run in args.run if (run / "train_log.json").is_file()]  # the final run has one
    log = json.loads(logs[0].read_text()) if logs else {}
    log["merged_with_stock"] = {"runs": [str(run) for run in args.run], "run_weights": args.run_weights,
                                "stock_weight": args.stock_weight}
    (args.out / "train_log.json").write_text(json.dumps(log, indent=1))
    names = " + ".join(run.name for run in args.run)
    print(f"saved {args.out}: {1 - args.stock_weight:.2f} x average({names}) + {args.stock_weight:.2f} x stock")


if __name__ == "__main__":
    main()
