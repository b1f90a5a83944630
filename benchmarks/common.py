"""Shared parts of the speed benchmarks: real-code inputs, the random C2LLM-0.5B folder, memory and FLOP meters.

- `code_corpus`: functions and docstrings from the Python standard library and installed packages (via `ast`),
  with the document / query prompts the model uses; their real length skew is kept.
- `write_random_05b_folder`: the C2LLM-0.5B shape with random weights, in the release layout (no download).
- `make_resident`: weights copied from the file mapping into process memory, for exact RSS baselines.
- `WorkingMemory`: peak resident memory of this process above what it held before a block (weights included
  in the baseline), from the kernel's own high-water mark.
- `matmul_peak`: the matmul ceiling of this CPU for a dtype, on the model's own MLP shape.
- `CpuShare`: how much of its cores a run actually got (other jobs share this machine).
- `write_record`, `commit_line`, `load_line`, `hardware_line`, `RESULTS_DIR`: the project's one record writer and its
  parts (c2llm_plumbing.records), taken from here with the rest of a benchmark's toolkit: a run's figures as one JSON
  record in `benchmarks/results/`, from which `python -m benchmarks.render` writes the tables of the docs.
"""

import argparse
import ctypes
import gc
import os
import platform
import random
import re
import sys
import sysconfig
import threading
import time
from pathlib import Path

import torch
import torch.nn.functional as F

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/<script>.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from c2llm_data.prompts import DOCUMENT_PROMPT, TASK_INSTRUCTIONS
from c2llm_plumbing.arguments import share
from c2llm_plumbing.records import (  # noqa: F401 (the record writer and its parts, for every benchmark)
    RESULTS_DIR, commit_line, hardware_line, load_line, portable_arguments, write_record,
)
from train.docstrings import python_functions

QUERY_PROMPT = TASK_INSTRUCTIONS["CodeSearchNetRetrieval"] + "\n"  # the "query" prompt of the model
MAX_SOURCE_BYTES = 200_000  # skip huge generated modules: parsing them is slow and their functions are not typical
FUNCTIONS_PER_FILE = 2  # spread the sample over many files
MIB = 2**20


def _candidate_files(seed: int) -> list[Path]:
    """Python files of the stdlib and site-packages (tests excluded), in a seeded random order."""
    roots = {Path(sysconfig.get_paths()[key]) for key in ("stdlib", "purelib")}
    files = sorted(
        path for root in roots for path in root.rglob("*.py")
        if "test" not in path.as_posix().lower() and path.stat().st_size <= MAX_SOURCE_BYTES
    )
    random.Random(seed).shuffle(files)
    return files


def function_samples(count: int, seed: int = 0) -> list[tuple[str, str | None]]:
    """`count` (source, docstring summary or None) pairs of functions, sampled across files."""
    samples = []
    for path in _candidate_files(seed):
        try:
            functions = list(python_functions(path.read_text(encoding="utf-8")))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for function in random.Random(f"{seed}:{path.name}").sample(functions, min(FUNCTIONS_PER_FILE, len(functions))):
            if function.code:
                samples.append((function.code, function.summary))
        if len(samples) >= count:
            return samples[:count]
    raise RuntimeError(f"Found only {len(samples)} functions in the installed Python sources; {count} needed.")


def code_corpus(num_texts: int, seed: int = 0) -> list[str]:
    """About 3/4 functions (document prompt) and 1/4 docstrings (query prompt), shuffled: real code, real skew."""
    num_queries = num_texts // 4
    samples = function_samples(2 * num_texts, seed)  # about 1 function in 3 has a docstring
    documents = [DOCUMENT_PROMPT + code for code, _ in samples[: num_texts - num_queries]]
    queries = [QUERY_PROMPT + summary for _, summary in samples if summary][:num_queries]
    texts = documents + queries
    random.Random(seed).shuffle(texts)
    return texts


