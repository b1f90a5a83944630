"""Every GPU figure from one prepared command: encode, training steps, the SmolLM2 recipe and ablation, the server.

    python -m benchmarks.gpu [--budget 480] [--parts encode train recipe serving] [--record-dir DIR]
    python -m benchmarks.gpu --tiny --device cpu --record-dir /tmp/gpu-try     # the same code at tiny sizes

Made for a lent GPU machine (docs/gpu.md: one H200, 16 cores, no network, 15 minutes in all, 10 per command): it
runs on that machine's own Python with the wheels `python -m benchmarks.gpu_wheels` fetches here, and writes one
record per part (`write_record`, the project's record format) into --record-dir, then a short summary. The parts,
in priority order (a --budget too short for all drops the last ones first, before anything runs; a part that
finds too little time left when its turn comes is skipped and says so):

  encode   throughput and peak memory at the published 0.5B and 7B shapes (random weights in the published
           config, no download), bf16: this repository's C2LLMModel against the published approach as
           benchmarks/encode_speed.py rebuilds it (Qwen2ForCausalLM with its LM head, eager attention, every hidden
           state returned), over a batch x length sweep; which attention kernel actually ran (the profiler's
           operator names: flash, memory-efficient, cuDNN or math SDPA; flash-attn 2 where it imports) and the
           cosine of each kernel's embeddings against eager attention's.
  train    optimizer-step throughput and memory at the 0.5B shape: LoRA (the recipe's adapters) and full
           fine-tuning, gradient checkpointing off/on, sequence packing on/off; real tokens/s and MFU against a
           matmul probe measured in the run.
  recipe   the SmolLM2 C2LLM recipe at GPU scale (every training pair the sources hold, 1,024 tokens, 7 mined hard
           negatives) and the pooling ablation (experiments/smollm2/run_ablation.sh, seeds 0 and 1, the same
           dev-loss stopping rule), each evaluated with the project's evaluation (python -m evaluation.suite).
  serving  the HTTP server (python -m serving) at concurrency 8 and 32 against in-process encode, on the device.

--tiny swaps every shape for the tests' tiny model and every size for a few texts, so the whole command runs in
minutes on a CPU (tests/test_gpu_benchmark.py, slow tier): it is ready before a GPU is lent.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/gpu.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from benchmarks.common import (  # noqa: E402
    add_record_argument, commit_line, hardware_line, load_line, median, portable_arguments,
    training_pairs, write_record,
)

PARTS = ("encode", "train", "recipe", "serving")  # priority order: the issue's; a short budget drops from the end
# Seconds each part is planned to take, the lent machine's start and the wheels' install excluded. On one H200: a
# 0.5B and a 7B model built on the GPU (about 20 s each), 8 sweep points per shape of 8 forward passes (ours and
# the published approach, a warm-up and 3 timed each): about 4e16 FLOP at 7B, 100 s at half the measured matmul
# rate; 8 training setups of 5 steps; the recipe and 8 ablation runs of a 135M model (data preparation and
# evaluation dominate); a server start and 2 x 2 x 240 requests. At --tiny, measured on 2 shared CPU cores.
PLANNED_SECONDS = {"encode": 180, "train": 90, "recipe": 210, "serving": 60}
TINY_PLANNED_SECONDS = {"encode": 60, "train": 60, "recipe": 420, "serving": 120}
DEFAULT_BUDGET_SECONDS = 480  # the 8 minutes: a 10-minute command with room for the machine's own start

# Qwen2.5-Coder-7B-Instruct's published config.json plus the paper's PMA settings (pma_dim = hidden size, as mteb
# records for C2LLM-7B): the 7B shape with random weights. The 0.5B shape is train.release.C2LLM_05B_CONFIG.
C2LLM_7B_CONFIG = dict(
    vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
    num_key_value_heads=4, max_position_embeddings=32768, max_window_layers=28, rms_norm_eps=1e-6,
    rope_theta=1000000.0, tie_word_embeddings=False, bos_token_id=151643, eos_token_id=151643,
    pad_token_id=151643, pma_num_heads=32, pma_dim=3584,
)  # fmt: skip
# The tests' tiny model (tests/make_tiny_model.py) with the Qwen2.5 vocabulary.
TINY_CONFIG = dict(
    vocab_size=151936, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=True, bos_token_id=151643,
    eos_token_id=151643, pad_token_id=151643, pma_num_heads=4, pma_dim=64,
)  # fmt: skip

# (batch, tokens per text) sweep points; a point whose batch x length exceeds the cap is not run (the published
# approach's (batch, length, vocabulary) logits alone would take 40 GB at 7B).
ENCODE_SWEEP = [(batch, length) for length in (256, 1024, 4096) for batch in (8, 32, 128)]
MAX_SWEEP_TOKENS = 131072
TINY_ENCODE_SWEEP = [(2, 16), (4, 32)]
TIMED_REPEATS = 3  # median of 3 timed calls after one warm-up per sweep point
PARITY_BATCH, PARITY_LENGTHS = 8, (64, 512)  # a padded batch of real lengths between these bounds
TINY_PARITY_BATCH, TINY_PARITY_LENGTHS = 4, (8, 32)
# Profiler operator names of scaled_dot_product_attention's backends (torch 2.x), and the label each gets.
SDPA_KERNELS = {
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash (CPU)",
    "aten::_scaled_dot_product_efficient_attention": "memory-efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cuDNN",
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_flash_attention_forward": "flash",
    "flash_attn::_flash_attn_varlen_forward": "flash-attn 2",
    "flash_attn::_flash_attn_forward": "flash-attn 2",
}
MATMUL_PROBE_SIZE = 8192  # bf16 (8192 x 8192) @ (8192 x 8192): fills an H200 (about 790 TFLOP/s measured here)
TINY_MATMUL_PROBE_SIZE = 512

TRAIN_BATCH, TRAIN_MAX_LENGTH, TRAIN_STEPS = 32, 1024, 4  # pairs per step, tokens per text, timed steps per setup
TINY_TRAIN_BATCH, TINY_TRAIN_MAX_LENGTH, TINY_TRAIN_STEPS = 4, 32, 2
TRAIN_SETUPS = [(mode, checkpointing, packing) for mode in ("lora", "full") for checkpointing in (False, True)
                for packing in (True, False)]  # fmt: skip
FLOPS_PER_TRAINED_TOKEN_FACTOR = 3  # forward + backward (twice the forward): the usual MFU count, recomputation not

SERVING_CONCURRENCY = (8, 32)
SERVING_REQUESTS, TINY_SERVING_REQUESTS = 240, 64
SERVING_MAX_LENGTH, TINY_SERVING_MAX_LENGTH = 512, 64

SMOLLM2_RECIPE = "train/configs/smollm2-cpu.yaml"
TINY_RECIPE = "train/configs/cpu-smoke.yaml"
ABLATION_SCRIPT = "experiments/smollm2/run_ablation.sh"
ABLATION_VARIANTS = ["pma:0", "last_token:0", "mean:0", "pma128:0", "pma:1", "last_token:1", "mean:1", "pma128:1"]
RECIPE_BENCHMARKS = ("humaneval", "humanevalx_py2cpp")
# The recipe at GPU scale: the paper's 1,024 tokens and 7 hard negatives, bf16; its sources lose their row caps
# (gpu_recipe_overrides).
GPU_RECIPE_OVERRIDES = ["model.max_seq_length=1024", "model.dtype=bfloat16", "mining.num_negatives=7",
                        "training.bf16=true"]
SHARED_DATA_PREFIX = "../shared/data/"  # how recipe files name the data folder beside the repository
TINY_RECIPE_OVERRIDES = [
    "data.datasets=[{name: python_docstrings, modules: [json, argparse]}]", "mining.enabled=false",
    "training.max_steps=2", "training.save_steps=2", "merge.num_checkpoints=1", "merge.weights=null",
]  # fmt: skip
# The ablation at GPU scale: the CPU protocol's stopping rule, batches of 16 as the recipe, every row read.
GPU_ABLATION_ENVIRONMENT = {"BATCH": "16", "STEPS": "300", "ROWS": "100000", "DEV_PAIRS": "64"}
TINY_ABLATION_ENVIRONMENT = {"BATCH": "4", "STEPS": "2", "MIN_STEPS": "0", "EVAL_STEPS": "1", "PATIENCE": "1",
                             "DEV_PAIRS": "8", "ROWS": "60", "BENCHMARKS": "humaneval",
                             "PMA_WIDTHS": "64 32"}  # the tiny model's hidden size is 64  # fmt: skip
TINY_ABLATION_VARIANTS = ["pma:0", "mean:0"]
SUITE_MAX_LENGTH, TINY_SUITE_MAX_LENGTH = 1024, 64
SUITE_METRIC = "ndcg@10"


class BudgetError(ValueError):
    """--budget or --parts cannot give any figure."""


@dataclass
class Settings:
    """What one run measures and where: the device, the sizes (full or --tiny), the deadline, the records."""

    device: torch.device
    tiny: bool
    record_dir: Path
    shared_data: Path
    work_dir: Path
    deadline: float  # time.monotonic() value
    planned: dict[str, int]

    def seconds_left(self) -> float:
        return self.deadline - time.monotonic()


# --------------------------------------------------------------------------------------------------------------------
# The plan


def plan_parts(parts: list[str], budget_seconds: float, planned: dict[str, int]) -> tuple[list[str], list[str]]:
    """(parts kept, parts dropped): the asked parts in priority order, the lowest-priority ones dropped first until
    the planned seconds of the rest fit the budget."""
    unknown = [part for part in parts if part not in PARTS]
    if unknown:
        raise BudgetError(f"--parts {' '.join(unknown)}: unknown; choose among {', '.join(PARTS)}.")
    ordered = [part for part in PARTS if part in parts]
    kept = list(ordered)
    while kept and sum(planned[part] for part in kept) > budget_seconds:
        kept.pop()
    if not kept:
        first = ordered[0]
        raise BudgetError(f"--budget {budget_seconds:g} s fits no part: {first}, the first asked, is planned at "
                          f"{planned[first]} s. Give --budget {planned[first]} or more.")
    return kept, [part for part in ordered if part not in kept]


def pick_device(choice: str) -> torch.device:
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise BudgetError("--device cuda: torch sees no CUDA device here; run on the lent GPU machine, or pass "
                          "--device cpu (with --tiny) to try the command.")
    return torch.device(choice)


# --------------------------------------------------------------------------------------------------------------------
# Timing and memory on either device


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak_memory(device: torch.device) -> int:
    """Start a peak-memory window; returns the bytes allocated now (the window's baseline)."""
    if device.type != "cuda":
        return 0
    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    return torch.cuda.memory_allocated(device)


def peak_memory_mib(device: torch.device, baseline: int) -> float | None:
    """Peak bytes torch allocated since `reset_peak_memory`, above its baseline, in MiB (None on a CPU: the CPU
    benchmarks measure resident memory instead, benchmarks/common.py WorkingMemory)."""
    if device.type != "cuda":
        return None
    return (torch.cuda.max_memory_allocated(device) - baseline) / 2**20


def timed(device: torch.device, call, repeats: int) -> tuple[float, float | None]:
    """(median seconds of `repeats` calls after one warm-up, peak MiB above the memory held before them)."""
    call()  # warm-up: kernel selection, allocator growth
    baseline = reset_peak_memory(device)
    seconds = []
    for _ in range(repeats):
        synchronize(device)
        started = time.perf_counter()
        call()
        synchronize(device)
        seconds.append(time.perf_counter() - started)
    return median(seconds), peak_memory_mib(device, baseline)


def matmul_ceiling(device: torch.device, dtype: torch.dtype, size: int) -> float:
    """FLOP/s of a (size x size) @ (size x size) product: the ceiling MFU is measured against, on this device."""
    left, right = torch.randn(size, size, device=device, dtype=dtype), torch.randn(size, size, device=device,
                                                                                    dtype=dtype)
    seconds, _ = timed(device, lambda: left @ right, repeats=5)
    return 2 * size**3 / seconds


def out_of_memory_errors() -> tuple[type[BaseException], ...]:
    return (torch.cuda.OutOfMemoryError,) if torch.cuda.is_available() else ()


# --------------------------------------------------------------------------------------------------------------------
# Part 1: encode


def build_models(shape: dict, device: torch.device, dtype: torch.dtype, seed: int) -> dict:
    """{name: module} on one set of random weights: ours (SDPA), ours with eager attention, the published approach's
    causal LM (eager, its LM head: tied to the embeddings or, at 7B, random) and ours with flash-attn 2 where it
    imports. Every model reads the same tensors (load_state_dict(assign=True)): "same weights" made literal."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from configuration_c2llm import C2LLMConfig
    from modeling_c2llm import C2LLMModel

    torch.manual_seed(seed)
    with torch.device(device):
        ours = C2LLMModel(C2LLMConfig(**shape, attn_implementation="sdpa")).to(dtype).eval()
        weights = ours.state_dict()
        models = {"ours": ours}
        variants = {"eager": "eager"}
        if importlib.util.find_spec("flash_attn") is not None and device.type == "cuda":
            variants["flash_attention_2"] = "flash_attention_2"
        for name, implementation in variants.items():
            twin = C2LLMModel(C2LLMConfig(**shape, attn_implementation=implementation)).to(dtype).eval()
            twin.load_state_dict(weights, assign=True)
            models[f"ours_{name}"] = twin
        qwen = Qwen2Config(**{k: v for k, v in shape.items() if not k.startswith("pma_")},
                           attn_implementation="eager")
        lm = Qwen2ForCausalLM(qwen).to(dtype).eval()
        lm.model.load_state_dict(ours.model.state_dict(), assign=True)
        if shape.get("tie_word_embeddings"):
            lm.lm_head.weight = lm.model.embed_tokens.weight
        models["published_lm"] = lm
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the twins' own random weights, replaced by ours'
    return models


def random_batch(batch: int, lengths: list[int], vocab_size: int, device: torch.device, seed: int):
    """(input_ids, attention_mask) of `batch` rows, row i holding lengths[i] real tokens, right padding."""
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.randint(0, vocab_size, (batch, width), generator=generator)
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    return ids.to(device), mask.to(device)


def kernels_that_ran(call) -> list[str]:
    """The attention kernels the profiler saw `call` run (SDPA_KERNELS' labels), sorted."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        call()
    return sorted({SDPA_KERNELS[event.key] for event in profiler.key_averages() if event.key in SDPA_KERNELS})


def attention_parity(models: dict, device: torch.device, tiny: bool, seed: int) -> dict:
    """Each SDPA backend forced in turn (torch.nn.attention.sdpa_kernel), and flash-attn 2 where it imports, on a
    padded batch of real lengths: the kernel that ran and the lowest cosine of its embeddings to eager attention's.
    A backend that cannot run these inputs says why."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    batch, (shortest, longest) = (TINY_PARITY_BATCH, TINY_PARITY_LENGTHS) if tiny else (PARITY_BATCH, PARITY_LENGTHS)
    lengths = torch.linspace(longest, shortest, batch).long().tolist()
    ids, mask = random_batch(batch, lengths, models["ours"].config.vocab_size, device, seed)
    with torch.inference_mode():
        reference = models["ours_eager"](input_ids=ids, attention_mask=mask).sentence_embedding.float()

    def compare(model, context) -> dict:
        def call():
            with context(), torch.inference_mode():
                return model(input_ids=ids, attention_mask=mask).sentence_embedding.float()
        try:
            kernels = kernels_that_ran(call)
            embeddings = call()
        except RuntimeError as error:  # "No available kernel": the backend refuses these inputs here
            return {"ran": False, "reason": str(error).splitlines()[0][:300]}
        return {"ran": True, "kernels": kernels,
                "min_cosine_vs_eager": float(F.cosine_similarity(embeddings, reference).min())}

    results = {"default": compare(models["ours"], nullcontext)}
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                    SDPBackend.MATH):
        results[backend.name.lower()] = compare(models["ours"], lambda backend=backend: sdpa_kernel(backend))
    if "ours_flash_attention_2" in models:
        results["flash_attn_2"] = compare(models["ours_flash_attention_2"], nullcontext)
    else:
        results["flash_attn_2"] = {"ran": False, "reason": "flash_attn does not import here" if device.type == "cuda"
                                   else "flash-attn 2 runs on CUDA only"}
    return {"batch": batch, "lengths": lengths, "backends": results}


def encode_sweep(models: dict, device: torch.device, settings: Settings, part_deadline: float, seed: int) -> list:
    """Tokens/s and peak memory of ours and the published approach at each (batch, length) of the sweep: full rows
    of random tokens, so every position is a real token (no padding, nothing to pack)."""
    from benchmarks.encode_speed import PublishedApproach

    published = PublishedApproach.on_modules(models["published_lm"], models["ours"].pma)
    contenders = {
        "ours": lambda ids, mask: models["ours"](input_ids=ids, attention_mask=mask).sentence_embedding,
        "published_approach": published.embed_ids,
    }
    points = []
    for batch, length in TINY_ENCODE_SWEEP if settings.tiny else ENCODE_SWEEP:
        if batch * length > MAX_SWEEP_TOKENS:
            continue
        if time.monotonic() > part_deadline:
            points.append({"batch": batch, "length": length, "skipped": "the part's time was spent"})
            continue
        ids, mask = random_batch(batch, [length] * batch, models["ours"].config.vocab_size, device, seed)
        point = {"batch": batch, "length": length}
        for name, forward in contenders.items():
            def call(forward=forward):
                with torch.inference_mode():
                    return forward(ids, mask)
            try:
                seconds, peak = timed(device, call, TIMED_REPEATS)
                point[name] = {"tokens_per_s": batch * length / seconds, "seconds": seconds, "peak_mib": peak}
            except out_of_memory_errors() as error:
                point[name] = {"out_of_memory": str(error).splitlines()[0][:300]}
                torch.cuda.empty_cache()
        points.append(point)
    return points


def run_encode(settings: Settings, seed: int = 0) -> dict:
    from train.release import C2LLM_05B_CONFIG

    shapes = {"tiny": TINY_CONFIG} if settings.tiny else {"0.5b": C2LLM_05B_CONFIG, "7b": C2LLM_7B_CONFIG}
    dtype = torch.bfloat16 if settings.device.type == "cuda" else torch.float32
    part_deadline = time.monotonic() + settings.planned["encode"]
    results = {"dtype": str(dtype).removeprefix("torch."), "shapes": {}}
    for index, (name, shape) in enumerate(shapes.items()):
        # the 7B gets the rest of the part's time, the 0.5B its share of it
        shape_deadline = part_deadline if index == len(shapes) - 1 else time.monotonic() + (
            part_deadline - time.monotonic()) / (len(shapes) - index)
        shape = {k: v for k, v in shape.items() if k != "torch_dtype"}
        models = build_models(shape, settings.device, dtype, seed)
        parity = attention_parity(models, settings.device, settings.tiny, seed)
        sweep = encode_sweep(models, settings.device, settings, shape_deadline, seed)
        results["shapes"][name] = {"parameters": sum(p.numel() for p in models["ours"].parameters()),
                                   "attention": parity, "sweep": sweep}
        del models
        if settings.device.type == "cuda":
            torch.cuda.empty_cache()
    return results


# --------------------------------------------------------------------------------------------------------------------
# Part 2: training steps


def run_train(settings: Settings, seed: int = 0) -> dict:
    """Optimizer steps at the 0.5B shape (tiny at --tiny) under every TRAIN_SETUPS combination, the recipe's loss
    (in-batch negatives) on real (docstring, function) pairs: real tokens/s, peak memory and MFU."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import losses

    from benchmarks.common import dtype_kwargs, write_random_05b_folder
    from benchmarks.encode_speed import model_flops
    from benchmarks.train_speed import set_checkpointing, train_step
    from tests.make_tiny_model import make_tiny_model
    from train.args import LoraArguments
    from train.model import add_lora

    tiny, device = settings.tiny, settings.device
    batch, max_length, steps = ((TINY_TRAIN_BATCH, TINY_TRAIN_MAX_LENGTH, TINY_TRAIN_STEPS) if tiny
                                else (TRAIN_BATCH, TRAIN_MAX_LENGTH, TRAIN_STEPS))
    weights_dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    ceiling = matmul_ceiling(device, weights_dtype, TINY_MATMUL_PROBE_SIZE if tiny else MATMUL_PROBE_SIZE)
    queries, documents = training_pairs(batch, seed=seed)
    part_deadline = time.monotonic() + settings.planned["train"]
    folder = settings.work_dir / "train-model"
    if not (folder / "config.json").is_file():
        make_tiny_model(folder, seed=seed) if tiny else write_random_05b_folder(folder, seed=seed)
    results = {"batch_pairs": batch, "max_length": max_length, "timed_steps": steps,
               "matmul_ceiling_tflops": ceiling / 1e12, "weights_dtype": str(weights_dtype).removeprefix("torch."),
               "setups": []}
    for mode in ("lora", "full"):
        # LoRA: the base in bf16, adapters and head in float32 (train/train.py); full: float32 master weights.
        # Both compute under bf16 autocast on a GPU, as the recipe's `bf16: true`.
        load_dtype = weights_dtype if mode == "lora" else torch.float32
        model = SentenceTransformer(str(folder), device=str(device), trust_remote_code=True,
                                    model_kwargs=dtype_kwargs(load_dtype))
        model.max_seq_length = max_length
        if mode == "lora":
            add_lora(model, LoraArguments())
            for parameter in model.parameters():
                if parameter.requires_grad:
                    parameter.data = parameter.data.float()
        model.train()
        preprocess = getattr(model, "preprocess", None) or model.tokenize  # sentence-transformers 6 renamed it
        features = [preprocess(queries), preprocess(documents)]
        lengths = [int(n) for f in features for n in f["attention_mask"].sum(dim=1)]
        step_flops = FLOPS_PER_TRAINED_TOKEN_FACTOR * model_flops(lengths, model[0].auto_model)
        loss = losses.MultipleNegativesRankingLoss(model)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext())
        for setup_mode, checkpointing, packing in TRAIN_SETUPS:
            if setup_mode != mode:
                continue
            setup = {"mode": mode, "gradient_checkpointing": checkpointing, "packing": packing,
                     "trainable_parameters": trainable}
            if time.monotonic() > part_deadline:
                results["setups"].append({**setup, "skipped": "the part's time was spent"})
                continue
            set_checkpointing(model, checkpointing)
            model[0].auto_model.config.pack_sequences = packing

            def step():
                with autocast:
                    return train_step(model, loss, optimizer, queries, documents)
            try:
                seconds, peak = timed(device, step, steps)
            except out_of_memory_errors() as error:
                results["setups"].append({**setup, "out_of_memory": str(error).splitlines()[0][:300]})
                optimizer.zero_grad(set_to_none=True)
                torch.cuda.empty_cache()
                continue
            tokens = sum(lengths)
            results["setups"].append({**setup, "tokens_per_s": tokens / seconds, "step_seconds": seconds,
                                      "peak_mib": peak, "mfu": step_flops / seconds / ceiling})
        set_checkpointing(model, False)
        del model, optimizer, loss
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return results


# --------------------------------------------------------------------------------------------------------------------
# Part 3: the SmolLM2 recipe at GPU scale and the pooling ablation


def run_logged(command: list[str], log: Path, timeout: float, environment: dict[str, str] | None = None) -> dict:
    """`command` from the repository root, output to `log`, stopped at `timeout` s: {exit code, seconds, log}."""
    started = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           **(environment or {})}
    with open(log, "wb") as output:
        try:
            code = subprocess.run(command, cwd=REPO_ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, timeout=max(1.0, timeout), check=False).returncode
        except subprocess.TimeoutExpired:
            code = None
    shown = ["python" if argument == sys.executable else argument for argument in command]
    return {"command": shlex.join(portable_arguments(shown)), "exit_code": code, "timed_out": code is None,
            "seconds": time.monotonic() - started, "log": log.name}


