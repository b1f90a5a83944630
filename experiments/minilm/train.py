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

from train.augment import web_style_query  # noqa: E402  (the product's rewriting, used by recipes too)
from train.start_models import init_pma_as_mean  # noqa: E402  (the product's head_init: mean)

HIDDEN = 384


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def python_batch_rows(python_rows: list[dict], n_batches: int, batch_size: int, group_by_source: bool,
                      rng: random.Random) -> list[list[dict]]:
    """Rows of `n_batches` python batches, no pair used twice. With `group_by_source`, every batch comes from one
    package (torch, sympy, stdlib, ...; the paper groups batches by data source): its in-batch negatives are
    functions of the same library, harder than random ones, at no extra cost. Packages are drawn in proportion
    to the rows they have left; rows of packages too small to fill a batch form mixed batches at the end."""
    order = list(range(len(python_rows)))
    rng.shuffle(order)
    if not group_by_source:
        return [[python_rows[i] for i in order[k * batch_size:(k + 1) * batch_size]] for k in range(n_batches)]
    by_source: dict[str, list[int]] = {}
    for i in order:
        by_source.setdefault(python_rows[i]["source"], []).append(i)
    batches = []
    while len(batches) < n_batches:
        full = [source for source, rows in by_source.items() if len(rows) >= batch_size]
        if not full:
            leftovers = [i for rows in by_source.values() for i in rows]
            batches += [[python_rows[i] for i in leftovers[k:k + batch_size]]
                        for k in range(0, len(leftovers) - batch_size + 1, batch_size)][: n_batches - len(batches)]
            break
        source = rng.choices(full, weights=[len(by_source[s]) for s in full])[0]
        rows, by_source[source] = by_source[source][:batch_size], by_source[source][batch_size:]
        batches.append([python_rows[i] for i in rows])
    if len(batches) < n_batches:
        raise SystemExit(f"only {len(batches)} python batches of {batch_size} available, {n_batches} asked")
    return batches


# With --task-prompts, which MTEB-Code task's prompts each kind of training pair gets (the paper's per-task
# instructions). Java -> C# gets CodeTransOceanDL's generic "equivalent implementation" prompt: the Contest
# prompt names Python and C++.
TRAINING_PROMPT_TASKS = {"docstring": "CodeSearchNetRetrieval", "web": "CosQA", "java": "CodeTransOceanDL"}


def with_prompts(query: str, positive: str, kind: str, prompts: dict[str, str] | None) -> tuple[str, str]:
    """Prefix a pair with the query/document prompts of the task its `kind` resembles (unchanged without prompts)."""
    if not prompts:
        return query, positive
    from evaluation.tasks import DOCUMENT_SIDE, QUERY_SIDE, prompt_name_for

    # The evaluation's own lookup ("{task}-query", then "{task}", ..., then "query"), so training and evaluation
    # give a task the same text.
    task = TRAINING_PROMPT_TASKS[kind]
    query_name, document_name = (prompt_name_for(prompts, task, side) for side in (QUERY_SIDE, DOCUMENT_SIDE))
    query_prompt = prompts[query_name] if query_name else ""
    document_prompt = prompts[document_name] if document_name else ""
    return query_prompt + query, document_prompt + positive


def make_batches(python_rows: list[dict], java_rows: list[dict], steps: int, batch_size: int, java_fraction: float,
                 keep_docstring: float, seed: int, group_by_source: bool = False,
                 web_queries: float = 0.0, prompts: dict[str, str] | None = None) -> list[list[tuple[str, str]]]:
    """`steps` batches of (query, positive); each batch from one group; no pair used twice. A fraction
    `web_queries` of the python queries are rewritten by `web_style_query`. With `prompts` (name -> text, the
    names of the repository's `config_sentence_transformers.json`), each pair gets its task's prompts
    (`with_prompts`); the random draws are the same with or without them."""
    rng = random.Random(seed)
    java_order = list(range(len(java_rows)))
    rng.shuffle(java_order)
    n_java = round(steps * java_fraction)
    kinds = ["java"] * n_java + ["python"] * (steps - n_java)
    rng.shuffle(kinds)
    python_batches = iter(python_batch_rows(python_rows, steps - n_java, batch_size, group_by_source, rng))
    batches, j = [], 0
    for kind in kinds:
        if kind == "java":
            rows = [java_rows[i] for i in java_order[j:j + batch_size]]
            j += batch_size
            batches.append([with_prompts(row["query"], row["positive"], "java", prompts) for row in rows])
        else:
            batch = []
            for row in next(python_batches):
                keep = rng.random() < keep_docstring
                web = rng.random() < web_queries
                query = web_style_query(row["query"], rng) if web else row["query"]
                positive = row["positive_with_docstring"] if keep else row["positive"]
                batch.append(with_prompts(query, positive, "web" if web else "docstring", prompts))
            batches.append(batch)
    return batches