def training_pairs(count: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """`count` (query, positive) pairs: a function's docstring summary and its code, with the model's prompts."""
    pairs = [(summary, code) for code, summary in function_samples(4 * count, seed) if summary][:count]
    return [QUERY_PROMPT + query for query, _ in pairs], [DOCUMENT_PROMPT + code for _, code in pairs]


def write_random_05b_folder(output_dir: Path, seed: int = 0) -> Path:
    """The real C2LLM-0.5B shape (`train.release.C2LLM_05B_CONFIG`) with random float32 weights, release layout."""
    from configuration_c2llm import C2LLMConfig
    from modeling_c2llm import C2LLMModel
    from train.release import C2LLM_05B_CONFIG, write_release_folder
    from train.tokenizer import qwen25_tokenizer_dir

    torch.manual_seed(seed)
    model = C2LLMModel(C2LLMConfig(**{**C2LLM_05B_CONFIG, "torch_dtype": "float32"})).eval()
    return write_release_folder(model, output_dir, tokenizer_dir=qwen25_tokenizer_dir())


def make_resident(model: torch.nn.Module) -> None:
    """Copy a model's weights into process memory, in place.

    transformers maps float32 safetensors weights straight from the file: such pages join the RSS only when first
    touched, and the kernel may drop clean file pages and read them again later, which would look like working
    memory. With resident weights the RSS before a run includes all of them and the measured peak is exact.
    """
    for parameter in model.parameters():
        parameter.data = parameter.data.clone()


def dtype_kwargs(dtype: torch.dtype) -> dict:
    """`from_pretrained` dtype argument under transformers 5 (`dtype`) and 4.x (`torch_dtype`)."""
    import transformers

    return {"dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype": dtype}


def wants_bf16(choice: str) -> bool:
    """The benchmarks' `--bf16 auto|yes|no`: bf16 runs for `yes`, and for `auto` only where this CPU computes
    bfloat16 natively (elsewhere it is emulated, slower than fp32, and not the dtype C2LLM loads by default)."""
    from modeling_c2llm import preferred_dtype

    return choice == "yes" or (choice == "auto" and preferred_dtype("cpu") == torch.bfloat16)


def rss_bytes() -> int:
    """Resident memory of this process now."""
    status = Path("/proc/self/status")
    if status.exists():
        return int(re.search(r"VmRSS:\s+(\d+) kB", status.read_text()).group(1)) * 1024
    import psutil

    return psutil.Process().memory_info().rss


def settled_rss_bytes() -> int:
    """Resident memory after garbage collection and, on Linux, after handing freed heap pages back to the OS."""
    gc.collect()
    if platform.system() == "Linux":
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return rss_bytes()


class WorkingMemory:
    """`with WorkingMemory() as meter: ...` then `meter.peak_mb`: peak RSS above the RSS at entry.

    torch's CPU allocator is not visible to tracemalloc, so we measure the process. On Linux, freed heap memory
    is first handed back to the OS (glibc `malloc_trim`, so an earlier run's cached pages do not hide this
    run's), then the kernel's peak-RSS counter is reset (`/proc/self/clear_refs` = 5) and read back as VmHWM:
    an exact high-water mark, no sampling. Elsewhere RSS is sampled every 2 ms in a thread.
    """

    def __init__(self):
        self._use_hwm = platform.system() == "Linux" and os.access("/proc/self/clear_refs", os.W_OK)

    def __enter__(self) -> "WorkingMemory":
        self.baseline = settled_rss_bytes()
        if self._use_hwm:
            Path("/proc/self/clear_refs").write_text("5")
        else:
            self._sampled, self._stop = self.baseline, threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            self._sampled = max(self._sampled, rss_bytes())

    def __exit__(self, *exc) -> None:
        if self._use_hwm:
            status = Path("/proc/self/status").read_text()
            peak = int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024
        else:
            self._stop.set()
            self._thread.join()
            peak = self._sampled
        self.peak_mb = max(0, peak - self.baseline) / MIB

    @property
    def method(self) -> str:
        return "kernel VmHWM after malloc_trim" if self._use_hwm else "psutil RSS sampled every 2 ms"


class CpuShare:
    """`with CpuShare() as share: ...`: wall `seconds`, `cpu_seconds` this process got (all threads), and `value`
    = cpu_seconds / (seconds x torch threads): 1.0 means the run had its cores to itself."""

    def __enter__(self) -> "CpuShare":
        self._cpu, self._wall = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self._wall
        self.cpu_seconds = time.process_time() - self._cpu
        self.value = self.cpu_seconds / (self.seconds * torch.get_num_threads())


def causal_attention_flops(sequence_lengths: list[int], config) -> int:
    """FLOPs of a Qwen2 backbone's causal attention (scores and weighted values: 2 x 2 x width per token pair,
    n(n+1)/2 pairs in a sequence of n tokens, every layer); the projections around it are matmuls counted apart."""
    width = config.num_attention_heads * (config.hidden_size // config.num_attention_heads)
    return sum(2 * config.num_hidden_layers * width * n * (n + 1) for n in sequence_lengths)


def matmul_peak(dtype: torch.dtype, seconds: float = 1.0, tokens: int = 2048, in_features: int = 896,
                out_features: int = 4864) -> tuple[float, float]:
    """The matmul ceiling: (FLOP per wall second, FLOP per CPU second) of `F.linear` (tokens x in) @ (out x in)^T,
    the model's MLP up-projection (its largest matmul), repeated for about `seconds`.

    A mean over a second rather than a best-of-few: on a shared machine it then sees the same kind of contention
    as the run it is compared with; the CPU-second rate does not depend on contention at all.
    """
    inputs = torch.randn(tokens, in_features, dtype=dtype)
    weight = torch.randn(out_features, in_features, dtype=dtype)
    repeats = 0
    with torch.inference_mode():
        F.linear(inputs, weight)  # warm-up: oneDNN / MKL kernel selection
        with CpuShare() as cpu:
            while time.perf_counter() - cpu._wall < seconds:
                F.linear(inputs, weight)
                repeats += 1
    flops = 2 * tokens * in_features * out_features * repeats
    return flops / cpu.seconds, flops / cpu.cpu_seconds


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def add_record_argument(parser: argparse.ArgumentParser, name: str) -> None:
    """`--record-name` and `--record-dir`: where `write_record` puts the run's record (default: RESULTS_DIR/NAME.json,
    the record the docs render from)."""
    parser.add_argument("--record-name", default=name, metavar="NAME",
                        help=f"the run's record is DIR/NAME.json (default: {name})")
    parser.add_argument("--record-dir", type=Path, default=RESULTS_DIR, metavar="DIR",
                        help="folder of the run's record (default: benchmarks/results, which the docs render from: "
                        "`python -m benchmarks.render`); give another for trial runs")


def add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    """`--half` (which half of a benchmark's fixed dev/test split the run covers) and `--used-to-choose` (what the
    run chose, if anything): a record used to choose a constant or a data mix says so, and only a test-half record
    that chose nothing reports a result."""
    parser.add_argument("--half", choices=("dev", "test", "both"), default="both",
                        help="the half of the fixed dev/test split to run: tune on dev, report on test (default: "
                             "both, each scored separately, test first)")
    add_used_to_choose_argument(parser)


def add_used_to_choose_argument(parser: argparse.ArgumentParser) -> None:
    """`--used-to-choose`: what the run chose, written in its record (a benchmark that always scores both halves
    takes this one alone, and chooses by its dev half's figures)."""
    parser.add_argument("--used-to-choose", metavar="TEXT",
                        help="what this run was used to choose (a constant, a data mix), written in its record "
                             "(default: nothing, a report)")


def selection_fields(args: argparse.Namespace) -> dict:
    """The record's fields for `add_selection_arguments`: the half run and what the run chose (None: nothing)."""
    return {"half": args.half, "used_to_choose": args.used_to_choose}


def add_dense_weight_argument(parser: argparse.ArgumentParser) -> None:
    """`--dense-weight W` (repeatable): the codesearch benchmarks also rank hybrid with dense's share of the fused
    score W (codesearch.ranking.fuse), each weight from one embedding of each query: the fusion sweep."""
    parser.add_argument("--dense-weight", action="append", type=share, metavar="W",
                        help="also rank hybrid with dense's share of the fused score W and BM25's 1 - W "
                             "(repeatable): the fusion sweep (codesearch/reports/semble.md, Score fusion)")


def dense_weight_labels(weights: list[float] | None) -> dict[str, float]:
    """--dense-weight's rankings as the records name them: label -> hybrid's dense share."""
    return {f"hybrid, dense weight {weight:g}": weight for weight in weights or []}