def gpu_recipe_overrides(shared_data: Path) -> list[str]:
    """GPU_RECIPE_OVERRIDES plus the SmolLM2 recipe's sources with every row they hold (no max_rows) and its data
    paths pointed at `shared_data` (the lent machine has no ../shared: its copy travels, benchmarks/gpu_wheels.py)."""
    from train.recipe import read_recipe_file

    def located(path: str) -> str:
        return str(shared_data / path.removeprefix(SHARED_DATA_PREFIX)) if path.startswith(SHARED_DATA_PREFIX) else path

    data = read_recipe_file(REPO_ROOT / SMOLLM2_RECIPE)["data"]
    datasets = [{key: located(value) if key == "path" else value for key, value in source.items()
                 if key != "max_rows"} for source in data["datasets"]]
    decontaminate = [located(path) for path in data.get("decontaminate", [])]
    return [*GPU_RECIPE_OVERRIDES, f"data.datasets={json.dumps(datasets)}",
            f"data.decontaminate={json.dumps(decontaminate)}"]


def run_recipe(settings: Settings) -> dict:
    """The recipe, then the ablation, each evaluated by python -m evaluation.suite on RECIPE_BENCHMARKS."""
    tiny = settings.tiny
    benchmarks = [settings.shared_data / "benchmarks" / name for name in
                  (RECIPE_BENCHMARKS[:1] if tiny else RECIPE_BENCHMARKS)]
    python = sys.executable
    work = settings.work_dir / "recipe"
    work.mkdir(parents=True, exist_ok=True)
    recipe_dir = work / "recipe-run"
    overrides = TINY_RECIPE_OVERRIDES if tiny else gpu_recipe_overrides(settings.shared_data)
    max_length = TINY_SUITE_MAX_LENGTH if tiny else SUITE_MAX_LENGTH
    # the recipe gets at most a third of what is left, the ablation the rest
    recipe_timeout = settings.seconds_left() / 3
    steps = {"recipe_train": run_logged(
        [python, "-m", "train.train", TINY_RECIPE if tiny else SMOLLM2_RECIPE, "--output-dir", str(recipe_dir),
         *[argument for override in overrides for argument in ("--set", override)]],
        work / "recipe-train.log", recipe_timeout)}
    if steps["recipe_train"]["exit_code"] == 0:
        steps["recipe_suite"] = run_logged(
            [python, "-m", "evaluation.suite", "--model", str(recipe_dir / "final"), "--data", *map(str, benchmarks),
             "--max-seq-length", str(max_length), "--no-progress", "--output", str(work / "recipe-suite.json")],
            work / "recipe-suite.log", max(1.0, recipe_timeout - steps["recipe_train"]["seconds"]))
    ablation_dir = work / "ablation"
    environment = {**(TINY_ABLATION_ENVIRONMENT if tiny else GPU_ABLATION_ENVIRONMENT), "PYTHON": python,
                   "SHARED_DATA": str(settings.shared_data)}
    if tiny:
        environment["RECIPE"] = TINY_RECIPE
    environment["OMP_NUM_THREADS"] = "1" if tiny else str(max(1, (os.cpu_count() or 2) // 2))
    # every variant and seed in one process: on one GPU the runs would only queue behind each other
    steps["ablation"] = run_logged(
        ["bash", ABLATION_SCRIPT, str(ablation_dir), *(TINY_ABLATION_VARIANTS if tiny else ABLATION_VARIANTS)],
        work / "ablation.log", settings.seconds_left() - 5, environment)
    results = {"steps": steps, "overrides": overrides, "ablation_environment": {
        k: v for k, v in environment.items() if k not in ("PYTHON", "SHARED_DATA")}}
    if (work / "recipe-suite.json").is_file():
        results["recipe_scores"] = ndcg_by_benchmark(work / "recipe-suite.json")
    results["ablation_scores"] = {
        run.name: ndcg_by_benchmark(run / "suite.json") for run in sorted(ablation_dir.glob("*-s*"))
        if (run / "suite.json").is_file()
    }
    results["ablation_stops"] = {
        run.name: stopping_step(run) for run in sorted(ablation_dir.glob("*-s*")) if run.is_dir()
    }
    return results


def ndcg_by_benchmark(path: Path) -> dict:
    """{benchmark folder name: nDCG@10} of an evaluation.suite output ({name: {"ndcg@10": x, ...}})."""
    report = json.loads(path.read_text(encoding="utf-8"))
    return {name: scores[SUITE_METRIC] for name, scores in report.items()
            if isinstance(scores, dict) and SUITE_METRIC in scores}


def stopping_step(run: Path) -> int | None:
    """The optimizer step an ablation run ended at (its newest checkpoint), None before its first."""
    steps = [int(path.name.rsplit("-", 1)[1]) for path in run.glob("checkpoint-*") if path.name.rsplit("-", 1)[1]
             .isdigit()]  # fmt: skip
    return max(steps) if steps else None


# --------------------------------------------------------------------------------------------------------------------
# Part 4: the server


def run_serving(settings: Settings, seed: int = 0) -> dict:
    """The server at SERVING_CONCURRENCY on the device against in-process encode (benchmarks/serving_load.py's
    functions), serving the 0.5B random-weight folder (tiny at --tiny)."""
    from benchmarks.common import function_samples, write_random_05b_folder
    from benchmarks.serving_load import (
        in_process_texts_per_s, load, server_rss_mib, start_server, stop_server,
    )  # fmt: skip
    from c2llm_plumbing.models import load_model
    from tests.make_tiny_model import make_tiny_model

    tiny = settings.tiny
    accelerator = "cuda" if settings.device.type == "cuda" else "cpu"
    requests = TINY_SERVING_REQUESTS if tiny else SERVING_REQUESTS
    max_length = TINY_SERVING_MAX_LENGTH if tiny else SERVING_MAX_LENGTH
    folder = settings.work_dir / "serving-model"
    if not (folder / "config.json").is_file():
        make_tiny_model(folder, seed=seed) if tiny else write_random_05b_folder(folder, seed=seed)
    texts = [code for code, _ in function_samples(requests, seed=seed)]
    model = load_model(folder, max_length, accelerator)
    batch = max(SERVING_CONCURRENCY)
    model.encode(texts[:8], prompt_name="document")  # warm-up
    options = ["--accelerator", accelerator, "--max-seq-length", str(max_length), "--encode-batch-size", str(batch),
               "--max-batch-size", str(batch), "--max-input-chars", str(max(map(len, texts)))]
    process, url = start_server(str(folder), options, settings.work_dir / "serving.log")
    levels = []
    try:
        load(url, folder.name, texts[: 2 * batch], batch)  # warm-up
        for concurrency in SERVING_CONCURRENCY:
            before = in_process_texts_per_s(model, texts, batch)
            figures = load(url, folder.name, texts, concurrency)
            after = in_process_texts_per_s(model, texts, batch)
            figures.update(in_process_texts_per_s=[before, after], server_rss_mib=server_rss_mib(process)[0],
                           vs_in_process=figures["texts_per_s"] / statistics.fmean([before, after]))
            levels.append(figures)
    finally:
        exit_code = stop_server(process)
    return {"max_length": max_length, "requests_per_level": requests, "levels": levels,
            "server_exit_code": exit_code}


# --------------------------------------------------------------------------------------------------------------------
# The command


RUNNERS = {"encode": run_encode, "train": run_train, "recipe": run_recipe, "serving": run_serving}


def summary_lines(name: str, metrics: dict) -> list[str]:
    """A few lines per part for the printed summary; the records hold everything."""
    if "skipped" in metrics or "error" in metrics:
        return [f"- {name}: {metrics.get('skipped') or metrics.get('error')}"]
    lines = [f"- {name}: {metrics['seconds']:.0f} s"]
    if name == "encode":
        for shape, figures in metrics["shapes"].items():
            kernels = figures["attention"]["backends"]["default"].get("kernels")
            ran = [point for point in figures["sweep"] if "ours" in point and "tokens_per_s" in point["ours"]]
            best = max(ran, key=lambda point: point["ours"]["tokens_per_s"], default=None)
            lines.append(f"  {shape}: default attention kernel {kernels}; best ours "
                         + (f"{best['ours']['tokens_per_s']:.0f} tokens/s at batch {best['batch']} x "
                            f"{best['length']}" if best else "none"))
    elif name == "train":
        for setup in metrics["setups"]:
            if "tokens_per_s" in setup:
                lines.append(f"  {setup['mode']}, checkpointing {setup['gradient_checkpointing']}, packing "
                             f"{setup['packing']}: {setup['tokens_per_s']:.0f} tokens/s, MFU {setup['mfu']:.1%}")
    elif name == "recipe":
        lines.append(f"  recipe: {metrics.get('recipe_scores')}; ablation runs scored: "
                     f"{len(metrics.get('ablation_scores', {}))}")
    elif name == "serving":
        for level in metrics["levels"]:
            lines.append(f"  concurrency {level['concurrency']}: {level['texts_per_s']:.1f} texts/s, "
                         f"{level['vs_in_process']:.2f}x in-process, {level['errors']} errors")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_SECONDS,
                        help=f"seconds for all parts (default {DEFAULT_BUDGET_SECONDS}); the lowest-priority parts "
                             "are dropped first when their planned times do not fit")
    parser.add_argument("--parts", nargs="+", default=list(PARTS), metavar="PART",
                        help=f"parts to run, of {', '.join(PARTS)} (default: all, run in that priority order)")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes and sizes: the whole command on a CPU")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                        help="auto: CUDA where torch sees it, else the CPU (default auto)")
    parser.add_argument("--shared-data", type=Path, default=REPO_ROOT.parent / "shared" / "data",
                        help="the folder holding benchmarks/ and train/ (default ../shared/data); the recipe part "
                             "needs it")
    parser.add_argument("--work-dir", type=Path, help="models, runs and logs of this run (default: a temporary "
                        "folder, removed at the end)")
    parser.add_argument("--commit", help="the commit the records name (default: this checkout's; the lent machine "
                                         "gets a copy of the working tree without its git history: pass "
                                         "`git rev-parse HEAD` from here)")
    add_record_argument(parser, "gpu")
    args = parser.parse_args(argv)
    planned = TINY_PLANNED_SECONDS if args.tiny else PLANNED_SECONDS
    try:
        if args.budget <= 0:
            raise BudgetError(f"--budget {args.budget:g}: give a positive number of seconds, e.g. "
                              f"{DEFAULT_BUDGET_SECONDS}.")
        device = pick_device(args.device)
        if device.type == "cpu" and not args.tiny:
            raise BudgetError("no CUDA device: the full sizes (a 7B model, 1,024-token training) are for the lent "
                              "GPU machine; pass --tiny to run the same code at tiny sizes here.")
        parts, dropped = plan_parts(args.parts, args.budget, planned)
        if "recipe" in parts and not (args.shared_data / "benchmarks").is_dir():
            raise BudgetError(f"--shared-data {args.shared_data}: no benchmarks/ folder there; the recipe part "
                              "evaluates on it. Point --shared-data at the data folder, or leave out the recipe "
                              "part (--parts encode train serving).")
    except BudgetError as error:
        parser.exit(2, f"error: {error}\n")
    commit = args.commit or commit_line()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="c2llm-gpu-") if args.work_dir is None else nullcontext(
            args.work_dir) as work:  # fmt: skip
        work_dir = Path(work)
        work_dir.mkdir(parents=True, exist_ok=True)
        settings = Settings(device=device, tiny=args.tiny, record_dir=args.record_dir,
                            shared_data=args.shared_data.resolve(), work_dir=work_dir,
                            deadline=started + args.budget, planned=planned)
        summary = [f"# python -m benchmarks.gpu {shlex.join(sys.argv[1:] if argv is None else argv)}",
                   hardware_line(), f"budget {args.budget:g} s; parts run: {', '.join(parts)}"
                   + (f"; dropped to fit the budget: {', '.join(dropped)}" if dropped else "")]
        records = {}
        for part in parts:
            loads = [load_line(f"{part} start")]
            if settings.seconds_left() < planned[part] / 2:  # less than half its planned time: it would be cut
                metrics = {"skipped": f"{settings.seconds_left():.0f} s left of the budget, {planned[part]} planned"}
            else:
                part_started = time.monotonic()
                try:
                    metrics = RUNNERS[part](settings)
                except Exception as error:  # one part's failure must not cost the other parts' figures
                    metrics = {"error": f"{type(error).__name__}: {str(error)[:500]}"}
                metrics["seconds"] = time.monotonic() - part_started
            metrics.update(device=str(device), tiny=args.tiny)
            loads.append(load_line(f"{part} end"))
            records[part] = write_record(f"{args.record_name}_{part}", metrics, loads, args.record_dir,
                                         argv=[sys.argv[0], *(sys.argv[1:] if argv is None else argv)],
                                         commit=commit)
            summary += summary_lines(part, metrics)
        for part in dropped:
            summary.append(f"- {part}: dropped (budget)")
        summary.append(f"total {time.monotonic() - started:.0f} s; records: "
                       + ", ".join(str(path) for path in records.values()))
    print("\n".join(summary))
    return 0


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from benchmarks.tables import SET_NAMES, markdown_table, number  # noqa: E402


