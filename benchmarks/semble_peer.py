"""semble (MinishLab, PyPI `semble`) answering semble's benchmark, for `codesearch_semble.py --method semble`.

Runs in a Python environment of its own that has semble installed (semble pins its own model2vec, vicinity and
tree-sitter grammars, which this project's lock does not carry):

    python -m venv ~/semble-env && ~/semble-env/bin/pip install semble==0.7.0
    python benchmarks/codesearch_semble.py --method semble --semble-python ~/semble-env/bin/python

Reads a job from stdin, JSON: {"model": a model2vec folder or null, "cache": a folder for semble's cache,
"repos": [{"name", "folder", "queries": [text, ...]}, ...]}. Writes one JSON line per repository to stdout:
{"name", "files": the paths semble indexed, "hits": per query a list of [path, start_line, end_line], best first,
"index_cpu_s", "p50_ms"}; paths relative to "folder". The scoring is the caller's (one metric for every method).

With a model (semble's own, minishlab/potion-code-16M, is on the Hugging Face Hub: download it where there is a
network and pass its folder), semble runs as a user runs it: hybrid, its query-type weight, its ranking. Without
one (offline), semble runs its BM25 path with its whole ranking (file coherence, definition and file-name boosts,
path penalties): the semantic list gets weight 0 (alpha 0.0) and the index is built with a stand-in static model
whose vectors nothing reads. semble's SEMBLE_CACHE_LOCATION is pointed at "cache", so its files stay there.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

BM25_PATH_ALPHA = 0.0  # semble's blend weight of the semantic list: none, so BM25 and the ranking decide
STAND_IN_DIM = 8  # the stand-in model's vector size: any works, its vectors are never read at alpha 0
TOP_K = 10


def stand_in_model(folder: Path) -> Path:
    """A model2vec folder with a one-token vocabulary and constant vectors, so semble can build an index offline."""
    import numpy as np
    from model2vec import StaticModel
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "[PAD]": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    vectors = np.ones((2, STAND_IN_DIM), dtype=np.float32)
    StaticModel(vectors=vectors, tokenizer=tokenizer, normalize=True).save_pretrained(str(folder))
    return folder


def answer(job: dict) -> None:
    os.environ["SEMBLE_CACHE_LOCATION"] = str(Path(job["cache"]).resolve())  # read by semble when it runs
    Path(job["cache"]).mkdir(parents=True, exist_ok=True)
    from semble import SembleIndex, __version__

    with tempfile.TemporaryDirectory(prefix="semble-stand-in-") as scratch:
        model = job["model"] or str(stand_in_model(Path(scratch) / "model"))
        alpha = None if job["model"] else BM25_PATH_ALPHA  # None: semble's own weight per query type
        for repo in job["repos"]:
            cpu = time.process_time()
            index = SembleIndex.from_path(repo["folder"], model_path=model)
            index_cpu = time.process_time() - cpu
            hits, latencies = [], []
            for query in repo["queries"]:
                started = time.perf_counter()
                results = index.search(query, top_k=TOP_K, alpha=alpha)
                latencies.append(time.perf_counter() - started)
                hits.append([[r.chunk.file_path, r.chunk.start_line, r.chunk.end_line] for r in results])
            line = {"name": repo["name"], "semble_version": __version__, "chunks": len(index.chunks),
                    "files": sorted({chunk.file_path for chunk in index.chunks}), "hits": hits,
                    "index_cpu_s": index_cpu, "p50_ms": 1000 * statistics.median(latencies) if latencies else 0.0}
            print(json.dumps(line), flush=True)


def main() -> None:
    try:
        import semble  # noqa: F401
    except ImportError:
        raise SystemExit(f"semble is not installed for {sys.executable}: make an environment for it, e.g. "
                         "python -m venv ~/semble-env && ~/semble-env/bin/pip install semble==0.7.0, and pass "
                         "--semble-python ~/semble-env/bin/python") from None
    answer(json.load(sys.stdin))


if __name__ == "__main__":
    main()
