"""Encoding speed and memory of C2LLM-0.5B against the published implementation's approach.

    python benchmarks/encode_speed.py [--quick] [--record-name encode_speed]

Builds the real C2LLM-0.5B shape with random weights (no download) in a temporary release folder, loads it seven
(eight) ways in this one process (same weights) and encodes the same real-code corpus with each, interleaved over
rounds:

    ours_st              SentenceTransformer(folder).encode (packed batches, the default)     fp32
    ours_automodel       AutoModel.from_pretrained(folder).encode                             fp32
    ours_st_padded       ours_st with pack_sequences=False (plain length-sorted padded batches) fp32
    published_approach   the published implementation, rebuilt: Qwen2ForCausalLM (LM head kept), eager
                         attention, output_hidden_states=True, last hidden state -> our PMAPooling    fp32
    last_token_st        the same pipeline with pooling="last_token" (Qwen3-Embedding style)  fp32
    ours_st_bf16         ours_st loaded in bfloat16                                           bf16
    published_approach_bf16  published_approach loaded in bfloat16                            bf16
    ours_st_bf16_compiled  (with --compile) ours_st_bf16, backbone under torch.compile         bf16
                         (ours_st_compiled, fp32, when the bf16 contenders are left out)

The bf16 contenders run only where the CPU computes bfloat16 natively (`modeling_c2llm.preferred_dtype("cpu")`:
AVX512-BF16 or AMX); elsewhere bf16 is emulated, slower than fp32, and C2LLM loads in fp32 by default, so
timing it measures nothing a user meets. `--bf16 yes` runs them anyway, `--bf16 no` never.

Prints tokens/s (real tokens, padding excluded), working memory (peak RSS above the loaded weights), their ratios
to ours_st, model FLOP utilisation against the best matmul rate measured in the run, the PMA's share of encode
time, the padding fraction, and the project's goals. The record (benchmarks/results/encode_speed.json) holds
{"corpus": {...}, "padding": [...], "contenders": {contender: {"tokens_per_s": x, "peak_mem_mb": y, ...}}} as its
metrics; the docs render its tables from it (`python -m benchmarks.render`). Other jobs on the machine slow every
contender alike; the CPU-share column and the load average say how much; contenders run in a shuffled order each
round, ratios are taken within a round, then the median, and also given per CPU second (independent of how much CPU
a run got).
"""

import argparse
import random
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import (
    RESULTS_DIR,
    CpuShare,
    WorkingMemory,
    causal_attention_flops,
    code_corpus,
    dtype_kwargs,
    hardware_line,
    add_record_argument,
    load_line,
    make_resident,
    matmul_peak,
    median,
    wants_bf16,
    write_random_05b_folder,
    write_record,
)
from c2llm_data.markdown import markdown_table

REFERENCE = "ours_st"


@dataclass
class Contender:
    name: str
    dtype: torch.dtype
    encode: Callable[[list[str]], torch.Tensor]  # texts -> (n, d) normalized embeddings
    pma: nn.Module | None = None  # timed by hooks: the PMA's share of encode time
    same_vectors: bool = True  # expected to give ours_st's embeddings (False: another pooling)
    counter: "PaddingCounter | None" = None  # real tokens and computed positions of its forward passes
    batches_like: str | None = None  # no counter of its own: computes the same batches as this contender
    runs: list[dict] = field(default_factory=list)


class ModuleTimer:
    """Wall time spent inside a module's forward, accumulated over calls (forward hooks)."""

    def __init__(self, module: nn.Module):
        self.seconds, self._start = 0.0, 0.0
        module.register_forward_pre_hook(self._begin)
        module.register_forward_hook(self._end)

    def _begin(self, *_):
        self._start = time.perf_counter()

    def _end(self, *_):
        self.seconds += time.perf_counter() - self._start


class PaddingCounter:
    """Real tokens and computed positions of the batches a C2LLMModel runs.

    Real tokens come from the padded attention mask the embedding model receives; computed positions from the
    input shape its backbone (`Qwen2Model`) receives, which is smaller when the batch was packed. Attention is
    computed per sequence: a padded row is one attention span of its full length, while a flattened row
    (`cu_seq_lens_q` among the backbone's inputs) holds one span per sequence."""

    def __init__(self, model: nn.Module):
        self.real_tokens: list[int] = []  # per forward
        self.attention_spans: list[list[int]] = []  # per forward: the lengths attention is computed over
        model.register_forward_pre_hook(self._count_real, with_kwargs=True)
        model.model.register_forward_pre_hook(self._count_computed, with_kwargs=True)

    def _count_real(self, _module, _args, kwargs):
        self.real_tokens.append(int(kwargs["attention_mask"].sum()))  # mask: (batch, seq)

    def _count_computed(self, _module, _args, kwargs):
        inputs = kwargs["input_ids"] if kwargs.get("input_ids") is not None else kwargs["inputs_embeds"]
        rows, row_len = inputs.shape[:2]  # packed or padded
        bounds = kwargs.get("cu_seq_lens_q")  # (sequences + 1,) in a flattened row
        if bounds is not None:
            self.attention_spans.append(bounds.diff().tolist())
        else:
            self.attention_spans.append([row_len] * rows)

    def reset(self) -> None:
        self.real_tokens.clear()
        self.attention_spans.clear()

    def padding_fraction(self) -> float:
        return 1 - sum(self.real_tokens) / sum(sum(spans) for spans in self.attention_spans)

    def computed_sequence_lengths(self) -> list[int]:
        """One entry per attention span, over all forwards: its length."""
        return [length for spans in self.attention_spans for length in spans]