def batch_group(batch: list[tuple[str, str]], prompts: dict[str, str] | None) -> str:
    """"java" or "python", for the training log (every batch comes from one group)."""
    query = batch[0][0]
    if prompts:
        java_prompt = with_prompts("", "", "java", prompts)[0]
        return "java" if java_prompt and query.startswith(java_prompt) else "python"
    return "java" if query.lstrip().startswith(("public", "private", "protected")) else "python"


def repository_prompts() -> dict[str, str]:
    """The per-task prompts of the repository's model (`config_sentence_transformers.json`, paper Table 1 style)."""
    return json.loads((REPO / "config_sentence_transformers.json").read_text(encoding="utf-8"))["prompts"]


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


def save_run(model, out: Path, pooling: str) -> None:
    """Save `model` as a sentence-transformers folder that evaluation.suite and merge.py load (max 256 tokens, what
    the evaluation and the shipped default use); training resumes in train mode afterwards."""
    training_length = model[0].max_seq_length
    model.eval()
    model[0].max_seq_length = 256
    try:
        out.mkdir(parents=True, exist_ok=True)
        model.save(str(out))
        if pooling == "pma":
            from train.release import HEAD_CODE_FILES, copy_code_files

            copy_code_files(str(out), HEAD_CODE_FILES)
    finally:
        model[0].max_seq_length = training_length
        model.train()


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
    parser.add_argument("--group-by-source", action="store_true",
                        help="each python batch from one package: harder in-batch negatives (see python_batch_rows)")
    parser.add_argument("--web-queries", type=float, default=0.0,
                        help="fraction of python queries rewritten as web-search queries (see web_style_query)")
    parser.add_argument("--task-prompts", action="store_true",
                        help="prefix training pairs with the per-task prompts of the repository's "
                             "config_sentence_transformers.json and save them in the model, so that evaluation "
                             "gives each benchmark its task's prompts (see TRAINING_PROMPT_TASKS)")
    parser.add_argument("--pma-init", choices=("mean", "random"), default="mean")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--bf16", action="store_true",
                        help="bfloat16 autocast for forward and backward (weights and optimizer stay float32); "
                             "worth it only on CPUs that compute bf16 natively (AVX512-BF16/AMX)")
    parser.add_argument("--save-every", type=int, default=0,
                        help="also save the model every N steps as OUT/checkpoint-STEP (0: only the final model)")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    start = time.time()
    python_rows = read_jsonl(args.data / "pairs_python.jsonl")
    java_rows = read_jsonl(args.data / "pairs_java2cs.jsonl")
    prompts = repository_prompts() if args.task_prompts else None
    batches = make_batches(python_rows, java_rows, args.steps, args.batch_size, args.java_fraction,
                           args.keep_docstring, args.seed, args.group_by_source, args.web_queries, prompts)
    model = build_model(args.pooling, args.max_seq_length, args.pma_init)
    if prompts:
        model.prompts = prompts  # saved in config_sentence_transformers.json: the suite picks each task's pair
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
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            q = model(model.preprocess(list(queries)))["sentence_embedding"]  # (batch, 384)
            d = model(model.preprocess(list(positives)))["sentence_embedding"]  # (batch, 384)
        scores = args.scale * q.float() @ d.float().T  # both L2-normalised: cosine similarity x scale
        loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(batch)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seconds = time.time() - step_start
        log.append({"step": step + 1, "loss": round(loss.item(), 4), "seconds": round(seconds, 2),
                    "group": batch_group(batch, prompts)})
        print(json.dumps(log[-1]), flush=True)
        if not math.isfinite(loss.item()):
            raise SystemExit("loss is not finite")
        if args.save_every and (step + 1) % args.save_every == 0 and step + 1 < args.steps:
            save_run(model, args.out / f"checkpoint-{step + 1}", args.pooling)
    train_seconds = time.time() - train_start
    save_run(model, args.out, args.pooling)
    summary = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
               "train_seconds": round(train_seconds), "total_seconds": round(time.time() - start),
               "mean_loss_first5": sum(x["loss"] for x in log[:5]) / min(5, len(log)),
               "mean_loss_last5": sum(x["loss"] for x in log[-5:]) / min(5, len(log)), "steps": log}
    (args.out / "train_log.json").write_text(json.dumps(summary, indent=1))
    print(f"done: {train_seconds:.0f}s training, saved {args.out}", flush=True)


if __name__ == "__main__":
    main()
