"""Load test of the embeddings server (`python -m serving`) on the loopback address, against in-process `encode`.

    python benchmarks/serving_load.py [--model default] [--requests 240] [--concurrency 1 8 32]
        [--record-name serving_load]

A server is started on 127.0.0.1 with the model and warmed up with requests at the highest concurrency (its
allocator then has seen the largest batches before memory is first read); then, for each concurrency level,
`--requests` requests (one code function each, `input_type` document, through the `openai` client: base64, its
default) are sent by that many client threads, and the run stops. Reported per level: p50/p99 latency, texts/s,
errors, and the server's resident memory (its processes together) before and after. Baseline:
`SentenceTransformer.encode` of the same texts with the same prompt and batch size in this process, run before and
after each level while the server idles (the machine is shared: a level's baseline is the mean of the two around
it); the ratio is server texts/s over it. A second baseline calls `encode` on `concurrency` consecutive texts at a
time (the batches the server sees), after the server stopped: its ratio and latency spread tell what batching
itself costs from what the server adds.

Goals (docs/serving.md): at concurrency 8 >= 0.8x the in-process texts/s; at concurrency 1, p99 <= 2x p50; zero
errors; memory flat over the run.
"""

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/<script>.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.common import (  # noqa: E402
    add_record_argument, function_samples, hardware_line, load_line, write_record,
)
from c2llm_data.markdown import markdown_table  # noqa: E402

MIB = 2**20
START_SECONDS = 300  # a fresh process imports torch and loads the model on a shared 2-core machine
INPUT_TYPE = "document"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(model: str, arguments: list[str], log: Path) -> tuple[subprocess.Popen, str]:
    """`python -m serving` on a free loopback port, returned once /health answers 200: (process, base URL)."""
    port = free_port()
    command = [sys.executable, "-m", "serving", "--model", model, "--port", str(port), *arguments]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with open(log, "wb") as output:
        process = subprocess.Popen(command, cwd=log.parent, env=env, stdout=output, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
                if response.status == 200:
                    return process, url
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    process.kill()
    raise RuntimeError(f"no healthy server after {START_SECONDS} s:\n{log.read_text()[-4000:]}")


def stop_server(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=120)


def server_rss_mib(process: subprocess.Popen) -> tuple[float, float]:
    """Resident MiB of the server's processes together, and of the largest one (the model worker)."""
    import psutil

    root = psutil.Process(process.pid)
    sizes = [member.memory_info().rss / MIB for member in [root, *root.children(recursive=True)]]
    return sum(sizes), max(sizes)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def load(url: str, served_name: str, texts: list[str], concurrency: int) -> dict:
    """Each text one request, `concurrency` client threads: latencies, wall time and errors."""
    import openai

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=600)

    def one(text: str) -> float | None:
        started = time.perf_counter()
        try:
            client.embeddings.create(model=served_name, input=text, extra_body={"input_type": INPUT_TYPE})
        except openai.OpenAIError:
            return None
        return time.perf_counter() - started

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        outcomes = list(pool.map(one, texts))
    wall = time.perf_counter() - started
    latencies = [outcome for outcome in outcomes if outcome is not None]
    return {"concurrency": concurrency, "requests": len(texts), "errors": len(texts) - len(latencies),
            "wall_s": wall, "texts_per_s": len(texts) / wall, "p50_s": statistics.median(latencies),
            "p99_s": percentile(latencies, 0.99)}


def in_process_texts_per_s(model, texts: list[str], batch_size: int) -> float:
    started = time.perf_counter()
    model.encode(texts, prompt_name=INPUT_TYPE, batch_size=batch_size)
    return len(texts) / (time.perf_counter() - started)