class PublishedApproach:
    """The published C2LLM encode path, rebuilt from its description on the same weights.

    Its model holds a full `Qwen2ForCausalLM` (`plm_model`, LM head included) and calls it with
    `output_hidden_states=True`, taking the last of the returned hidden states into the PMA head; attention is
    eager. The LM head is tied to the input embeddings (as in Qwen2.5-0.5B), so it adds no weights here, only
    its (batch, seq, 151936) logits. The PMA is this repository's `PMAPooling` with the folder's PMA weights.
    """

    def __init__(self, folder: Path, tokenizer, batch_size: int, max_length: int, dtype: torch.dtype):
        from safetensors import safe_open
        from transformers import Qwen2Config, Qwen2ForCausalLM

        from configuration_c2llm import C2LLMConfig
        from modeling_c2llm import PMAPooling
        from train.release import C2LLM_05B_CONFIG

        qwen_config = Qwen2Config(**{k: v for k, v in C2LLM_05B_CONFIG.items() if not k.startswith("pma_")})
        self.lm = Qwen2ForCausalLM.from_pretrained(
            folder, config=qwen_config, attn_implementation="eager", **dtype_kwargs(dtype)
        ).eval()  # loads model.* (pma.* is ignored); lm_head is tied to model.embed_tokens
        self.pma = PMAPooling.from_config(C2LLMConfig(**C2LLM_05B_CONFIG)).to(dtype).eval()
        with safe_open(folder / "model.safetensors", framework="pt") as weights:
            names = [k for k in weights.keys() if k.startswith("pma.")]  # noqa: SIM118 (safe_open is not iterable)
            pma_weights = {k.removeprefix("pma."): weights.get_tensor(k) for k in names}
        self.pma.load_state_dict(pma_weights)
        self.tokenizer, self.batch_size, self.max_length = tokenizer, batch_size, max_length

    @classmethod
    def on_modules(cls, lm: nn.Module, pma: nn.Module, tokenizer=None, batch_size: int = 8,
                   max_length: int = 512) -> "PublishedApproach":
        """The same encode path on a causal LM and PMA head already built (any shape, any device): the GPU
        benchmark's 0.5B and 7B shapes, whose weights it makes in place rather than reading from a folder."""
        approach = cls.__new__(cls)
        approach.lm, approach.pma = lm, pma
        approach.tokenizer, approach.batch_size, approach.max_length = tokenizer, batch_size, max_length
        return approach

    @torch.inference_mode()
    def embed_ids(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(batch, seq) token ids and mask on the LM's device -> (batch, d) unit-length float32 embeddings."""
        outputs = self.lm(input_ids=input_ids, attention_mask=attention_mask,
                          output_hidden_states=True)  # logits (batch, seq, vocab) + every layer's hidden states
        pooled = self.pma(outputs.hidden_states[-1], attention_mask)  # (batch, d)
        return F.normalize(pooled.float(), dim=-1)

    @torch.inference_mode()
    def encode(self, texts: list[str]) -> torch.Tensor:
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # the same length sorting as ours
        embeddings = torch.empty(len(texts), self.pma.embedding_dim)
        for start in range(0, len(texts), self.batch_size):
            rows = order[start : start + self.batch_size]
            inputs = self.tokenizer([texts[i] for i in rows], padding=True, truncation=True,
                                    max_length=self.max_length, return_tensors="pt").to(self.lm.device)
            embeddings[rows] = self.embed_ids(inputs["input_ids"], inputs["attention_mask"]).cpu()
        return embeddings


def share_resident_weights(source: nn.Module, others: list[tuple[nn.Module, str]]) -> None:
    """Make `source`'s weights resident (`make_resident`) and point every other model's parameters at them
    (`source` name = prefix + the other's name): "same weights" made literal, and one copy in memory instead of
    four. Tied parameters (the published LM head) follow, being the same Parameter object."""
    make_resident(source)
    weights = dict(source.named_parameters())
    for model, prefix in others:
        for name, parameter in model.named_parameters():
            parameter.data = weights[prefix + name].data


def load_contenders(folder: Path, batch_size: int, max_length: int, compile_backbone: bool, with_bf16: bool
                    ) -> tuple[list[Contender], nn.Module]:
    """The contenders on the weights in `folder`, and ours_st's C2LLMModel (for shapes and padding counts)."""
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    def sentence_transformer(dtype: torch.dtype, **config_kwargs) -> SentenceTransformer:
        model = SentenceTransformer(str(folder), device="cpu", trust_remote_code=True,
                                    model_kwargs=dtype_kwargs(dtype), config_kwargs=config_kwargs)
        model.max_seq_length = max_length
        return model.eval()

    def st_encode(model: SentenceTransformer) -> Callable[[list[str]], torch.Tensor]:
        return lambda texts: model.encode(texts, batch_size=batch_size, convert_to_tensor=True, show_progress_bar=False)

    ours_st = sentence_transformer(torch.float32)
    ours_padded = sentence_transformer(torch.float32, pack_sequences=False)
    last_token_st = sentence_transformer(torch.float32, pooling="last_token")
    automodel = AutoModel.from_pretrained(folder, trust_remote_code=True, **dtype_kwargs(torch.float32)).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)  # left padding, as saved
    published = PublishedApproach(folder, tokenizer, batch_size, max_length, torch.float32)
    share_resident_weights(ours_st[0].auto_model, [(automodel, ""), (ours_padded[0].auto_model, ""),
                                                   (last_token_st[0].auto_model, ""),
                                                   (published.lm, ""), (published.pma, "pma.")])
    st_model = lambda model: model[0].auto_model  # SentenceTransformer -> its C2LLMModel
    contenders = [
        Contender("ours_st", torch.float32, st_encode(ours_st), pma=st_model(ours_st).pma,
                  counter=PaddingCounter(st_model(ours_st))),
        Contender("ours_automodel", torch.float32,
                  lambda texts: automodel.encode(texts, batch_size=batch_size, max_length=max_length),
                  counter=PaddingCounter(automodel)),
        Contender("ours_st_padded", torch.float32, st_encode(ours_padded), pma=st_model(ours_padded).pma,
                  counter=PaddingCounter(st_model(ours_padded))),
        Contender("published_approach", torch.float32, published.encode, counter=PaddingCounter(published.lm)),
        Contender("last_token_st", torch.float32, st_encode(last_token_st), same_vectors=False,
                  counter=PaddingCounter(st_model(last_token_st))),
    ]
    fast_name, fast_dtype, fast_model = "ours_st", torch.float32, ours_st  # what --compile builds on
    if with_bf16:
        ours_bf16 = sentence_transformer(torch.bfloat16)
        published_bf16 = PublishedApproach(folder, tokenizer, batch_size, max_length, torch.bfloat16)
        contenders += [
            Contender("ours_st_bf16", torch.bfloat16, st_encode(ours_bf16), pma=st_model(ours_bf16).pma,
                      counter=PaddingCounter(st_model(ours_bf16))),
            Contender("published_approach_bf16", torch.bfloat16, published_bf16.encode,
                      counter=PaddingCounter(published_bf16.lm)),
        ]
        fast_name, fast_dtype, fast_model = "ours_st_bf16", torch.bfloat16, ours_bf16
        share_resident_weights(ours_bf16[0].auto_model, [(published_bf16.lm, ""), (published_bf16.pma, "pma.")])
    if compile_backbone:  # opt-in: torch.compile fuses the backbone's elementwise ops (compiles on first call)
        compiled = sentence_transformer(fast_dtype)
        share_resident_weights(st_model(fast_model), [(st_model(compiled), "")])
        st_model(compiled).model.compile(dynamic=True)
        # No hooks inside a compiled module (they would be traced): it runs the uncompiled twin's batches.
        contenders.append(Contender(f"{fast_name}_compiled", fast_dtype, st_encode(compiled),
                                    pma=st_model(compiled).pma, batches_like=fast_name))
    return contenders, ours_st[0].auto_model


