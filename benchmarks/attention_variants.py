"""Is there a faster CPU attention for packed (flattened) batches than one causal sdpa call per sequence?

    python benchmarks/attention_variants.py [--texts 16] [--max-length 512] [--repeats 7]

The profile (`profile_encode.py`) shows the sdpa kernel taking ~15% of bf16 encode time while doing ~1% of the
FLOPs: on a CPU with AVX512-BF16 but no AMX, PyTorch's CPU flash-attention kernel runs bf16 no faster than fp32.
This times, for one layer of C2LLM-0.5B's attention (14 query heads, 2 key/value heads, head_dim 64) over the
sequence lengths of the encode benchmark's corpus (Qwen2.5 tokenizer), the variants one could swap in for
`packing_c2llm.packed_sdpa_attention`:

    per_sequence_sdpa   what the model runs: strided views, enable_gqa=True
    contiguous_sdpa     the same on contiguous copies of each sequence's q, k, v
    expanded_kv_sdpa    k, v repeated to 14 heads once for the whole row, no enable_gqa
    folded_bmm          the 7 query heads that share a key/value head stacked as rows: two bmm calls per
                        sequence (large matmuls, no repeat; the full L x L scores, twice the causal FLOPs) in
                        the input dtype, the softmax in float32 on the (bf16-rounded) scores
    fp32_sdpa           q, k, v cast to float32 (bf16 only): does the bf16 kernel gain anything?

Prints the median milliseconds per layer per dtype, the ratio to per_sequence_sdpa (same run, interleaved), and the
largest deviation from the float32 reference, and writes them as its record (benchmarks/results/attention_variants.json,
rendered in docs/speed.md).
"""

import argparse
import random
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import (
    CpuShare, add_record_argument, code_corpus, hardware_line, load_line, median, write_record,
)

HEADS, KV_HEADS, HEAD_DIM = 14, 2, 64  # C2LLM-0.5B (Qwen2.5-Coder-0.5B)
GROUP = HEADS // KV_HEADS


def per_sequence_sdpa(query, key, value, bounds):
    return torch.cat([F.scaled_dot_product_attention(query[:, :, s:e], key[:, :, s:e], value[:, :, s:e],
                                                     is_causal=True, enable_gqa=True)
                      for s, e in zip(bounds[:-1], bounds[1:])], dim=2)


def contiguous_sdpa(query, key, value, bounds):
    return torch.cat([F.scaled_dot_product_attention(query[:, :, s:e].contiguous(), key[:, :, s:e].contiguous(),
                                                     value[:, :, s:e].contiguous(), is_causal=True, enable_gqa=True)
                      for s, e in zip(bounds[:-1], bounds[1:])], dim=2)


def expanded_kv_sdpa(query, key, value, bounds):
    key, value = key.repeat_interleave(GROUP, dim=1), value.repeat_interleave(GROUP, dim=1)  # (1, HEADS, total, d)
    return torch.cat([F.scaled_dot_product_attention(query[:, :, s:e], key[:, :, s:e], value[:, :, s:e],
                                                     is_causal=True)
                      for s, e in zip(bounds[:-1], bounds[1:])], dim=2)


def folded_bmm(query, key, value, bounds):
    future = torch.full((max(bounds[i + 1] - bounds[i] for i in range(len(bounds) - 1)),) * 2,
                        float("-inf")).triu(1)  # (L_max, L_max) additive causal mask
    out = []
    for s, e in zip(bounds[:-1], bounds[1:]):
        length = e - s
        grouped = query[0, :, s:e].reshape(KV_HEADS, GROUP * length, HEAD_DIM)  # query head h = g * GROUP + j
        scores = torch.bmm(grouped, key[0, :, s:e].transpose(1, 2)).float()  # (KV_HEADS, GROUP * L, L)
        scores = scores.view(KV_HEADS, GROUP, length, length).mul_(HEAD_DIM**-0.5).add_(future[:length, :length])
        probs = scores.softmax(dim=-1).to(query.dtype).view(KV_HEADS, GROUP * length, length)
        out.append(torch.bmm(probs, value[0, :, s:e]).view(1, HEADS, length, HEAD_DIM))
    return torch.cat(out, dim=2)


def fp32_sdpa(query, key, value, bounds):
    return per_sequence_sdpa(query.float(), key.float(), value.float(), bounds).to(query.dtype)


