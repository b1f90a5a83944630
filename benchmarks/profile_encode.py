"""Where the encode time goes: torch.profiler over ours_st (fp32 and bf16) on the benchmark's corpus.

    python benchmarks/profile_encode.py [--texts 16] [--max-length 512] [--top 12] [--bf16 auto|yes|no]
                                        [--record-dir DIR]

Encodes the corpus of benchmarks/encode_speed.py once per dtype (fp32, and bf16 where the CPU computes it natively;
see --bf16) (after a warm-up) under torch.profiler and prints
the self CPU time per operator group side by side: the matmuls (what the MFU ceiling measures), attention, the
elementwise operators of the Qwen2 layers (RMSNorm, rotary embedding, SiLU gate, residual adds), dtype casts,
and the rest; then the attention kernel's own FLOP rate beside the matmul ceiling of its dtype, and the top
operators. Last, how fast this CPU runs each of the model's matmul shapes at the row
counts a batch gives (tokens per forward), relative to the MFU ceiling of encode_speed.py (the MLP up-projection
at 2,048 rows): the share of the MFU gap that lies in the matmuls themselves rather than around them. All of it
goes into the run's record (benchmarks/results/profile_encode.json), from which docs/speed.md renders the first two
tables.
"""

import argparse
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import (
    add_record_argument,
    causal_attention_flops,
    code_corpus,
    dtype_kwargs,
    hardware_line,
    load_line,
    matmul_peak,
    wants_bf16,
    write_random_05b_folder,
    write_record,
)
from c2llm_data.markdown import markdown_table

GROUPS = {  # aten operator -> group; unlisted operators count as "other"
    "matmul (mm, addmm, bmm)": ("aten::mm", "aten::addmm", "aten::bmm"),
    "attention (sdpa kernel)": ("aten::_scaled_dot_product_flash_attention_for_cpu",),
    "elementwise (mul, add, silu, pow, mean, rsqrt, neg, cat, where)": (
        "aten::mul", "aten::add", "aten::silu", "aten::pow", "aten::sum", "aten::mean", "aten::rsqrt", "aten::neg",
        "aten::cat", "aten::where", "aten::div", "aten::add_", "aten::mul_",
    ),
    "dtype casts and copies (copy_)": ("aten::copy_", "aten::_to_copy", "aten::clone"),
}
MATMUL_ROWS = (64, 256, 1024, 2048)  # tokens per forward pass: a short batch up to the ceiling's 2,048


def group_of(name: str) -> str:
    return next((group for group, names in GROUPS.items() if name in names), "other")


def attention_flops(model, texts: list[str]) -> float:
    """FLOPs of the backbone's causal attention over `texts`, counted as encode_speed.model_flops counts them. The
    PMA's own attention (one query per text: 2 of the sdpa calls) is timed with it but negligible, so not counted."""
    lengths = model.tokenize(texts)["attention_mask"].sum(dim=1).tolist()  # (n,) real tokens, truncated
    return causal_attention_flops(lengths, model[0].auto_model.config)


def profile_dtype(folder: Path, texts: list[str], dtype: torch.dtype, max_length: int, batch_size: int):
    """(seconds per group, top operators, attention FLOPs) of one encode of `texts` by SentenceTransformer in
    `dtype`."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu", trust_remote_code=True, model_kwargs=dtype_kwargs(dtype))
    model.max_seq_length = max_length
    model.encode(texts[:2], batch_size=batch_size)  # warm-up
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        model.encode(texts, batch_size=batch_size)
    events = [e for e in profiler.key_averages() if e.self_cpu_time_total > 0]
    groups = defaultdict(float)
    for event in events:
        groups[group_of(event.key)] += event.self_cpu_time_total / 1e6
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)
    return groups, [(e.key, e.self_cpu_time_total / 1e6, e.count) for e in top], attention_flops(model, texts)


def matmul_shapes(config) -> dict[str, tuple[int, int]]:
    """The backbone's matmuls as (in_features, out_features): attention projections and the MLP."""
    head_dim = config.hidden_size // config.num_attention_heads
    return {
        "q_proj, o_proj": (config.hidden_size, config.num_attention_heads * head_dim),
        "k_proj, v_proj": (config.hidden_size, config.num_key_value_heads * head_dim),
        "gate_proj, up_proj": (config.hidden_size, config.intermediate_size),
        "down_proj": (config.intermediate_size, config.hidden_size),
    }


def matmul_efficiency(config, dtype: torch.dtype, row_counts: tuple[int, ...]) -> dict[str, dict[str, float]]:
    """{matmul shape: {row count: FLOP per CPU second as a share of the ceiling (up-projection, 2,048 rows)}}."""
    ceiling = matmul_peak(dtype, seconds=0.5)[1]
    return {f"{name} ({in_features} -> {out_features})":
            {str(m): matmul_peak(dtype, seconds=0.3, tokens=m, in_features=in_features,
                                 out_features=out_features)[1] / ceiling for m in row_counts}
            for name, (in_features, out_features) in matmul_shapes(config).items()}


