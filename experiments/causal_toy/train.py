"""Train a tiny Qwen2-shaped C2LLM from scratch with one pooling head: pma, last_token or mean.

    python experiments/causal_toy/train.py --pooling pma --steps 300 --out /work/cache/causal_toy/runs/pma_s0

Recipe (identical for every pooling, so only the pooling differs):
- model: `C2LLMModel` (causal Qwen2 backbone, the project's own code) of a tiny shape (default hidden 128,
  2 layers, 4 heads / 2 KV heads, MLP 512, PMA 8 heads), random init. The backbone's initial weights
  depend only on --seed, not on the pooling (they are drawn once and copied into the model); the PMA
  head, when there is one, is drawn after them;
- tokenizer: the real Qwen2.5 tokenizer (`train.tokenizer.qwen25_tokenizer_dir`), left padding, inputs
  truncated to --max-seq-length tokens; one fixed side marker instead of task instructions: "Query: "
  before queries, "Document: " before documents, at training and (saved as the generic "query" /
  "document" prompts) at evaluation. Some marker is needed: humaneval has an empty query, which would
  have no token at all;
- data: the pairs mined by experiments/minilm/mine.py, batched by experiments/minilm/train.py's
  `make_batches` (each batch from ONE group, python docstring -> function or Java -> C#; a fraction
  --java-fraction of Java batches; a fraction --keep-docstring of python positives keep their docstring);
  the batches depend only on --seed;
- loss: in-batch-negative InfoNCE on cosine similarity x --scale 20 (temperature 0.05, as the paper);
- optimiser: AdamW (fused; --lr, weight decay 0.01 on matrices, gradient norm clipped at 1), --warmup
  linear warm-up steps, then linear decay to 0.

Prints one JSON line per step (loss, seconds); saves a C2LLM release folder (what `train.release` writes:
`SentenceTransformer(OUT, trust_remote_code=True)` and `python -m evaluation.suite --model OUT` load it)
whose only prompts are the two side markers, plus OUT/train_log.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

QWEN25_CONFIG_VOCAB_SIZE = 151936  # embedding rows of every Qwen2.5 model (the tokenizer uses 151,665)
QWEN25_PAD_TOKEN_ID = 151643  # <|endoftext|>
EVAL_MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of the saved folder: what the evaluation uses


def minilm_make_batches():
    """`make_batches` of experiments/minilm/train.py, imported by path (the repository also has a `train` package)."""
    spec = importlib.util.spec_from_file_location("experiments_minilm_train", REPO / "experiments/minilm/train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_batches


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def tiny_config(pooling: str, hidden_size: int, layers: int, attention_heads: int, kv_heads: int,
                intermediate_size: int, pma_heads: int):
    """A C2LLMConfig with Qwen2.5's vocabulary and special tokens and a tiny backbone."""
    from configuration_c2llm import C2LLMConfig

    return C2LLMConfig(
        vocab_size=QWEN25_CONFIG_VOCAB_SIZE, hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=layers, num_attention_heads=attention_heads, num_key_value_heads=kv_heads,
        max_position_embeddings=4096, bos_token_id=QWEN25_PAD_TOKEN_ID, eos_token_id=QWEN25_PAD_TOKEN_ID,
        pad_token_id=QWEN25_PAD_TOKEN_ID, pma_num_heads=pma_heads, pooling=pooling,
    )


def build_model(pooling: str, seed: int, **shape):
    """A random C2LLMModel whose backbone weights are the same for every pooling given the same seed."""
    from modeling_c2llm import C2LLMModel

    torch.manual_seed(seed)
    reference = C2LLMModel(tiny_config("mean", **shape))  # no head: the backbone alone draws from the RNG
    model = C2LLMModel(tiny_config(pooling, **shape))  # a PMA head is drawn here, after the backbone
    model.model.load_state_dict(reference.model.state_dict())
    return model


def lr_factor(step: int, steps: int, warmup: int) -> float:
    """Linear warm-up over `warmup` steps, then linear decay to 0 at `steps`."""
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (steps - step) / max(1, steps - warmup))


