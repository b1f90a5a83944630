"""Training speed and memory per optimizer step: C2LLM with LoRA, tiny and 0.5B shapes.

    python benchmarks/train_speed.py [--quick] [--record-name train_speed]

For each shape, one SentenceTransformer in float32 (the training recipe's dtype on a CPU) gets the recipe's
adapters (`train.model.add_lora` with its defaults: LoRA r 64, alpha 32 on every decoder linear layer, the PMA head
trained in full) and AdamW. The same batch of (docstring, function) pairs from the stdlib and site-packages is then
trained on with three setups, interleaved over rounds:

    plain    MultipleNegativesRankingLoss (in-batch negatives)
    gc       the same with gradient (activation) checkpointing
    cached   CachedMultipleNegativesRankingLoss (GradCache) in mini-batches of --mini-batch-size texts

Reports, per shape and setup: tokens/s (real tokens of queries and documents / optimizer-step wall time) and the
step's peak working memory above the resident model and optimizer state. The record
(benchmarks/results/train_speed.json) holds {shape: {setup: {"tokens_per_s": x, "peak_mem_mb": y, ...}}}.
"""

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

import torch
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import (
    MIB,
    RESULTS_DIR,
    CpuShare,
    WorkingMemory,
    dtype_kwargs,
    hardware_line,
    add_record_argument,
    load_line,
    make_resident,
    median,
    settled_rss_bytes,
    training_pairs,
    write_random_05b_folder,
    write_record,
)
from c2llm_data.markdown import markdown_table

SETUPS = ("plain", "gc", "cached")


def load_lora_model(folder: Path, max_length: int):
    """SentenceTransformer (float32) with the training recipe's LoRA adapters and a fully trained PMA head."""
    from sentence_transformers import SentenceTransformer

    from train.args import LoraArguments
    from train.model import add_lora

    model = SentenceTransformer(str(folder), device="cpu", trust_remote_code=True,
                                model_kwargs=dtype_kwargs(torch.float32))
    model.max_seq_length = max_length
    make_resident(model)  # exact RSS baselines (see benchmarks/common.py)
    add_lora(model, LoraArguments())
    return model.train()


def set_checkpointing(model, enabled: bool) -> None:
    """Gradient checkpointing of the decoder layers, non-reentrant (no input gradients needed with LoRA)."""
    backbone = model.transformers_model
    if not enabled:
        (getattr(backbone, "activation_checkpointing_disable", None) or backbone.gradient_checkpointing_disable)()
    elif hasattr(backbone, "activation_checkpointing_enable"):  # transformers >= 5.23
        backbone.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def train_step(model, loss, optimizer, queries: list[str], documents: list[str]) -> int:
    """One optimizer step on (query, document) pairs with in-batch negatives; returns the real tokens processed."""
    preprocess = getattr(model, "preprocess", None) or model.tokenize  # sentence-transformers 6 renamed it
    features = [preprocess(queries), preprocess(documents)]  # each: input_ids, attention_mask (batch, seq)
    loss(features, None).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return sum(int(f["attention_mask"].sum()) for f in features)