def dtype_figures(profiled: tuple, dtype: torch.dtype, top: int, config, row_counts: tuple[int, ...]) -> dict:
    """One dtype's part of the record: seconds and share per operator group, the attention kernel's FLOP rate
    against the matmul ceiling, the top operators and the matmul rate per shape and row count."""
    groups, operators, flops = profiled
    total = sum(groups.values())
    # The profiler's self time of a multi-threaded op is wall time, so the ceiling here is per wall second too.
    seconds = groups["attention (sdpa kernel)"]
    rate = flops / seconds if seconds else float("nan")
    return {
        "groups": {group: {"seconds": groups[group], "share": groups[group] / total} for group in [*GROUPS, "other"]},
        "total_s": total,
        "attention": {"gflop": flops / 1e9, "seconds": seconds, "gflops_per_s": rate / 1e9,
                      "vs_matmul_ceiling": rate / matmul_peak(dtype, seconds=0.5)[0]},
        "top_operators": [{"name": name, "seconds": op_seconds, "calls": count}
                          for name, op_seconds, count in operators[:top]],
        "matmul_rate_vs_ceiling": matmul_efficiency(config, dtype, row_counts),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=16, help="corpus size, as in encode_speed.py (default 16)")
    parser.add_argument("--max-length", type=int, default=512, help="truncate inputs to this many tokens (default 512)")
    parser.add_argument("--batch-size", type=int, default=8, help="texts per forward pass (default 8)")
    parser.add_argument("--top", type=int, default=12, help="operators listed per dtype (default 12)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the corpus sample and the weights (default 0)")
    parser.add_argument("--bf16", choices=("auto", "yes", "no"), default="auto",
                        help="also profile bf16: auto = only where the CPU computes bf16 natively (default)")
    add_record_argument(parser, "profile_encode")
    args = parser.parse_args()

    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    load_at_start = load_line("start")
    texts = code_corpus(args.texts, seed=args.seed)
    dtypes = {"fp32": torch.float32}
    if wants_bf16(args.bf16):
        dtypes["bf16"] = torch.bfloat16
    with tempfile.TemporaryDirectory(prefix="c2llm-05b-random-") as tmp:
        folder = write_random_05b_folder(Path(tmp) / "model", seed=args.seed)
        profiles = {name: profile_dtype(folder, texts, dtype, args.max_length, args.batch_size)
                    for name, dtype in dtypes.items()}

    from configuration_c2llm import C2LLMConfig
    from train.release import C2LLM_05B_CONFIG

    config = C2LLMConfig(**C2LLM_05B_CONFIG)
    metrics = {"corpus": {"texts": len(texts), "max_length": args.max_length, "batch_size": args.batch_size},
               "dtypes": {name: dtype_figures(profiles[name], dtype, args.top, config, MATMUL_ROWS)
                          for name, dtype in dtypes.items()}}
    loads = [load_at_start, load_line("end")]
    lines = [
        "# Where ours_st spends its encode time (benchmarks/profile_encode.py)",
        "",
        f"command: python benchmarks/profile_encode.py {' '.join(sys.argv[1:])}".rstrip(),
        f"hardware: {hardware_line()}",
        f"contention: {'; '.join(loads)}",
        (f"corpus: {len(texts)} texts of benchmarks/encode_speed.py, max_length {args.max_length}, "
         f"batch {args.batch_size}"),
        "",
        profile_encode({"metrics": metrics}),
    ]
    for name, figures in metrics["dtypes"].items():
        top = [[op["name"], f"{op['seconds']:.2f}", str(op["calls"])] for op in figures["top_operators"]]
        lines += ["", markdown_table([f"top operators, {name}", "self CPU s", "calls"], top, "lrr")]
    for name, figures in metrics["dtypes"].items():
        rates = [[shape, *(f"{share:.0%}" for share in shares.values())]
                 for shape, shares in figures["matmul_rate_vs_ceiling"].items()]
        lines += ["", markdown_table([f"matmul rate vs ceiling, {name}, rows =", *map(str, MATMUL_ROWS)], rates,
                                     "l" + "r" * len(MATMUL_ROWS))]
    lines += ["", ("rows: tokens per forward pass (with packing: the real tokens of a batch). Ceiling: the MLP "
                   "up-projection at 2,048 rows, as in encode_speed.py's MFU; FLOP per CPU second, each averaged "
                   "over repeated calls. Above 100%: that shape runs faster than the ceiling's, so an MFU against "
                   "the fastest shape would be lower by that factor.")]
    print("\n".join(lines))
    print(f"record: {write_record(args.record_name, metrics, loads, args.record_dir)}")


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from benchmarks.tables import number  # noqa: E402


def profile_encode(record: dict) -> str:
    """Self CPU time of ours_st's encode per operator group and dtype, then the attention kernel's FLOP rate beside
    the matmul ceiling of its dtype."""
    dtypes = record["metrics"]["dtypes"]
    groups = next(iter(dtypes.values()))["groups"]
    rows = [[group, *(f"{number(figures['groups'][group]['seconds'], 1)} s "
                      f"({figures['groups'][group]['share']:.0%})" for figures in dtypes.values())]
            for group in groups]
    rows.append(["total self CPU time", *(f"{number(figures['total_s'], 1)} s" for figures in dtypes.values())])
    attention = [[name, number(kernel["gflop"], 1), number(kernel["seconds"], 2), f"{kernel['gflops_per_s']:.0f}",
                  f"{kernel['vs_matmul_ceiling']:.0%}"]
                 for name, kernel in ((name, figures["attention"]) for name, figures in dtypes.items())]
    return (markdown_table(["operator group (self CPU time)", *dtypes], rows, "l" + "r" * len(dtypes)) + "\n\n"
            + markdown_table(["attention kernel", "GFLOP", "self CPU s", "GFLOP/s", "vs matmul ceiling"], attention,
                             "lrrrr"))


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "profile_encode": (("profile_encode",), profile_encode),
    "profile_encode_avx512bf16": (("profile_encode_avx512bf16",), profile_encode),
}


if __name__ == "__main__":
    main()
