"""Fine-tune the packaged all-MiniLM-L6-v2 with our recipe and one pooling head (pma, mean or cls).

    python experiments/minilm/train.py --pooling pma --out /work/cache/c2llm_minilm/runs/pma_s0

Recipe (identical for every pooling, so only the pooling differs):
- data: pairs from mine.py; each batch comes from ONE source group (python docstring -> function, or
  Java -> C#), a fraction --java-fraction of the batches being Java -> C#; batches sampled with --seed;
  a fraction --keep-docstring of the python positives keep their docstring (CoSQA's corpus keeps them);
- loss: MultipleNegativesRankingLoss (in-batch negatives, cosine similarity x --scale 20);
- optimiser: AdamW, linear warm-up (--warmup steps) then linear decay to 0; only the top --train-layers
  (default 2) of the 6 encoder layers are trained, the embeddings and lower layers stay frozen (cheaper
  backward on 2 shared CPU cores, less forgetting, and the shipped delta holds only those layers);
  --lr for those layers, --head-lr for the pooling head's own weights (PMA only);
- PMA head: `sentence_c2llm.PMAPoolingHead(384, 384, num_heads=32)`, the project's one PMA, unchanged.
  `--pma-init mean` (default) initialises it so that it starts as (layer-normalised) mean pooling:
  q_proj = 0 (uniform attention over real tokens), v_proj = identity, o_proj ~ 0 (tiny random, so it
  still gets gradients through the ReLU); `--pma-init random` keeps the module's own initialisation.

Saves a plain sentence-transformers folder (full weights, ~90 MB: keep it in /work/cache) that
`python -m evaluation.suite --model FOLDER` evaluates, plus train_log.json (loss and time per step).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

HIDDEN = 384


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def make_batches(python_rows: list[dict], java_rows: list[dict], steps: int, batch_size: int, java_fraction: float,
                 keep_docstring: float, seed: int) -> list[list[tuple[str, str]]]:
    """`steps` batches of (query, positive); each batch from one group; no pair used twice."""
    rng = random.Random(seed)
    python_order = list(range(len(python_rows)))
    java_order = list(range(len(java_rows)))
    rng.shuffle(python_order)
    rng.shuffle(java_order)
    n_java = round(steps * java_fraction)
    kinds = ["java"] * n_java + ["python"] * (steps - n_java)
    rng.shuffle(kinds)
    batches, p, j = [], 0, 0
    for kind in kinds:
        if kind == "java":
            rows = [java_rows[i] for i in java_order[j:j + batch_size]]
            j += batch_size
            batches.append([(row["query"], row["positive"]) for row in rows])
        else:
            rows = [python_rows[i] for i in python_order[p:p + batch_size]]
            p += batch_size
            batch = []
            for row in rows:
                keep = rng.random() < keep_docstring
                batch.append((row["query"], row["positive_with_docstring"] if keep else row["positive"]))
            batches.append(batch)
    return batches


def init_pma_as_mean(head) -> None:
    """Start the PMA as layer-normalised mean pooling (same module, only the initial values differ)."""
    pma = head.pma
    with torch.no_grad():
        pma.q_proj.weight.zero_()
        pma.q_proj.bias.zero_()
        pma.v_proj.weight.copy_(torch.eye(pma.v_proj.weight.shape[0], pma.v_proj.weight.shape[1]))
        pma.v_proj.bias.zero_()
        pma.o_proj.weight.normal_(std=1e-3)
        pma.o_proj.bias.zero_()


def build_model(pooling: str, max_seq_length: int, pma_init: str):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    from evaluation.baselines import packaged_minilm_folder
    from sentence_c2llm import PMAPoolingHead

    backbone = Transformer(str(packaged_minilm_folder()), max_seq_length=max_seq_length)
    if pooling == "pma":
        head = PMAPoolingHead(hidden_size=HIDDEN, embedding_dimension=HIDDEN, num_heads=32)
        if pma_init == "mean":
            init_pma_as_mean(head)
    else:
        head = Pooling(HIDDEN, pooling_mode=pooling)
    return SentenceTransformer(modules=[backbone, head, Normalize()], device="cpu")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pooling", choices=("pma", "mean", "cls"), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=Path("/work/cache/c2llm_minilm/data"))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-seq-length", type=int, default=128, help="training truncation (evaluation uses 256)")
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--train-layers", type=int, default=2,
                        help="fine-tune only the top N of the 6 encoder layers (the rest and the embeddings stay frozen)")
    parser.add_argument("--head-lr", type=float, default=2e-4)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--scale", type=float, default=20.0)
    parser.add_argument("--java-fraction", type=float, default=0.15)
    parser.add_argument("--keep-docstring", type=float, default=0.25)
    parser.add_argument("--pma-init", choices=("mean", "random"), default="mean")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    start = time.time()
    python_rows = read_jsonl(args.data / "pairs_python.jsonl")
    java_rows = read_jsonl(args.data / "pairs_java2cs.jsonl")
    batches = make_batches(python_rows, java_rows, args.steps, args.batch_size, args.java_fraction,
                           args.keep_docstring, args.seed)
    model = build_model(args.pooling, args.max_seq_length, args.pma_init)
    backbone, head = model[0], model[1]
    n_layers = backbone.auto_model.config.num_hidden_layers
    trainable = tuple(f".encoder.layer.{i}." for i in range(n_layers - args.train_layers, n_layers))
    for name, parameter in backbone.named_parameters():
        parameter.requires_grad = any(prefix in f".{name}" for prefix in trainable)
    groups = [{"params": [p for p in backbone.parameters() if p.requires_grad], "lr": args.lr}]
    head_params = [p for p in head.parameters() if p.requires_grad]
    if head_params:
        groups.append({"params": head_params, "lr": args.head_lr})
    optimizer = torch.optim.AdamW(groups, weight_decay=0.01)
    base_lrs = [group["lr"] for group in groups]

    def lr_factor(step: int) -> float:
        if step < args.warmup:
            return (step + 1) / args.warmup
        return max(0.0, (args.steps - step) / max(1, args.steps - args.warmup))

    model.train()
    log = []
    print(f"{len(python_rows)} python pairs, {len(java_rows)} java->c# pairs; {args.steps} steps x {args.batch_size}; "
          f"setup {time.time() - start:.0f}s", flush=True)
    train_start = time.time()
    for step, batch in enumerate(batches):
        step_start = time.time()
        for group, base in zip(optimizer.param_groups, base_lrs):
            group["lr"] = base * lr_factor(step)
        queries, positives = zip(*batch)
        q = model(model.preprocess(list(queries)))["sentence_embedding"]
        d = model(model.preprocess(list(positives)))["sentence_embedding"]
        scores = args.scale * q @ d.T  # both L2-normalised: cosine similarity x scale
        loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(batch)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seconds = time.time() - step_start
        log.append({"step": step + 1, "loss": round(loss.item(), 4), "seconds": round(seconds, 2),
                    "group": "java" if batch[0][0].lstrip().startswith(("public", "private", "protected")) else "python"})
        print(json.dumps(log[-1]), flush=True)
        if not math.isfinite(loss.item()):
            raise SystemExit("loss is not finite")
    train_seconds = time.time() - train_start
    model.eval()
    model[0].max_seq_length = 256  # what the evaluation and the shipped default use
    args.out.mkdir(parents=True, exist_ok=True)
    model.save(str(args.out))
    if args.pooling == "pma":
        from tools.release import copy_code_files

        copy_code_files(str(args.out))
    summary = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
               "train_seconds": round(train_seconds), "total_seconds": round(time.time() - start),
               "mean_loss_first5": sum(x["loss"] for x in log[:5]) / min(5, len(log)),
               "mean_loss_last5": sum(x["loss"] for x in log[-5:]) / min(5, len(log)), "steps": log}
    (args.out / "train_log.json").write_text(json.dumps(summary, indent=1))
    print(f"done: {train_seconds:.0f}s training, saved {args.out}", flush=True)


if __name__ == "__main__":
    main()