def in_process_calls(model, texts: list[str], per_call: int, batch_size: int) -> dict:
    """`encode` on `per_call` consecutive texts at a time, as the server's batches see them at that concurrency
    (random lengths, so padding): texts/s and the calls' p50/p99 latency. Tells batching costs from server costs."""
    latencies = []
    for start in range(0, len(texts), per_call):
        started = time.perf_counter()
        model.encode(texts[start : start + per_call], prompt_name=INPUT_TYPE, batch_size=batch_size)
        latencies.append(time.perf_counter() - started)
    return {"texts_per_s": len(texts) / sum(latencies), "p50_s": statistics.median(latencies),
            "p99_s": percentile(latencies, 0.99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="default", help="'default' or a model folder (default: default)")
    parser.add_argument("--requests", type=int, default=240, help="requests per concurrency level (default: 240)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32], help="(default: 1 8 32)")
    parser.add_argument("--max-seq-length", type=int, default=256, help="tokens per text, both sides (default: 256)")
    parser.add_argument("--encode-batch-size", type=int, default=32, help="both sides (default: 32)")
    parser.add_argument("--max-padding", type=float, default=0.2, help="the server's (default: 0.2)")
    parser.add_argument("--accelerator", choices=("cpu", "cuda"), default="cpu",
                        help="where the server and the in-process baseline run (default: cpu)")
    add_record_argument(parser, "serving_load")
    args = parser.parse_args()

    from c2llm_plumbing.models import load_model, resolve_model

    model_dir = resolve_model(args.model)
    texts = [code for code, _ in function_samples(args.requests)]
    model = load_model(model_dir, args.max_seq_length, args.accelerator)
    model.encode(texts[:8], prompt_name=INPUT_TYPE)  # warm-up
    loads = [load_line("start")]
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"serving-load-{os.getpid()}.log"
    server_options = ["--accelerator", args.accelerator, "--max-seq-length", str(args.max_seq_length),
                      "--encode-batch-size", str(args.encode_batch_size),
                      "--max-batch-size", str(max(args.concurrency)), "--max-padding", str(args.max_padding),
                      "--max-input-chars", str(max(map(len, texts)))]  # every sampled function, whole
    started = time.perf_counter()
    process, url = start_server(str(model_dir), server_options, log)
    start_seconds = time.perf_counter() - started
    served_name = model_dir.name
    try:
        load(url, served_name, texts[: 2 * max(args.concurrency)], max(args.concurrency))  # warm-up
        levels = []
        # The machine is shared: each level's baseline is in-process encode just before and just after it (the
        # server idle meanwhile), so a change of load between levels does not skew their ratios.
        baselines = [in_process_texts_per_s(model, texts, args.encode_batch_size)]
        for concurrency in args.concurrency:
            before, worker_before = server_rss_mib(process)
            figures = load(url, served_name, texts, concurrency)
            after, worker_after = server_rss_mib(process)
            baselines.append(in_process_texts_per_s(model, texts, args.encode_batch_size))
            figures.update(rss_before_mib=before, rss_after_mib=after, worker_rss_before_mib=worker_before,
                           worker_rss_after_mib=worker_after, in_process_texts_per_s=baselines[-2:])
            levels.append(figures)
            loads.append(load_line(f"concurrency {concurrency}"))
    finally:
        exit_code = stop_server(process)
    for level in levels:
        level["in_process_same_calls"] = in_process_calls(model, texts, level["concurrency"], args.encode_batch_size)
    rows = [[level["concurrency"], level["requests"], level["errors"], f"{level['p50_s'] * 1000:.0f}",
             f"{level['p99_s'] * 1000:.0f}", f"{level['p99_s'] / level['p50_s']:.2f}", f"{level['texts_per_s']:.1f}",
             f"{level['texts_per_s'] / statistics.fmean(level['in_process_texts_per_s']):.2f}",
             f"{level['texts_per_s'] / level['in_process_same_calls']['texts_per_s']:.2f}",
             f"{level['in_process_same_calls']['p99_s'] / level['in_process_same_calls']['p50_s']:.2f}",
             f"{level['rss_before_mib']:.0f} / {level['rss_after_mib']:.0f}",
             f"{level['worker_rss_before_mib']:.0f} / {level['worker_rss_after_mib']:.0f}"] for level in levels]
    print(f"python benchmarks/serving_load.py {' '.join(sys.argv[1:])}\n{hardware_line()}\n{'; '.join(loads)}\n")
    print(f"model {model_dir}, {len(texts)} texts (one per request), {args.max_seq_length} tokens, input_type "
          f"{INPUT_TYPE}; in-process encode before and after each level: "
          f"{', '.join(f'{figure:.1f}' for figure in baselines)} texts/s (a level's baseline: the mean of its "
          f"two); server healthy {start_seconds:.1f} s after its start; exit "
          f"code after SIGTERM: {exit_code}\n")
    print(markdown_table(["concurrency", "requests", "errors", "p50 ms", "p99 ms", "p99/p50", "texts/s",
                          "x in-process", "x in-process, same calls", "in-process p99/p50, same calls",
                          "server MiB before / after", "model worker MiB before / after"], rows))
    print("\nx in-process: against encode of all texts (batch size as the server's); same calls: against encode of "
          "`concurrency` consecutive texts per call, the batches the server gets at that concurrency")
    figures = {"model": model_dir.name, "texts": len(texts), "levels": levels,
               "in_process_texts_per_s": baselines, "server_start_s": start_seconds,
               "server_exit_code": exit_code}
    print(f"record: {write_record(args.record_name, figures, loads, args.record_dir)}")


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from statistics import mean  # noqa: E402

from benchmarks.tables import number  # noqa: E402


def serving_load(record: dict) -> str:
    """The embeddings server's latency, throughput and memory per concurrency level."""
    metrics = record["metrics"]
    rows = []
    for level in metrics["levels"]:
        # the in-process runs around this level; records of runs with one baseline for all levels carry it above
        baseline = mean(level.get("in_process_texts_per_s", metrics["in_process_texts_per_s"]))
        same_calls = level["in_process_same_calls"]
        rows.append([str(level["concurrency"]), str(level["errors"]), f"{level['p50_s'] * 1000:.0f}",
                     f"{level['p99_s'] * 1000:.0f}", number(level["p99_s"] / level["p50_s"], 2),
                     number(level["texts_per_s"], 1), number(level["texts_per_s"] / baseline, 2),
                     number(level["texts_per_s"] / same_calls["texts_per_s"], 2),
                     f"{level['rss_before_mib']:.0f} / {level['rss_after_mib']:.0f}",
                     f"{level['worker_rss_before_mib']:.0f} / {level['worker_rss_after_mib']:.0f}"])
    return markdown_table(["concurrency", "errors", "p50 ms", "p99 ms", "p99/p50", "texts/s", "x in-process",
                           "x in-process, same calls", "server MiB before / after",
                           "model worker MiB before / after"], rows, "rrrrrrrrrr")


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "serving_load": (("serving_load",), serving_load),
    "serving_load_repeat": (("serving_load_repeat",), serving_load),
}


if __name__ == "__main__":
    main()