# table name -> (the records it reads, in the order the function takes them; the function)
def mib(value: float | None) -> str:
    """A peak-memory figure of the GPU benchmark; None where the device reports none (a CPU run)."""
    return "-" if value is None else f"{value:.0f}"


def gpu_encode(record: dict) -> str:
    """python -m benchmarks.gpu, part encode: ours against the published approach at each shape and sweep point."""
    rows = []
    for shape, figures in record["metrics"]["shapes"].items():
        for point in figures["sweep"]:
            cells = []
            for name in ("ours", "published_approach"):
                run = point.get(name, {})
                cells += ([number(run["tokens_per_s"], 0), mib(run["peak_mib"])] if "tokens_per_s" in run else
                          ["out of memory" if "out_of_memory" in run else point.get("skipped", "-"), "-"])
            ours, published = point.get("ours", {}), point.get("published_approach", {})
            ratio = (f"{ours['tokens_per_s'] / published['tokens_per_s']:.2f}x"
                     if "tokens_per_s" in ours and "tokens_per_s" in published else "-")
            rows.append([shape, str(point["batch"]), str(point["length"]), *cells, ratio])
    return markdown_table(["shape", "batch", "tokens per text", "ours tokens/s", "ours peak MiB",
                           "published tokens/s", "published peak MiB", "ours vs published"], rows, "lrrrrrrr")


