"""Rows per second of corpus embedding on Ray Data (`python -m serving.embed_corpus`) against in-process `encode`.

    python benchmarks/serving_corpus.py [--model default] [--rows 1200] [--shards 8] [--actors 2]
        [--record-name serving_corpus]

`--rows` code functions are written as JSONL shards (id, text) to a temporary folder and embedded with the
document prompt twice: by `SentenceTransformer.encode` in this process (same batch size and token limit), and by
the job as a subprocess with `--actors` one-CPU actors on a local Ray. Job rows/s is given two ways: over the job's
whole wall time (Ray start and model loads included) and over its Ray Data pipeline as the job reports it (actor
start included). The in-process run comes before and after the job (the machine is shared): the baseline is the
mean. Goal (docs/serving.md): >= 0.7x the in-process rows/s on this machine.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/<script>.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.common import (  # noqa: E402
    add_record_argument, function_samples, hardware_line, load_line, write_record,
)
from c2llm_data.markdown import markdown_table  # noqa: E402
from benchmarks.serving_load import INPUT_TYPE, in_process_texts_per_s  # noqa: E402

REPORTED = re.compile(r"embedded ([\d,]+) rows in ([\d.]+) s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="default", help="'default' or a model folder (default: default)")
    parser.add_argument("--rows", type=int, default=1200, help="(default: 1200)")
    parser.add_argument("--shards", type=int, default=8, help="(default: 8)")
    parser.add_argument("--actors", type=int, default=2, help="actors of one CPU each (default: 2)")
    parser.add_argument("--batch-size", type=int, default=128, help="rows per actor call (default: 128)")
    parser.add_argument("--encode-batch-size", type=int, default=32, help="both sides (default: 32)")
    parser.add_argument("--max-seq-length", type=int, default=256, help="tokens per text, both sides (default: 256)")
    parser.add_argument("--gpus-per-actor", type=float, default=0.0,
                        help="as the job's option; above 0 the in-process baseline runs on the GPU too (default: 0)")
    add_record_argument(parser, "serving_corpus")
    args = parser.parse_args()

    from c2llm_plumbing.models import load_model, resolve_model

    model_dir = resolve_model(args.model)
    texts = [code for code, _ in function_samples(args.rows)]
    model = load_model(model_dir, args.max_seq_length, "cuda" if args.gpus_per_actor > 0 else "cpu")
    model.encode(texts[:8], prompt_name=INPUT_TYPE)  # warm-up
    loads = [load_line("start")]
    before = in_process_texts_per_s(model, texts, args.encode_batch_size)
    with tempfile.TemporaryDirectory(prefix="serving-corpus-") as scratch:
        shards, output = Path(scratch) / "shards", Path(scratch) / "vectors"
        shards.mkdir()
        for shard in range(args.shards):
            rows = [{"id": f"row-{number}", "text": texts[number]} for number in range(shard, len(texts), args.shards)]
            (shards / f"shard-{shard}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        command = [sys.executable, "-m", "serving.embed_corpus", "--model", str(model_dir), "--input", str(shards),
                   "--output", str(output), "--input-type", INPUT_TYPE, "--actors", str(args.actors),
                   "--batch-size", str(args.batch_size), "--encode-batch-size", str(args.encode_batch_size),
                   "--max-seq-length", str(args.max_seq_length), "--gpus-per-actor", str(args.gpus_per_actor)]
        started = time.perf_counter()
        job = subprocess.run(command, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True,
                             text=True, stdin=subprocess.DEVNULL)
        wall = time.perf_counter() - started
    loads.append(load_line("after the job"))
    if job.returncode != 0:
        raise SystemExit(f"the job failed ({job.returncode}):\n{job.stderr[-4000:]}")
    reported = REPORTED.search(job.stderr)
    pipeline = float(reported.group(2))
    after = in_process_texts_per_s(model, texts, args.encode_batch_size)
    baseline = (before + after) / 2
    rows = [["in-process encode (baseline)", f"{baseline:.1f}", "1.00", f"{len(texts) / baseline:.1f}"],
            [f"Ray Data job, {args.actors} actors, whole command", f"{len(texts) / wall:.1f}",
             f"{len(texts) / wall / baseline:.2f}", f"{wall:.1f}"],
            [f"Ray Data job, {args.actors} actors, pipeline", f"{len(texts) / pipeline:.1f}",
             f"{len(texts) / pipeline / baseline:.2f}", f"{pipeline:.1f}"]]
    print(f"python benchmarks/serving_corpus.py {' '.join(sys.argv[1:])}\n{hardware_line()}\n{'; '.join(loads)}\n")
    print(f"model {model_dir}, {len(texts)} rows in {args.shards} JSONL shards, {args.max_seq_length} tokens, "
          f"input_type {INPUT_TYPE}; in-process {before:.1f} rows/s before the job, {after:.1f} after\n")
    print(markdown_table(["run", "rows/s", "x in-process", "seconds"], rows))
    figures = {"model": model_dir.name, "rows": len(texts), "actors": args.actors,
               "in_process_rows_per_s": [before, after], "job_wall_s": wall, "job_pipeline_s": pipeline}
    print(f"record: {write_record(args.record_name, figures, loads, args.record_dir)}")


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from statistics import mean  # noqa: E402

from benchmarks.tables import number  # noqa: E402


def serving_corpus(record: dict) -> str:
    """The corpus job's rows/s against in-process encode."""
    metrics = record["metrics"]
    rows_count, baseline = metrics["rows"], mean(metrics["in_process_rows_per_s"])
    actors = metrics["actors"]
    runs = [(f"Ray Data job, {actors} actors, whole command (Ray start, checks, model loads included)",
             metrics["job_wall_s"]),
            (f"Ray Data job, {actors} actors, pipeline (actor start included)", metrics["job_pipeline_s"])]
    rows = [["in-process `encode` (mean of before and after)", number(baseline, 1), "1.00",
             number(rows_count / baseline, 1)]]
    rows += [[title, number(rows_count / seconds, 1), number(rows_count / seconds / baseline, 2), number(seconds, 1)]
             for title, seconds in runs]
    return markdown_table(["run", "rows/s", "x in-process", "seconds"], rows, "lrrr")


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "serving_corpus": (("serving_corpus",), serving_corpus),
}


if __name__ == "__main__":
    main()