def save_folder(model, out: Path, tokenizer_dir: Path, query_prompt: str, document_prompt: str) -> None:
    """Write the release folder (weights, code, tokenizer, sentence-transformers files) with the side markers
    as its only prompts (the suite falls back to "query" / "document" for every benchmark)."""
    from train.release import write_release_folder

    write_release_folder(model, out, tokenizer_dir=tokenizer_dir, max_seq_length=EVAL_MAX_SEQ_LENGTH, overwrite=True)
    st_config_path = out / "config_sentence_transformers.json"
    st_config = json.loads(st_config_path.read_text(encoding="utf-8"))
    st_config["prompts"] = {"query": query_prompt, "document": document_prompt}  # what training used
    st_config_path.write_text(json.dumps(st_config, indent=2) + "\n", encoding="utf-8")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pooling", choices=("pma", "last_token", "mean"), required=True)
    parser.add_argument("--out", type=Path, required=True, help="model folder to write (replaced if it exists)")
    parser.add_argument("--data", type=Path, default=Path("/work/cache/c2llm_minilm/data"),
                        help="folder with pairs_python.jsonl and pairs_java2cs.jsonl")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-seq-length", type=int, default=128, help="training truncation (the saved folder uses 256)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--scale", type=float, default=20.0, help="cosine similarity x scale (1 / temperature)")
    parser.add_argument("--java-fraction", type=float, default=0.15)
    parser.add_argument("--keep-docstring", type=float, default=0.25)
    parser.add_argument("--query-prompt", default="Query: ")
    parser.add_argument("--document-prompt", default="Document: ")
    parser.add_argument("--seed", type=int, default=0, help="seeds the weights and the batches")
    parser.add_argument("--threads", type=int, default=1)
    shape = parser.add_argument_group("model shape")
    shape.add_argument("--hidden-size", type=int, default=128)
    shape.add_argument("--layers", type=int, default=2)
    shape.add_argument("--attention-heads", type=int, default=4)
    shape.add_argument("--kv-heads", type=int, default=2)
    shape.add_argument("--intermediate-size", type=int, default=512)
    shape.add_argument("--pma-heads", type=int, default=8, help="must divide --hidden-size")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from transformers import AutoTokenizer

    from train.tokenizer import qwen25_tokenizer_dir

    torch.set_num_threads(args.threads)
    start = time.time()
    python_rows = read_jsonl(args.data / "pairs_python.jsonl")
    java_rows = read_jsonl(args.data / "pairs_java2cs.jsonl")
    batches = minilm_make_batches()(python_rows, java_rows, args.steps, args.batch_size, args.java_fraction,
                                    args.keep_docstring, args.seed)
    if min(len(batch) for batch in batches) < args.batch_size:
        raise SystemExit(f"not enough pairs for {args.steps} steps of {args.batch_size} without reusing any: "
                         f"{len(python_rows)} python, {len(java_rows)} java->c#")
    shape = {"hidden_size": args.hidden_size, "layers": args.layers, "attention_heads": args.attention_heads,
             "kv_heads": args.kv_heads, "intermediate_size": args.intermediate_size, "pma_heads": args.pma_heads}
    model = build_model(args.pooling, args.seed, **shape)
    tokenizer_dir = qwen25_tokenizer_dir()
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, padding_side="left")
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if parameter.ndim < 2 or name.startswith("pma.query") else decay).append(parameter)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, fused=True)

    def embed(texts: list[str], prompt: str) -> torch.Tensor:
        inputs = tokenizer([prompt + text for text in texts], padding=True, truncation=True, max_length=args.max_seq_length, return_tensors="pt")
        pooled = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).sentence_embedding
        return F.normalize(pooled, dim=-1)  # (batch, d)

    n_params = sum(p.numel() for p in model.parameters())
    n_head = sum(p.numel() for p in model.pma.parameters()) if model.pma is not None else 0
    print(json.dumps({"pooling": args.pooling, "parameters": n_params, "head_parameters": n_head,
                      "python_pairs": len(python_rows), "java_pairs": len(java_rows),
                      "setup_seconds": round(time.time() - start, 1)}), flush=True)
    model.train()
    log = []
    train_start = time.time()
    for step, batch in enumerate(batches):
        step_start = time.time()
        for group in optimizer.param_groups:
            group["lr"] = args.lr * lr_factor(step, args.steps, args.warmup)
        queries, positives = zip(*batch)
        scores = args.scale * embed(queries, args.query_prompt) @ embed(positives, args.document_prompt).T  # (batch, batch) cosine x scale
        loss = F.cross_entropy(scores, torch.arange(len(batch)))  # the positive of query i is document i
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        log.append({"step": step + 1, "loss": round(loss.item(), 4), "seconds": round(time.time() - step_start, 3),
                    "group": "java" if queries[0].lstrip().startswith(("public", "private", "protected")) else "python"})
        print(json.dumps(log[-1]), flush=True)
        if not math.isfinite(loss.item()):
            raise SystemExit("loss is not finite")
    train_seconds = time.time() - train_start
    model.eval()
    save_folder(model, args.out, tokenizer_dir, args.query_prompt, args.document_prompt)
    python_losses = [entry["loss"] for entry in log if entry["group"] == "python"]
    window = max(1, min(20, len(python_losses) // 2))
    summary = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
               "parameters": n_params, "head_parameters": n_head,
               "train_seconds": round(train_seconds, 1), "total_seconds": round(time.time() - start, 1),
               "seconds_per_step": round(train_seconds / max(1, len(log)), 3),
               "python_loss_first20": round(sum(python_losses[:window]) / window, 4) if python_losses else None,
               "python_loss_last20": round(sum(python_losses[-window:]) / window, 4) if python_losses else None,
               "steps": log}
    (args.out / "train_log.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({"done": str(args.out), "train_seconds": summary["train_seconds"],
                      "seconds_per_step": summary["seconds_per_step"]}), flush=True)


if __name__ == "__main__":
    main()
