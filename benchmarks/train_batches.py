"""Training step cost of the default model's recipe: random batches against length-bucketed batches.

    python benchmarks/train_batches.py [--pairs DIR] [--rounds 3] [--steps 4] [--record-name train_batches]

The default model's recipe (train/configs/default-minilm.yaml) trains all-MiniLM-L6-v2 from its PyPI package with
the PMA head, the top 3 layers and the head, in float32, MNRL over batches of 64 (query, code) pairs truncated to
128 tokens (this script reads those values from the recipe file). The collator pads each column to the longest
text of its batch, so the order rows are batched in decides how much padding a step computes. Two setups draw
their batches from the same rows, interleaved over rounds, on `default_model/` (the recipe's architecture; its
weights do not change the cost):

    random     a random permutation cut into batches (sentence-transformers' samplers, duplicates aside)
    bucketed   train.sampler.LengthBucketedBatchSampler (`training.length_bucketed_batches: true`)

The rows: the mined package pairs under --pairs (the output folder of `python -m train.mining_packages`, its
`pairs/*.jsonl`), else (query, function) pairs mined from installed Python packages (benchmarks/common.py). Reports
per setup the median step time, real tokens per second, and the share of computed (padded) tokens that are real.
"""

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import add_record_argument, hardware_line, load_line, median, training_pairs, write_record
from c2llm_data.markdown import markdown_table

REPO_ROOT = Path(__file__).resolve().parents[1]
SETUPS = ("random", "bucketed")
RECIPE = REPO_ROOT / "train" / "configs" / "default-minilm.yaml"  # batch size, lengths, layers, loss: read from it


def read_pairs(pairs_dir: Path | None, count: int, seed: int) -> list[dict]:
    """`count` random {query, positive} rows of the mined package pairs, else of installed Python packages."""
    if pairs_dir is None:
        queries, documents = training_pairs(count, seed=seed)
        return [{"query": query, "positive": document} for query, document in zip(queries, documents)]
    files = sorted((pairs_dir / "pairs").glob("*.jsonl"))
    if not files:
        raise SystemExit(f"--pairs {pairs_dir}: no pairs/*.jsonl there; pass the output folder of "
                         "`python -m train.mining_packages`, or leave --pairs out for Python pairs")
    rows = [json.loads(line) for path in files for line in path.open(encoding="utf-8")]
    random.Random(seed).shuffle(rows)
    return [{"query": row["query"], "positive": row["positive"]} for row in rows[:count]]


def batches_of(setup: str, rows: list[dict], batch_size: int, seed: int) -> list[list[int]]:
    from datasets import Dataset

    from train.sampler import LengthBucketedBatchSampler

    if setup == "random":
        order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed)).tolist()
        return [order[i:i + batch_size] for i in range(0, len(order) - batch_size + 1, batch_size)]
    sampler = LengthBucketedBatchSampler(Dataset.from_list(rows), batch_size, drop_last=True,
                                         generator=torch.Generator(), seed=seed)
    return list(sampler)


def load_recipe_model(recipe):
    """default_model/ as the recipe trains it: float32, its training length, its top layers and the head trainable."""
    from sentence_transformers import SentenceTransformer

    from train.model import freeze_below_top_layers

    model = SentenceTransformer(str(REPO_ROOT / "default_model"), device="cpu", trust_remote_code=True)
    model.max_seq_length = recipe.model.max_seq_length
    freeze_below_top_layers(model, recipe.model.train_top_layers)
    return model.train()


def train_step(model, loss, optimizer, rows: list[dict], batch: list[int]) -> tuple[int, int]:
    """One optimizer step; returns (real tokens, computed tokens: the padded batch size x length)."""
    preprocess = getattr(model, "preprocess", None) or model.tokenize  # sentence-transformers 6 renamed it
    features = [preprocess([rows[i][column] for i in batch]) for column in ("query", "positive")]
    loss(features, None).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return (sum(int(f["attention_mask"].sum()) for f in features),
            sum(f["attention_mask"].numel() for f in features))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_record_argument(parser, "train_batches")
    parser.add_argument("--pairs", type=Path, help="output folder of `python -m train.mining_packages` (its "
                        "pairs/*.jsonl); default: pairs mined from installed Python packages")
    parser.add_argument("--rows", type=int, default=3200, help="rows the batches are drawn from (default 3200: one "
                        "sorting window of the bucketed sampler)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the two setups (default 3)")
    parser.add_argument("--steps", type=int, default=4, help="timed steps per round and setup (default 4)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the rows sample and the batch orders")
    args = parser.parse_args()
    from train.recipe import load_recipe

    recipe = load_recipe(RECIPE)
    batch_size = recipe.training.trainer["per_device_train_batch_size"]
    if args.rows < batch_size * args.rounds * args.steps:
        parser.error(f"--rows {args.rows} cannot fill {args.rounds} x {args.steps} batches of {batch_size}; "
                     f"pass --rows {batch_size * args.rounds * args.steps} or more")

    from sentence_transformers.sentence_transformer import losses

    loads = [load_line("start")]
    rows = read_pairs(args.pairs, args.rows, args.seed)
    batches = {setup: batches_of(setup, rows, batch_size, args.seed) for setup in SETUPS}
    # Both setups time the same number of batches, drawn evenly over their whole order (bucketed batches come in a
    # random order of lengths already; the random ones have no order).
    model = load_recipe_model(recipe)
    loss = losses.MultipleNegativesRankingLoss(model, scale=recipe.loss.scale)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=recipe.training.learning_rate)
    train_step(model, loss, optimizer, rows, batches["random"][-1])  # warm-up: allocator and kernels
    timed = {setup: {"seconds": [], "real": 0, "computed": 0} for setup in SETUPS}
    with tqdm(total=args.rounds * args.steps * len(SETUPS), desc="training steps", unit="step") as progress:
        for round_index in range(args.rounds):
            for setup in SETUPS:
                for step in range(args.steps):
                    batch = batches[setup][round_index * args.steps + step]
                    start = time.perf_counter()
                    real, computed = train_step(model, loss, optimizer, rows, batch)
                    timed[setup]["seconds"].append(time.perf_counter() - start)
                    timed[setup]["real"] += real
                    timed[setup]["computed"] += computed
                    progress.update()
    loads.append(load_line("end"))
    results = {setup: {"median_step_s": median(t["seconds"]),
                       "real_tokens_per_s": t["real"] / sum(t["seconds"]),
                       "real_share_of_computed": t["real"] / t["computed"],
                       "steps": len(t["seconds"])} for setup, t in timed.items()}
    base = results["random"]["median_step_s"]
    rows_out = [[setup, f"{r['median_step_s']:.2f}", f"{base / r['median_step_s']:.2f}x",
                 f"{r['real_tokens_per_s']:.0f}", f"{r['real_share_of_computed']:.0%}"] for setup, r in results.items()]
    print(markdown_table(["batches", "median step s", "speed-up", "real tokens/s", "real share of computed"],
                         rows_out))
    print(hardware_line())
    source = "mined package pairs" if args.pairs else "installed Python packages"
    write_record(args.record_name, {"source": source, "rows": len(rows), "batch_size": batch_size,
                                    "max_seq_length": recipe.model.max_seq_length, "setups": results}, loads,
                 results_dir=args.record_dir)


if __name__ == "__main__":
    main()
