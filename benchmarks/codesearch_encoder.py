"""CPU time of codesearch's ONNX encoder: attention traced eager (the export's default) against as the model loads it.

    python benchmarks/codesearch_encoder.py [--package pip] [--pieces 200] [--rounds 7] [--model default]

The model is exported twice into a temporary folder (codesearch.encoders.export_onnx, `attention` "eager" and
"model": SDPA for the default model, which the exporter writes as Where and IsNaN over every attention score). The
package's files are chunked as the index chunks them, and `--pieces` of the pieces (evenly spaced over them) are
embedded as documents by each export in turn, in a shuffled order each round, with ONNX Runtime's own threads;
CPU seconds (user + system of this process) per 100 pieces, median over rounds, the ratio eager / model within each
round (then its median), and the smallest cosine between the two exports' vectors. Writes a record
(benchmarks.common.write_record).
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/codesearch_encoder.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402

from benchmarks.codesearch_quality import package_folder  # noqa: E402
from benchmarks.common import add_record_argument, load_line, median, write_record  # noqa: E402
from codesearch.chunking import split_file  # noqa: E402
from codesearch.encoders import EXPORT_ATTENTION, OnnxEmbedder, export_onnx  # noqa: E402
from codesearch.files import select_files  # noqa: E402
from c2llm_plumbing.models import load_model, resolve_model  # noqa: E402
from codesearch.searcher import DEFAULT_MAX_SEQ_LENGTH, IndexOptions  # noqa: E402


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # ONNX Runtime's threads included
    return usage.ru_utime + usage.ru_stime


def package_pieces(folder: Path, count: int) -> list[str]:
    """`count` piece texts of the folder's code, evenly spaced over its pieces in path order."""
    texts = []
    for path in select_files(folder).files:
        texts.extend(piece.text for piece in split_file(path, (folder / path).read_text(errors="replace")))
    if len(texts) < count:
        raise SystemExit(f"{folder} has {len(texts)} pieces, fewer than --pieces {count}")
    return [texts[round(i * len(texts) / count)] for i in range(count)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", default="pip", help="an installed package whose code is embedded (default pip)")
    parser.add_argument("--pieces", type=int, default=200, help="pieces embedded per round and export (default 200)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds, each export once per round (default 7)")
    parser.add_argument("--model", default="default", help="'default' or a sentence-transformers folder")
    add_record_argument(parser, "codesearch_encoder")
    args = parser.parse_args(argv)
    if args.pieces < 1 or args.rounds < 1:
        parser.error("--pieces and --rounds must be at least 1")
    loads = [load_line("start")]
    texts = package_pieces(package_folder(args.package), args.pieces)
    batch_size, max_seq_length = IndexOptions.batch_size, DEFAULT_MAX_SEQ_LENGTH
    model = load_model(resolve_model(args.model), None)  # each export restores the attention it switched
    with tempfile.TemporaryDirectory(prefix="codesearch-encoder-") as temporary:
        embedders, parity = {}, {}
        for attention in EXPORT_ATTENTION:
            folder = Path(temporary) / attention
            parity[attention] = export_onnx(model, folder, batch_size, attention=attention)
            embedders[attention] = OnnxEmbedder(folder, batch_size, max_seq_length)
        tokens = sum(min(len(encoding.ids), max_seq_length)
                     for encoding in embedders["eager"].tokenizer.encode_batch(texts))
        vectors = {name: embedder.encode_document(texts) for name, embedder in embedders.items()}  # warm-up too
        seconds = {name: [] for name in embedders}
        order = list(embedders)
        shuffle = random.Random(0).shuffle
        for _ in range(args.rounds):
            shuffle(order)
            for name in order:
                started = cpu_seconds()
                embedders[name].encode_document(texts)
                seconds[name].append((cpu_seconds() - started) * 100 / len(texts))
    loads.append(load_line("end"))
    cosine = float(np.min(np.sum(vectors["eager"] * vectors["model"], axis=1)))
    ratios = [eager / model for eager, model in zip(seconds["eager"], seconds["model"])]
    metrics = {"package": args.package, "pieces": len(texts), "tokens": tokens, "rounds": args.rounds,
               "batch_size": batch_size, "max_seq_length": max_seq_length,
               "cpu_s_per_100_pieces": {name: median(values) for name, values in seconds.items()},
               "cpu_s_per_100_pieces_runs": seconds, "ratio_eager_to_model": median(ratios),
               "parity_cosine_to_torch": parity, "min_cosine_between_exports": cosine}
    print(f"{args.package}: {len(texts)} pieces, {tokens} tokens (max {max_seq_length}), batch {batch_size}, "
          f"{args.rounds} rounds; {loads[0]}")
    for name in embedders:
        print(f"  attention {name:5}: {metrics['cpu_s_per_100_pieces'][name]:.2f} CPU-s per 100 pieces (median; "
              f"runs {', '.join(f'{value:.2f}' for value in seconds[name])}); cosine to torch {parity[name]:.7f}")
    print(f"  eager / model: {metrics['ratio_eager_to_model']:.3f} (median of per-round ratios); smallest cosine "
          f"between the exports' vectors {cosine:.7f}")
    print(f"record: {write_record(args.record_name, metrics, loads, args.record_dir)}")


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from benchmarks.tables import markdown_table, number  # noqa: E402


def codesearch_encoder(record: dict) -> str:
    """CPU seconds per 100 pieces of each ONNX export's attention (median and range over rounds), its cosine to the
    torch model, and the median per-round ratio to the export as the model loads its attention."""
    metrics = record["metrics"]
    rows = []
    for attention, seconds in metrics["cpu_s_per_100_pieces"].items():
        runs = metrics["cpu_s_per_100_pieces_runs"][attention]
        rows.append(["eager (default)" if attention == "eager" else "as the model loads it (SDPA)",
                     number(seconds, 2), f"{min(runs):.2f}-{max(runs):.2f}",
                     number(metrics["parity_cosine_to_torch"][attention], 7),
                     number(metrics["ratio_eager_to_model"]) if attention == "eager" else ""])
    return markdown_table(["attention traced as", "CPU-s per 100 pieces", "range", "cosine to torch",
                           "eager / as loaded"], rows, "lrrrr")


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "codesearch_encoder": (("codesearch_encoder",), codesearch_encoder),
}


if __name__ == "__main__":
    main()