def benchmark_shape(folder: Path, args: argparse.Namespace, queries: list[str], documents: list[str],
                    steps_per_round: int, progress: tqdm) -> dict:
    """{setup: medians over timed steps} for the model in `folder`."""
    from sentence_transformers.sentence_transformer import losses

    rss_before_loading = settled_rss_bytes()
    model = load_lora_model(folder, args.max_length)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    setup_losses = {
        "plain": losses.MultipleNegativesRankingLoss(model),
        "gc": losses.MultipleNegativesRankingLoss(model),
        "cached": losses.CachedMultipleNegativesRankingLoss(model, mini_batch_size=args.mini_batch_size),
    }
    train_step(model, setup_losses["plain"], optimizer, queries, documents)  # warm-up; creates the AdamW state
    resident_mb = (settled_rss_bytes() - rss_before_loading) / MIB
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    steps = {setup: [] for setup in SETUPS}
    for round_index in range(args.rounds):
        shift = round_index % len(SETUPS)
        for setup in SETUPS[shift:] + SETUPS[:shift]:
            set_checkpointing(model, setup == "gc")
            progress.set_postfix_str(f"{folder.name} {setup}")
            for _ in range(steps_per_round):
                with WorkingMemory() as memory, CpuShare() as cpu:
                    tokens = train_step(model, setup_losses[setup], optimizer, queries, documents)
                steps[setup].append({"tokens": tokens, "seconds": cpu.seconds, "peak_mem_mb": memory.peak_mb,
                                     "cpu_share": cpu.value})
                progress.update()
    set_checkpointing(model, False)
    return {
        setup: {
            "tokens_per_s": median([s["tokens"] / s["seconds"] for s in runs]),
            "peak_mem_mb": median([s["peak_mem_mb"] for s in runs]),
            "resident_mb": resident_mb,
            "trainable_parameters": trainable,
            "cpu_share": median([s["cpu_share"] for s in runs]),
            "steps": runs,
        }
        for setup, runs in steps.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_record_argument(parser, "train_speed")
    parser.add_argument("--quick", action="store_true", help="small run to try it: 1 round, batch 2, max length 32")
    parser.add_argument("--batch-size", type=int, default=4, help="(query, document) pairs per step (default 4)")
    parser.add_argument("--max-length", type=int, default=64, help="truncate texts to this many tokens (default 64)")
    parser.add_argument("--mini-batch-size", type=int, default=2,
                        help="texts per forward pass of the cached (GradCache) loss (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the three setups (default 3)")
    parser.add_argument("--tiny-steps", type=int, default=3,
                        help="timed steps per round and setup, tiny shape (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the pairs sample and the weights (default 0)")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.batch_size, args.max_length, args.mini_batch_size = 1, 2, 32, 1

    from transformers.utils import logging as transformers_logging

    from tests.make_tiny_model import make_tiny_model

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    load_at_start = load_line("start")
    queries, documents = training_pairs(args.batch_size, seed=args.seed)
    results = {}
    with tempfile.TemporaryDirectory(prefix="c2llm-train-speed-") as tmp:
        folders = {"tiny": make_tiny_model(Path(tmp) / "tiny", seed=args.seed),
                   "0.5b": write_random_05b_folder(Path(tmp) / "0.5b", seed=args.seed)}
        steps_per_round = {"tiny": args.tiny_steps, "0.5b": 1}
        total = args.rounds * len(SETUPS) * sum(steps_per_round.values())
        with tqdm(total=total, desc="training steps", unit="step") as progress:
            for shape, folder in folders.items():
                results[shape] = benchmark_shape(folder, args, queries, documents, steps_per_round[shape], progress)

    rows = [[shape, setup, f"{r['tokens_per_s']:.1f}",
             f"{r['tokens_per_s'] / by_setup['plain']['tokens_per_s']:.2f}x",
             f"{r['peak_mem_mb']:.0f}", f"{r['peak_mem_mb'] / by_setup['plain']['peak_mem_mb']:.2f}x",
             f"{r['resident_mb']:.0f}", f"{r['trainable_parameters'] / 1e6:.1f}M", f"{r['cpu_share']:.0%}"]
            for shape, by_setup in results.items() for setup, r in by_setup.items()]
    print("\n".join([
        "# C2LLM training speed (benchmarks/train_speed.py)",
        "",
        f"command: python benchmarks/train_speed.py {shlex.join(sys.argv[1:])}".rstrip(),
        f"hardware: {hardware_line()}",
        f"contention: {load_at_start}; {load_line('end')}; see the CPU share column",
        ("shapes: tiny (hidden 64, 2 layers, the tests' model) and C2LLM-0.5B (random weights); float32; LoRA r 64, "
         "alpha 32 on every decoder linear layer, PMA head trained in full; AdamW"),
        (f"batch: {args.batch_size} (docstring, function) pairs, in-batch negatives, max_length {args.max_length}; "
         f"cached loss mini-batch {args.mini_batch_size}; {args.rounds} interleaved rounds "
         f"({args.tiny_steps} steps per setup and round for tiny, 1 for 0.5B)"),
        "",
        markdown_table(["shape", "setup", "tokens/s", "vs plain", "step peak MB", "vs plain", "resident MB",
                        "trainable", "CPU share"], rows),
        "",
        ("tokens/s: real tokens (queries + documents) / median optimizer-step wall time. step peak MB: median peak "
         "RSS during a step above the RSS before it (weights, adapters and AdamW state already resident). resident "
         "MB: RSS added by loading the model, adding adapters and the first step. CPU share: CPU time / (wall time "
         "x torch threads); below 100% other jobs had the cores."),
    ]))
    loads = [load_at_start, load_line("end")]
    if args.quick and args.record_dir == RESULTS_DIR:
        print("--quick: no record written (give --record-dir to keep one)")
    else:
        print(f"record: {write_record(args.record_name, results, loads, args.record_dir)}")


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from benchmarks.tables import number  # noqa: E402


def train_speed(record: dict) -> str:
    """A LoRA training step per shape and setup: tokens/s and step memory, against the plain step of that shape."""
    rows = []
    for shape, setups in record["metrics"].items():
        plain = setups["plain"]
        rows += [[shape, setup, number(figures["tokens_per_s"], 1),
                  f"{figures['tokens_per_s'] / plain['tokens_per_s']:.2f}x", f"{figures['peak_mem_mb']:.0f}",
                  f"{figures['peak_mem_mb'] / plain['peak_mem_mb']:.2f}x"] for setup, figures in setups.items()]
    return markdown_table(["shape", "setup", "tokens/s", "vs plain", "step peak MB", "vs plain"], rows, "llrrrr")


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "train_speed": (("train_speed",), train_speed),
}


if __name__ == "__main__":
    main()