def model_flops(sequence_lengths: list[int], model: nn.Module) -> float:
    """Forward FLOPs of the embedding model: 2 per matmul weight per token (backbone and the PMA's per-token key and
    value projections) plus causal attention (scores and weighted values: 2 x 2 x width per token pair, n(n+1)/2
    pairs in a sequence of n tokens). Embedding lookups, norms and activations are not counted."""
    per_token = [m.weight for m in model.model.modules() if isinstance(m, nn.Linear)]
    per_token += [model.pma.k_proj.weight, model.pma.v_proj.weight]
    matmul_params = sum(w.numel() for w in per_token)
    return 2 * matmul_params * sum(sequence_lengths) + causal_attention_flops(sequence_lengths, model.config)


def sorted_batch_padding(texts: list[str], lengths: list[int], batch_size: int, sort: bool = True,
                         pack: bool = False) -> float:
    """Fraction of computed positions that are padding when batches are cut after sorting by character length,
    longest first (what sentence-transformers and `C2LLMModel.encode` do), or in the given order (`sort=False`);
    with `pack=True`, each batch packed to its real tokens (`packing_c2llm.PackedBatch`)."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i])) if sort else list(range(len(texts)))
    batches = [[lengths[i] for i in order[k : k + batch_size]] for k in range(0, len(order), batch_size)]
    computed = 0
    for batch in batches:
        computed += sum(batch) if pack else len(batch) * max(batch)
    return 1 - sum(lengths) / computed


def timed_runs(contenders: list[Contender], texts: list[str], rounds: int, seed: int,
               flops: Callable[[list[int]], float], lengths: list[int]) -> None:
    """Run every contender once per round, in a new random order each round; fills `contender.runs`.

    Before each run the matmul rate of the contender's dtype is measured (`matmul_peak`); the ceiling for MFU is the
    best of those probes over the whole benchmark (a single probe can land in a slow moment and overstate MFU).
    MFU is given per CPU second (independent of how much CPU other jobs left us) and per wall second, for the
    model FLOPs of the real tokens (`flops(lengths)`) and of every computed position (padding and packed rows
    included, from the contender's `PaddingCounter`)."""
    useful_flops = flops(lengths)
    timers = {c.name: ModuleTimer(c.pma) for c in contenders if c.pma is not None}
    progress = tqdm(total=rounds * len(contenders), desc="encode runs", unit="run")
    for round_index in range(rounds):
        order = random.Random(seed + round_index).sample(contenders, len(contenders))  # no fixed neighbours
        for contender in order:
            progress.set_postfix_str(contender.name)
            probe_per_wall_s, probe_per_cpu_s = matmul_peak(contender.dtype)
            timer = timers.get(contender.name)
            pma_before = timer.seconds if timer else 0.0
            if contender.counter:
                contender.counter.reset()
            with WorkingMemory() as memory, CpuShare() as cpu:
                embeddings = contender.encode(texts)
            counter = contender.counter
            contender.runs.append({
                "round": round_index,
                "seconds": cpu.seconds,
                "cpu_seconds": cpu.cpu_seconds,
                "peak_mem_mb": memory.peak_mb,
                "cpu_share": cpu.value,
                "matmul_gflops_per_s": probe_per_wall_s / 1e9,
                "matmul_gflops_per_cpu_s": probe_per_cpu_s / 1e9,
                "pma_share": (timer.seconds - pma_before) / cpu.seconds if timer else None,
                "computed_flops": flops(counter.computed_sequence_lengths()) if counter else None,
                "padding_fraction": counter.padding_fraction() if counter else None,
                "embeddings": embeddings.float().cpu(),
            })
            progress.update()
    progress.close()
    by_name = {c.name: c for c in contenders}
    for c in contenders:
        if c.batches_like:
            for run, twin in zip(c.runs, by_name[c.batches_like].runs):
                run["computed_flops"], run["padding_fraction"] = twin["computed_flops"], twin["padding_fraction"]
    for dtype in {c.dtype for c in contenders}:
        runs = [run for c in contenders if c.dtype == dtype for run in c.runs]
        best_wall = max(run["matmul_gflops_per_s"] for run in runs) * 1e9
        best_cpu = max(run["matmul_gflops_per_cpu_s"] for run in runs) * 1e9
        for run in runs:
            run["mfu"] = useful_flops / run["cpu_seconds"] / best_cpu
            run["mfu_wall"] = useful_flops / run["seconds"] / best_wall
            run["mfu_computed_tokens"] = run["computed_flops"] / run["cpu_seconds"] / best_cpu
            run["matmul_peak_gflops_per_cpu_s"] = best_cpu / 1e9


def paired_median(a: Contender, b: Contender, key: str) -> float:
    """Median over rounds of a's value / b's value in the same round (side-by-side ratios resist drifting load)."""
    by_round = {run["round"]: run[key] for run in b.runs}
    return median([run[key] / by_round[run["round"]] for run in a.runs])


def summarize(contenders: list[Contender], real_tokens: int) -> dict:
    """{contender: medians over rounds, and same-round ratios to ours_st}."""
    reference = next(c for c in contenders if c.name == REFERENCE)
    results = {}
    for c in contenders:
        pma_shares = [run["pma_share"] for run in c.runs if run["pma_share"] is not None]
        results[c.name] = {
            "tokens_per_s": real_tokens / median([run["seconds"] for run in c.runs]),
            "peak_mem_mb": median([run["peak_mem_mb"] for run in c.runs]),
            "dtype": str(c.dtype).removeprefix("torch."),
            "throughput_vs_ours_st": paired_median(reference, c, "seconds"),  # ours_st time / c time
            "throughput_vs_ours_st_cpu_time": paired_median(reference, c, "cpu_seconds"),  # same, in CPU seconds
            "memory_vs_ours_st": paired_median(c, reference, "peak_mem_mb"),
            "mfu": median([run["mfu"] for run in c.runs]),
            "mfu_wall": median([run["mfu_wall"] for run in c.runs]),
            "cpu_share": median([run["cpu_share"] for run in c.runs]),
            "pma_share": median(pma_shares) if pma_shares else None,
            "mfu_computed_tokens": median([run["mfu_computed_tokens"] for run in c.runs]),
            "padding_fraction": median([run["padding_fraction"] for run in c.runs]),
            "matmul_peak_gflops_per_cpu_s": c.runs[0]["matmul_peak_gflops_per_cpu_s"],  # best probe of its dtype
            "min_cosine_vs_ours_st": float(
                F.cosine_similarity(c.runs[-1]["embeddings"], reference.runs[-1]["embeddings"]).min()
            ) if c.same_vectors else None,
            "rounds": [{k: v for k, v in run.items() if k != "embeddings"} for run in c.runs],
        }
    return results


def run_benchmark(args: argparse.Namespace) -> tuple[str, dict]:
    """Build, load, run and report; returns (printed report, the record's metrics)."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()  # unused-weight notices of the rebuilt contenders
    transformers_logging.disable_progress_bar()
    load_at_start = load_line("start")
    texts = code_corpus(args.texts, seed=args.seed)
    with tempfile.TemporaryDirectory(prefix="c2llm-05b-random-") as tmp:  # the models read their tokenizer here
        folder = write_random_05b_folder(Path(tmp) / "model", seed=args.seed)
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        def token_lengths(batch: list[str]) -> list[int]:
            return [len(ids) for ids in tokenizer(batch, truncation=True, max_length=args.max_length)["input_ids"]]

        lengths = token_lengths(texts)
        contenders, ours_model = load_contenders(folder, args.batch_size, args.max_length, args.compile,
                                                 with_bf16=wants_bf16(args.bf16))
        for contender in tqdm(contenders, desc="warm-up", unit="contender"):
            contender.encode(texts[:2])  # first-call costs: kernel selection, caches, compilation (--compile)
        timed_runs(contenders, texts, args.rounds, args.seed, lambda n: model_flops(n, ours_model), lengths)
        large_sample = code_corpus(args.padding_sample, seed=args.seed + 1)
        large_lengths = token_lengths(large_sample)
    real_tokens = sum(lengths)
    results = summarize(contenders, real_tokens)
    measured_padding = results[REFERENCE]["padding_fraction"]
    rows = [[name, r["dtype"], f"{r['tokens_per_s']:.1f}", f"{r['throughput_vs_ours_st']:.2f}x",
             f"{r['peak_mem_mb']:.0f}", f"{r['memory_vs_ours_st']:.2f}x",
             f"{r['mfu']:.0%} / {r['mfu_computed_tokens']:.0%}",
             "-" if r["pma_share"] is None else f"{r['pma_share']:.2%}", f"{r['cpu_share']:.0%}",
             "-" if r["min_cosine_vs_ours_st"] is None else f"{r['min_cosine_vs_ours_st']:.5f}"]
            for name, r in results.items()]
    padding = [
        {"corpus": f"timed corpus ({len(texts)} texts), measured in the runs' forward passes",
         "batch_size": args.batch_size, "sorted_packed": measured_padding,
         "sorted_padded": results["ours_st_padded"]["padding_fraction"],
         "unsorted_padded": sorted_batch_padding(texts, lengths, args.batch_size, sort=False)},
        *[{"corpus": f"{len(large_sample)} texts of the same corpus, computed from token counts", "batch_size": size,
           "sorted_packed": sorted_batch_padding(large_sample, large_lengths, size, pack=True),
           "sorted_padded": sorted_batch_padding(large_sample, large_lengths, size),
           "unsorted_padded": sorted_batch_padding(large_sample, large_lengths, size, sort=False)}
          for size in (args.batch_size, 32)],
    ]
    num_queries = args.texts // 4
    metrics = {"corpus": {"texts": len(texts), "functions": len(texts) - num_queries, "docstrings": num_queries,
                          "real_tokens": real_tokens, "tokens_min": min(lengths), "tokens_max": max(lengths),
                          "tokens_median": median(lengths), "max_length": args.max_length,
                          "batch_size": args.batch_size, "rounds": args.rounds},
               "padding": padding, "contenders": results}
    report = "\n".join([
        "# C2LLM encode speed (benchmarks/encode_speed.py)",
        "",
        f"command: python benchmarks/encode_speed.py {shlex.join(sys.argv[1:])}".rstrip(),
        f"hardware: {hardware_line()}",
        f"contention: {load_at_start}; {load_line('end')}; see the CPU share column",
        "model: C2LLM-0.5B shape (24 layers, hidden 896, 14/2 heads, vocab 151936, PMA 32 heads), random weights",
        (f"corpus: {len(texts)} texts ({len(texts) - num_queries} functions with the document prompt, {num_queries} "
         f"docstrings with the query prompt) from the stdlib and site-packages; {real_tokens} real tokens, "
         f"{min(lengths)}-{max(lengths)} per text (median {median(lengths):.0f}); max_length {args.max_length}, "
         f"batch {args.batch_size}, {args.rounds} interleaved rounds"),
        "",
        markdown_table(["contender", "dtype", "tokens/s", "vs ours_st", "working MB", "vs ours_st",
                        "MFU real / computed", "PMA share", "CPU share", "min cos vs ours_st"], rows),
        "",
        encode_speed_padding({"metrics": metrics}),
        "",
        encode_speed_goals({"metrics": metrics}),
        "",
        ("tokens/s: real tokens (padding excluded) / median wall time to encode the corpus. working MB: median peak "
         "RSS above the RSS before the run, all weights loaded (kernel high-water mark after malloc_trim). "
         "vs ours_st: median of same-round ratios (tokens/s: >1 is faster than ours_st; memory: >1 uses more); "
         "per CPU second: the same with CPU time instead of wall time. "
         "MFU: model FLOPs per CPU second / the best F.linear (2048x896 @ 896x4864, same dtype) FLOPs per CPU "
         "second of the probes run before every run; on real tokens, and on all computed positions (padding and "
         "packed rows' full length included, read from the backbone's input shape). "
         "CPU share: CPU time the run got / (wall time x torch threads); below 100% other jobs had the cores. "
         "min cos: lowest cosine to ours_st's embedding over the corpus (last_token_st pools differently)."),
    ])
    return report, metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_record_argument(parser, "encode_speed")
    parser.add_argument("--quick", action="store_true", help="small run to try it: 8 texts, max length 128, 2 rounds")
    parser.add_argument("--texts", type=int, default=16, help="corpus size: 3/4 functions, 1/4 docstrings (default 16)")
    parser.add_argument("--max-length", type=int, default=512, help="truncate inputs to this many tokens (default 512)")
    parser.add_argument("--batch-size", type=int, default=8, help="texts per forward pass, all contenders (default 8)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the corpus sample and the weights (default 0)")
    parser.add_argument("--padding-sample", type=int, default=256,
                        help="texts tokenized (not encoded) for the padding fraction of a larger corpus (default 256)")
    parser.add_argument("--compile", action="store_true",
                        help="add ours_st_bf16_compiled (ours_st_compiled without bf16): the backbone under "
                             "torch.compile (several minutes to compile)")
    parser.add_argument("--bf16", choices=("auto", "yes", "no"), default="auto",
                        help="bf16 contenders: auto = only where the CPU computes bf16 natively (default)")
    args = parser.parse_args()
    if args.quick:
        args.texts, args.max_length, args.rounds, args.padding_sample = 8, 128, 2, 64
    loads = [load_line("start")]
    report, metrics = run_benchmark(args)
    loads.append(load_line("end"))
    print(report)
    if args.quick and args.record_dir == RESULTS_DIR:
        print("--quick: no record written (give --record-dir to keep one)")
    else:
        print(f"record: {write_record(args.record_name, metrics, loads, args.record_dir)}")


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from benchmarks.tables import number  # noqa: E402


# encode_speed.py's contenders, as the speed page names them; the one in bold is the dtype C2LLM loads on that CPU.
CONTENDERS = {"ours_st": "ours_st (SentenceTransformer, packed)", "ours_automodel": "ours_automodel (`model.encode`)",
              "ours_st_padded": "ours_st_padded (`pack_sequences=False`)",
              "published_approach": "published approach (causal LM + LM head, all hidden states, eager)",
              "last_token_st": "last-token pooling, same backbone",
              "ours_st_bf16": "**ours_st_bf16 (the default dtype on this CPU)**",
              "published_approach_bf16": "published approach", "ours_st_compiled": "ours_st, `torch.compile`",
              "ours_st_bf16_compiled": "ours_st_bf16, `torch.compile`"}


DTYPES = {"float32": "fp32", "bfloat16": "bf16"}


def encode_speed(record: dict) -> str:
    """Each contender's tokens/s, working memory and MFU, with ratios to ours_st, the share of its cores it got and
    how close its embeddings are to ours_st's."""
    rows = []
    for name, figures in record["metrics"]["contenders"].items():
        speed, ratio = number(figures["tokens_per_s"], 1), f"{figures['throughput_vs_ours_st']:.2f}x"
        if CONTENDERS[name].startswith("**"):
            speed, ratio = f"**{speed}**", f"**{ratio}**"
        cosine = figures["min_cosine_vs_ours_st"]
        rows.append([CONTENDERS[name], DTYPES[figures["dtype"]], speed, ratio, f"{figures['peak_mem_mb']:.0f}",
                     f"{figures['memory_vs_ours_st']:.2f}x", f"{figures['mfu']:.0%}", f"{figures['cpu_share']:.0%}",
                     "other pooling" if cosine is None else f"{cosine:.5f}"])
    return markdown_table(["contender", "dtype", "tokens/s", "vs ours_st", "working MB", "vs ours_st",
                           "MFU (real tokens)", "CPU share", "min cosine to ours_st"], rows, "llrrrrrrr")


# encode_speed.py's goals: ours against the published approach, bf16 against our fp32 (docs/speed.md)
ENCODE_GOALS = {"throughput_vs_published": 1.5, "memory_vs_published": 0.5, "bf16_speedup": 2.5,
                "bf16_mfu_fraction": 0.75, "pma_share": 0.02}


def goal_status(met: bool) -> str:
    return "met" if met else "MISSED"


def encode_speed_goal_rows(contenders: dict) -> list[list[str]]:
    """The goals table of an encode_speed run's contenders: the measured value, the target, met or missed (the bf16
    goals: not measured when the bf16 contenders were left out)."""
    published, ours = contenders["published_approach"], contenders["ours_st"]
    speed, memory = 1 / published["throughput_vs_ours_st"], 1 / published["memory_vs_ours_st"]
    speed_cpu = 1 / published["throughput_vs_ours_st_cpu_time"]
    rows = [
        ["ours_st / published_approach, tokens/s (fp32; per CPU second)", f"{speed:.2f}x ({speed_cpu:.2f}x)",
         f">= {ENCODE_GOALS['throughput_vs_published']}x",
         goal_status(speed >= ENCODE_GOALS["throughput_vs_published"])],
        ["ours_st / published_approach, working memory (fp32)", f"{memory:.2f}x",
         f"<= {ENCODE_GOALS['memory_vs_published']}x", goal_status(memory <= ENCODE_GOALS["memory_vs_published"])],
    ]
    if "ours_st_bf16" not in contenders:
        rows.append([f"bf16 goals (speed-up >= {ENCODE_GOALS['bf16_speedup']}x, MFU >= "
                     f"{ENCODE_GOALS['bf16_mfu_fraction']:.0%})", "not measured", "",
                     "this CPU has no native bf16 (--bf16 yes to time it emulated)"])
        if "ours_st_compiled" in contenders:
            rows.append(["ours_st_compiled / ours_st, tokens/s (fp32)",
                         f"{contenders['ours_st_compiled']['throughput_vs_ours_st']:.2f}x", "", ""])
        rows += [[f"{name} MFU, fp32, real tokens (no goal: the goal is for bf16)", f"{contenders[name]['mfu']:.1%}",
                  "", ""] for name in ("ours_st", "ours_st_compiled") if name in contenders]
        pma = ours["pma_share"]
        return rows + [["PMA share of encode time (fp32)", f"{pma:.2%}", f"< {ENCODE_GOALS['pma_share']:.0%}",
                        goal_status(pma < ENCODE_GOALS["pma_share"])]]
    bf16, published_bf16 = contenders["ours_st_bf16"], contenders["published_approach_bf16"]
    speed_bf16 = bf16["throughput_vs_ours_st"] / published_bf16["throughput_vs_ours_st"]
    memory_bf16 = bf16["memory_vs_ours_st"] / published_bf16["memory_vs_ours_st"]
    speedup = bf16["throughput_vs_ours_st"]
    rows += [
        ["ours_st_bf16 / published_approach_bf16, tokens/s (bf16)", f"{speed_bf16:.2f}x",
         f">= {ENCODE_GOALS['throughput_vs_published']}x",
         goal_status(speed_bf16 >= ENCODE_GOALS["throughput_vs_published"])],
        ["ours_st_bf16 / published_approach_bf16, working memory (bf16)", f"{memory_bf16:.2f}x",
         f"<= {ENCODE_GOALS['memory_vs_published']}x", goal_status(memory_bf16 <= ENCODE_GOALS["memory_vs_published"])],
        ["ours_st_bf16 / ours_st, tokens/s (per CPU second)",
         f"{speedup:.2f}x ({bf16['throughput_vs_ours_st_cpu_time']:.2f}x)", f">= {ENCODE_GOALS['bf16_speedup']}x",
         goal_status(speedup >= ENCODE_GOALS["bf16_speedup"])],
        ["ceiling: this CPU's bf16 / fp32 matmul peak (best probes)",
         f"{bf16['matmul_peak_gflops_per_cpu_s'] / ours['matmul_peak_gflops_per_cpu_s']:.2f}x", "", ""],
    ]
    target = ENCODE_GOALS["bf16_mfu_fraction"]
    for name in ("ours_st_bf16", "ours_st_bf16_compiled"):
        if name in contenders:
            mfu = contenders[name]
            rows += [[f"{name} MFU, computed positions (the goal's basis)", f"{mfu['mfu_computed_tokens']:.1%}",
                      f">= {target:.0%}", goal_status(mfu["mfu_computed_tokens"] >= target)],
                     [f"{name} MFU, real tokens only (padding = waste)", f"{mfu['mfu']:.1%}", f">= {target:.0%}",
                      goal_status(mfu["mfu"] >= target)]]
    pma = max(ours["pma_share"], bf16["pma_share"])
    return rows + [["PMA share of encode time (worst of fp32, bf16)", f"{pma:.2%}",
                    f"< {ENCODE_GOALS['pma_share']:.0%}", goal_status(pma < ENCODE_GOALS["pma_share"])]]


def encode_speed_goals(record: dict) -> str:
    """The project's speed and memory goals against an encode_speed run."""
    return markdown_table(["goal", "measured", "target", "status"], encode_speed_goal_rows(
        record["metrics"]["contenders"]), "lrrl")


def encode_speed_padding(record: dict) -> str:
    """The share of computed positions that is padding: measured in a run's forward passes, and computed from token
    counts for a larger sample, with length-sorted packed batches (ours), sorted padded and unsorted padded ones."""
    rows = [[row["corpus"], str(row["batch_size"]),
             *(f"{row[layout]:.1%}" for layout in ("sorted_packed", "sorted_padded", "unsorted_padded"))]
            for row in record["metrics"]["padding"]]
    return markdown_table(["padding (share of computed positions)", "batch", "sorted + packed (ours)",
                           "sorted, padded", "unsorted, padded"], rows, "lrrrr")


def encode_speed_runs(*records: dict) -> str:
    """encode_speed runs side by side: batch, corpus and machine, then ours_st and ours_st_bf16 tokens/s, the bf16
    speed-up, its MFU and the share of the cores the contenders got."""
    rows = []
    for record in records:
        corpus, contenders = record["metrics"]["corpus"], record["metrics"]["contenders"]
        shares = [figures["cpu_share"] for figures in contenders.values()]
        bf16 = contenders.get("ours_st_bf16")
        bf16_cells = ([number(bf16["tokens_per_s"], 1), f"{bf16['throughput_vs_ours_st']:.2f}x", f"{bf16['mfu']:.0%}"]
                      if bf16 else ["not run", "", ""])
        rows.append([str(corpus["batch_size"]), str(corpus["rounds"]),
                     f"{corpus['texts']} texts, {corpus['real_tokens']:,} tokens ({corpus['tokens_min']}-"
                     f"{corpus['tokens_max']} each, median {corpus['tokens_median']:.0f})",
                     record["machine"].split(";")[0], number(contenders["ours_st"]["tokens_per_s"], 1), *bf16_cells,
                     f"{min(shares):.0%}-{max(shares):.0%}"])
    return markdown_table(["batch", "rounds", "corpus", "machine", "ours_st tokens/s", "ours_st_bf16 tokens/s",
                           "bf16 vs ours_st", "bf16 MFU", "CPU share"], rows, "rrllrrrrr")


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "encode_speed": (("encode_speed",), encode_speed),
    "encode_speed_goals": (("encode_speed",), encode_speed_goals),
    "encode_speed_padding": (("encode_speed",), encode_speed_padding),
    "encode_speed_runs": (("encode_speed", "encode_speed_batch16", "encode_speed_avx512bf16",
                           "encode_speed_batch16_avx512bf16"), encode_speed_runs),
    "encode_speed_avx512bf16": (("encode_speed_avx512bf16",), encode_speed),
    "encode_speed_goals_avx512bf16": (("encode_speed_avx512bf16",), encode_speed_goals),
}


if __name__ == "__main__":
    main()