def sequence_lengths(num_texts: int, max_length: int, seed: int) -> list[int]:
    from transformers import AutoTokenizer

    from train.tokenizer import qwen25_tokenizer_dir

    tokenizer = AutoTokenizer.from_pretrained(qwen25_tokenizer_dir())
    texts = code_corpus(num_texts, seed=seed)
    return [len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=16, help="corpus size, as in encode_speed.py (default 16)")
    parser.add_argument("--max-length", type=int, default=512, help="truncate inputs to this many tokens (default 512)")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved timings per variant and dtype (default 7)")
    parser.add_argument("--seed", type=int, default=0)
    add_record_argument(parser, "attention_variants")
    args = parser.parse_args()

    load_at_start = load_line("start")
    lengths = sequence_lengths(args.texts, args.max_length, args.seed)
    bounds = [0]
    for length in lengths:
        bounds.append(bounds[-1] + length)
    generator = torch.Generator().manual_seed(args.seed)
    # The layouts Qwen2Attention hands to the attention interface: (1, heads, total, head_dim) views of
    # (1, total, heads, head_dim) projections, sequences back to back.
    shapes = {"query": HEADS, "key": KV_HEADS, "value": KV_HEADS}
    reference = {name: torch.randn(1, bounds[-1], heads, HEAD_DIM, generator=generator).transpose(1, 2)
                 for name, heads in shapes.items()}
    expected = per_sequence_sdpa(**reference, bounds=bounds)
    variants: dict[str, Callable] = {f.__name__: f for f in (per_sequence_sdpa, contiguous_sdpa, expanded_kv_sdpa,
                                                             folded_bmm, fp32_sdpa)}
    figures = {}
    with torch.inference_mode():
        for dtype in (torch.float32, torch.bfloat16):
            inputs = {name: tensor.to(dtype) for name, tensor in reference.items()}
            names = [n for n in variants if not (n == "fp32_sdpa" and dtype == torch.float32)]
            times: dict[str, list[float]] = {n: [] for n in names}
            ratios: dict[str, list[float]] = {n: [] for n in names}
            order = random.Random(args.seed)
            errors = {n: (variants[n](**inputs, bounds=bounds).float() - expected).abs().max().item() for n in names}
            for _ in range(args.repeats):
                round_times = {}
                for name in order.sample(names, len(names)):  # a new order every round
                    with CpuShare() as cpu:
                        variants[name](**inputs, bounds=bounds)
                    round_times[name] = cpu.seconds
                for name in names:
                    times[name].append(round_times[name])
                    ratios[name].append(round_times["per_sequence_sdpa"] / round_times[name])
            figures[str(dtype).removeprefix("torch.")] = {
                name: {"seconds": median(times[name]), "speed_vs_per_sequence_sdpa": median(ratios[name]),
                       "max_abs_error_vs_fp32": errors[name]} for name in names}
    load_at_end = load_line("end")
    metrics = {"sequences": len(lengths), "tokens": sum(lengths), "tokens_min": min(lengths),
               "tokens_max": max(lengths), "variants": figures}
    print("\n".join([
        "# Packed-batch attention variants, one layer (benchmarks/attention_variants.py)",
        "",
        f"command: python benchmarks/attention_variants.py {' '.join(sys.argv[1:])}".rstrip(),
        f"hardware: {hardware_line()}",
        f"contention: {load_at_start}; {load_at_end}",
        f"sequences: {len(lengths)} of the encode corpus, {sum(lengths)} tokens, {min(lengths)}-{max(lengths)} each; "
        f"{HEADS} query / {KV_HEADS} key-value heads, head_dim {HEAD_DIM}",
        "",
        attention_variants({"metrics": metrics}),
        "",
        "ms: median wall time of one layer's attention over all sequences; speed: median of same-round ratios "
        "(>1 is faster than what the model runs).",
    ]))
    print(f"record: {write_record(args.record_name, metrics, [load_at_start, load_at_end], args.record_dir)}")


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from benchmarks.tables import markdown_table, number  # noqa: E402


def attention_variants(record: dict) -> str:
    """One layer's packed-batch attention per variant and dtype: milliseconds, speed against what the model runs,
    and the largest deviation from the float32 reference."""
    rows = [[dtype, name, number(figures["seconds"] * 1000, 1), f"{figures['speed_vs_per_sequence_sdpa']:.2f}x",
             f"{figures['max_abs_error_vs_fp32']:.1e}"]
            for dtype, variants in record["metrics"]["variants"].items() for name, figures in variants.items()]
    return markdown_table(["dtype", "variant", "ms per layer", "speed vs per_sequence_sdpa", "max abs error vs fp32"],
                          rows, "llrrr")


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "attention_variants": (("attention_variants",), attention_variants),
    "attention_variants_avx512bf16": (("attention_variants_avx512bf16",), attention_variants),
}


if __name__ == "__main__":
    main()