def gpu_attention(record: dict) -> str:
    """python -m benchmarks.gpu, part encode: the attention kernel each SDPA backend (and flash-attn 2) ran, and
    the lowest cosine of its embeddings to eager attention's on a padded batch."""
    rows = []
    for shape, figures in record["metrics"]["shapes"].items():
        for backend, result in figures["attention"]["backends"].items():
            rows.append([shape, backend, ", ".join(result["kernels"]) if result["ran"] else "did not run",
                         f"{result['min_cosine_vs_eager']:.5f}" if result["ran"] else result["reason"]])
    return markdown_table(["shape", "backend asked", "kernel that ran", "min cosine to eager / why not"], rows,
                          "llll")


def gpu_train(record: dict) -> str:
    """python -m benchmarks.gpu, part train: optimizer steps per setup, real tokens/s, memory and MFU."""
    metrics = record["metrics"]
    rows = []
    for setup in metrics["setups"]:
        switches = [setup["mode"], "on" if setup["gradient_checkpointing"] else "off",
                    "on" if setup["packing"] else "off"]
        if "tokens_per_s" not in setup:
            rows.append([*switches, "out of memory" if "out_of_memory" in setup else setup.get("skipped", "-"),
                         "-", "-", "-"])
            continue
        rows.append([*switches, number(setup["tokens_per_s"], 0), number(setup["step_seconds"], 3),
                     mib(setup["peak_mib"]), f"{setup['mfu']:.1%}"])
    return markdown_table(["training", "gradient checkpointing", "packing", "tokens/s", "step s", "peak MiB",
                           "MFU"], rows, "lllrrrr")


