"""Vector stores for the codesearch index, measured at codesearch scale: build, load, query time and disk.

    python benchmarks/codesearch_store.py [--n 100000] [--dim 384] [--queries 20] [--stores NAME ...]

Random unit vectors (float32) stand in for piece embeddings: every store here is exact or close to it, so
recall does not depend on the data, only time and disk do. Contenders:

- `sqlite-blob`: one float32 BLOB per row in SQLite (the rows the index keeps anyway), loaded into one numpy
  matrix, exact search by matmul.
- `npy`: a `.npy` matrix beside the database (np.load), exact search by matmul.
- `usearch-exact` / `usearch-hnsw`: usearch's saved index (`exact=True` brute force, or its default HNSW graph).
- `faiss-flat`: faiss IndexFlatIP written with faiss.write_index.

Prints a Markdown table of medians and writes the record benchmarks/results/codesearch_store.json. Missing
optional packages are reported and skipped.
"""

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/codesearch_store.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.common import add_record_argument, load_line, write_record  # noqa: E402


def timed(fn, repeat=1):
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def disk(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def top_k(matrix, query, k=10):
    scores = matrix @ query
    index = np.argpartition(-scores, k)[:k]
    return index[np.argsort(-scores[index])]


def bench_sqlite(folder, vectors, queries):
    path = folder / "store.sqlite"

    def build():
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE pieces (id INTEGER PRIMARY KEY, vector BLOB)")
        db.executemany("INSERT INTO pieces VALUES (?, ?)", ((i, v.tobytes()) for i, v in enumerate(vectors)))
        db.commit()
        db.close()

    def load():
        db = sqlite3.connect(path)
        blob = b"".join(row[0] for row in db.execute("SELECT vector FROM pieces ORDER BY id"))
        db.close()
        return np.frombuffer(blob, dtype=np.float32).reshape(-1, vectors.shape[1])

    build_s, _ = timed(build)
    load_s, matrix = timed(load, 3)
    query_s, _ = timed(lambda: [top_k(matrix, q) for q in queries], 3)
    return build_s, load_s, query_s / len(queries), disk(path)


def bench_npy(folder, vectors, queries):
    path = folder / "vectors.npy"
    build_s, _ = timed(lambda: np.save(path, vectors))
    load_s, matrix = timed(lambda: np.load(path), 3)
    query_s, _ = timed(lambda: [top_k(matrix, q) for q in queries], 3)
    return build_s, load_s, query_s / len(queries), disk(path)


def bench_usearch(folder, vectors, queries, exact):
    from usearch.index import Index

    path = folder / f"usearch-{exact}.usearch"

    def build():
        index = Index(ndim=vectors.shape[1], metric="ip", dtype="f32")
        index.add(np.arange(len(vectors)), vectors)
        index.save(str(path))

    def load():
        index = Index(ndim=vectors.shape[1], metric="ip", dtype="f32")
        index.load(str(path))
        return index

    if exact:  # brute force over the stored vectors: no graph needed, only the vectors
        build_s, _ = timed(lambda: np.save(folder / "usearch-exact.npy", vectors))
        path = folder / "usearch-exact.npy"
        load_s, matrix = timed(lambda: np.load(path), 3)
        from usearch.index import search

        query_s, _ = timed(lambda: [search(matrix, q, 10, metric="ip", exact=True) for q in queries], 3)
        return build_s, load_s, query_s / len(queries), disk(path)
    build_s, _ = timed(build)
    load_s, index = timed(load, 3)
    query_s, _ = timed(lambda: [index.search(q, 10) for q in queries], 3)
    return build_s, load_s, query_s / len(queries), disk(path)


def bench_faiss(folder, vectors, queries):
    import faiss

    path = folder / "faiss.index"

    def build():
        index = faiss.IndexFlatIP(vectors.shape[1])
        index.add(vectors)
        faiss.write_index(index, str(path))

    build_s, _ = timed(build)
    load_s, index = timed(lambda: faiss.read_index(str(path)), 3)
    query_s, _ = timed(lambda: [index.search(q[None], 10) for q in queries], 3)
    return build_s, load_s, query_s / len(queries), disk(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="stored vectors (default: 100000)")
    parser.add_argument("--dim", type=int, default=384, help="vector width (default: 384, all-MiniLM-L6-v2)")
    parser.add_argument("--queries", type=int, default=20, help="queries timed per store (default: 20)")
    parser.add_argument("--stores", nargs="*", help="only these stores (default: all)")
    add_record_argument(parser, "codesearch_store")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((args.n, args.dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = vectors[rng.choice(args.n, args.queries, replace=False)]
    contenders = {
        "sqlite-blob": bench_sqlite,
        "npy": bench_npy,
        "usearch-exact": lambda f, v, q: bench_usearch(f, v, q, exact=True),
        "usearch-hnsw": lambda f, v, q: bench_usearch(f, v, q, exact=False),
        "faiss-flat": bench_faiss,
    }
    if args.stores:
        contenders = {name: bench for name, bench in contenders.items() if name in args.stores}
    print(f"{args.n} x {args.dim} float32, {args.queries} queries, top-10; {os.cpu_count()} cores (shared)\n")
    print("| store | build s | load s | query ms | disk MB |")
    print("| --- | ---: | ---: | ---: | ---: |")
    loads, figures = [load_line("start")], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, bench in contenders.items():
            try:
                build_s, load_s, query_s, size = bench(Path(tmp), vectors, queries)
            except ImportError as error:
                print(f"| {name} | not installed ({error.name}) | | | |")
                figures[name] = {"not_installed": error.name}
                continue
            figures[name] = {"build_s": build_s, "load_s": load_s, "query_s": query_s, "disk_bytes": size}
            print(f"| {name} | {build_s:.2f} | {load_s:.3f} | {query_s * 1000:.2f} | {size / 2**20:.0f} |", flush=True)
    loads.append(load_line("end"))
    figures = {"vectors": args.n, "dim": args.dim, "queries": args.queries, "stores": figures}
    print(f"record: {write_record(args.record_name, figures, loads, args.record_dir)}")


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from benchmarks.tables import markdown_table, number  # noqa: E402


# codesearch_store.py's contenders, as the codesearch page names them
STORES = {"sqlite-blob": "sqlite-blob (one BLOB per row, read into one matrix)",
          "npy": "npy (one matrix file, `np.load`)",
          "usearch-exact": "usearch exact (same matrix file, `usearch.index.search(exact=True)`)",
          "usearch-hnsw": "usearch HNSW", "faiss-flat": "faiss IndexFlatIP (`faiss.write_index`/`read_index`)"}


def codesearch_store(record: dict) -> str:
    """Each vector store's build, load and query time and its size on disk."""
    rows = []
    for store, figures in record["metrics"]["stores"].items():
        if "not_installed" in figures:
            rows.append([store, f"not installed ({figures['not_installed']})", "", "", ""])
            continue
        rows.append([STORES.get(store, store), number(figures["build_s"], 2), number(figures["load_s"]),
                     number(figures["query_s"] * 1000, 2), f"{figures['disk_bytes'] / 2**20:.0f}"])
    return markdown_table(["store", "build s", "load s", "query ms", "disk MB"], rows)


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "codesearch_store": (("codesearch_store",), codesearch_store),
}


if __name__ == "__main__":
    main()