def gpu_serving(record: dict) -> str:
    """python -m benchmarks.gpu, part serving: the server per concurrency level against in-process encode."""
    rows = [[str(level["concurrency"]), str(level["requests"]), str(level["errors"]), f"{level['p50_s'] * 1000:.0f}",
             f"{level['p99_s'] * 1000:.0f}", number(level["texts_per_s"], 1), number(level["vs_in_process"], 2)]
            for level in record["metrics"]["levels"]]
    return markdown_table(["concurrency", "requests", "errors", "p50 ms", "p99 ms", "texts/s", "x in-process"],
                          rows, "rrrrrrr")


def gpu_recipe(record: dict) -> str:
    """python -m benchmarks.gpu, part recipe: the recipe and each ablation run, nDCG@10 per benchmark."""
    metrics = record["metrics"]
    runs = {"recipe": metrics.get("recipe_scores", {}), **metrics.get("ablation_scores", {})}
    benchmarks = sorted({name for scores in runs.values() for name in scores})
    stops = metrics.get("ablation_stops", {})
    rows = [[run, *(number(scores[name]) if name in scores else "-" for name in benchmarks),
             str(stops.get(run, "-")) if run != "recipe" else "-"] for run, scores in runs.items()]
    return markdown_table(["run", *(f"{SET_NAMES.get(name, name)} nDCG@10" for name in benchmarks),
                           "stopped at step"], rows, "l" + "r" * (len(benchmarks) + 1))


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "gpu_tiny_encode": (("gpu_tiny_encode",), gpu_encode),
    "gpu_tiny_attention": (("gpu_tiny_encode",), gpu_attention),
    "gpu_tiny_train": (("gpu_tiny_train",), gpu_train),
    "gpu_tiny_recipe": (("gpu_tiny_recipe",), gpu_recipe),
    "gpu_tiny_serving": (("gpu_tiny_serving",), gpu_serving),
}


if __name__ == "__main__":
    sys.exit(main())
