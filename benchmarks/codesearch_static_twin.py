"""The static twin (train/static_twin.py) against the model it was distilled from: quality on semble's dev half, and
CPU seconds to the first answer on a fresh folder.

    python -m train.static_twin --output TWIN                                   # make the twin (~1 CPU-min)
    python benchmarks/codesearch_static_twin.py --twin TWIN --speed-folder FOLDER [--twin OTHER ...]

Quality: `benchmarks/codesearch_semble.py --half dev --ranking dense --ranking hybrid` run for the teacher (`--model`,
default: the bundled model; with `--first-stage 100`: also its first answer, before its index is built) and for each
twin (its folder as codesearch's `--model`: codesearch loads it like any sentence-transformers folder, no change to
codesearch), each in its own work folder under --work-dir (the teacher's indexes may be kept elsewhere:
--teacher-work-dir). Reported: place-level NDCG@10 (the headline) and semble's
file-level NDCG@10, overall and per language, and the twin minus the teacher. The goal (docs/default-model.md): the
twin's hybrid place NDCG@10 no more than QUALITY_GOAL below the teacher's on the dev half.

Speed: FOLDER is copied to a temporary folder and searched as a user runs the command, a new process each time with
a fresh index: CPU seconds (user + system, the process's threads included) until its JSON answer is complete, and for
the whole command. Four ways:
- `teacher`: `python -m codesearch QUERY --path COPY --json` (the default `--first-answer wait`: the whole index first);
- `teacher, first answer fast`: the same with `--first-answer fast` (BM25 over every piece, the model over the best
  100, the index built after the answer);
- `twin, --model`: the default command with `--model TWIN` (codesearch as it is: torch runs the twin's table);
- `twin, table`: codesearch's FolderSearch with `StaticTableEmbedder` injected (this file): the twin's table read with
  safetensors and tokenized with `tokenizers`, no torch imported: what a static backend in codesearch would cost.
The teacher's ONNX export (once per model, in the user's cache) is made before the runs, and so is the twin's failed
export attempt (a StaticEmbedding does not trace), so neither is in a timed run.

The goal: a fresh ~500-file repository answered in SPEED_GOAL_CPU_S CPU-seconds or fewer. Writes one record
(benchmarks.common.write_record); needs ../shared/data/semble-benchmark for the quality part (--data).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/codesearch_static_twin.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))
# The other benchmarks' modules are imported where they are used: benchmarks.common imports torch, which the timed
# table search (TABLE_SEARCH, a child process that imports this module) must not.
from codesearch.first_stage import DEFAULT_CANDIDATES  # noqa: E402

QUALITY_GOAL = 0.03  # the bar: hybrid NDCG@10 within 0.03 of the full model's on the dev half
SPEED_GOAL_CPU_S = 2.0  # the bar: a fresh ~500-file repository answered in at most 2 CPU-seconds
DEFAULT_QUERY = "spawn a task on the runtime"
RANKINGS = ("dense", "hybrid")
QUALITY_LEVELS = ("place", "file")  # METRICS keys: the headline and semble's own
TWIN_WEIGHTS = "model.safetensors"
TWIN_WEIGHTS_KEY = "embedding.weight"  # sentence-transformers' StaticEmbedding state dict
SEMBLE_SCRIPT = REPO_ROOT / "benchmarks" / "codesearch_semble.py"
# the teacher's `--first-answer fast` before its index is built: BM25 over every piece, the teacher over BM25's best
# DEFAULT_CANDIDATES, as codesearch_semble.py --first-stage labels it
FIRST_ANSWER_CANDIDATES = DEFAULT_CANDIDATES
FIRST_ANSWER_LABEL = f"hybrid, first answer (BM25's best {FIRST_ANSWER_CANDIDATES})"
TABLE_SEARCH = ("import sys; from pathlib import Path; from benchmarks.codesearch_static_twin import "
                "search_with_table; search_with_table(*map(Path, sys.argv[1:4]), sys.argv[4])")


class StaticTableEmbedder:
    """A static twin folder's vectors without torch: `tokenizers` splits a text, its vector is the mean of its tokens'
    rows, unit length; the same vectors as SentenceTransformer(folder) (StaticEmbedding, then Normalize). Injected
    into codesearch's FolderSearch (encode_document/encode_query); `max_seq_length` caps the tokens read, as
    codesearch's option does for any model."""

    backend = "static"

    def __init__(self, folder: Path, max_seq_length: int):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        from codesearch.models import fingerprint

        self.table = load_file(str(folder / TWIN_WEIGHTS))[TWIN_WEIGHTS_KEY]  # (vocabulary, d) float32
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_seq_length)
        self.fingerprint = fingerprint(folder)

    def encode_document(self, texts) -> np.ndarray:
        return self._encode(texts)

    def encode_query(self, texts) -> np.ndarray:
        return self._encode(texts)

    def _encode(self, texts) -> np.ndarray:
        from scipy.sparse import csr_matrix

        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        lengths = np.array([len(encoding.ids) for encoding in encodings])
        ids = np.fromiter(itertools.chain.from_iterable(encoding.ids for encoding in encodings), dtype=np.int64)
        # (texts, vocabulary) with 1/length at each token: one sparse product is every text's mean row, without
        # copying a row per token; a text with no token gets a zero vector, as an empty bag in StaticEmbedding
        means = csr_matrix((np.repeat(1.0 / np.maximum(lengths, 1), lengths).astype(np.float32), ids,
                            np.concatenate([[0], np.cumsum(lengths)])), shape=(len(encodings), len(self.table)))
        vectors = np.asarray(means @ self.table, dtype=np.float32)  # (texts, d)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def search_with_table(folder: Path, twin: Path, index_dir: Path, query: str) -> None:
    """One search as the command runs it (build the index, answer), the twin's table injected; prints the hits as
    JSON and whether torch was imported (it must not be)."""
    from codesearch.request import DEFAULT_NON_CODE
    from codesearch.searcher import FolderSearch, IndexOptions

    options = IndexOptions(index_dir=index_dir, quiet=True)
    search = FolderSearch(folder, options, embedder=StaticTableEmbedder(twin, options.max_seq_length))
    search.refresh()
    hits = search.search(query, non_code=DEFAULT_NON_CODE)
    search.close()
    print(json.dumps({"torch_imported": "torch" in sys.modules}), file=sys.stderr)
    print(json.dumps([{"path": hit["path"], "line": hit["line"]} for hit in hits], indent=1), flush=True)


def timed_run(command: list[str]) -> dict:
    """A command in a new process: CPU and wall seconds when its JSON list on stdout is complete, and at its exit."""
    from benchmarks.codesearch_first_answer import timed_command

    run = timed_command(command)
    return {"answer_cpu_s": run["answer_cpu_s"], "answer_wall_s": round(run["answer_wall_s"], 2),
            "total_cpu_s": round(run["total_cpu_s"], 2), "total_wall_s": round(run["total_wall_s"], 2),
            "hits": len(run["hits"]), "stderr": run["stderr"]}


def speed_commands(folder: Path, index_dir: Path, query: str, teacher: str, twin: Path) -> dict[str, list[str]]:
    """The four ways of answering `query` on `folder` (see the module docstring), each with its own index."""
    def codesearch(name: str, *options: str) -> list[str]:
        return [sys.executable, "-m", "codesearch", query, "--path", str(folder), "--index-dir",
                str(index_dir / name), "--json", "--quiet", *options]
    return {"teacher": codesearch("teacher", "--model", teacher),
            "teacher, first answer fast": codesearch("teacher-fast", "--model", teacher, "--first-answer", "fast"),
            "twin, --model": codesearch("twin-model", "--model", str(twin)),
            "twin, table": [sys.executable, "-c", TABLE_SEARCH, str(folder), str(twin), str(index_dir / "twin-table"),
                            query]}


def measure_speed(source: Path, query: str, teacher: str, twin: Path) -> dict:
    """CPU seconds of each way on a fresh copy of `source` (module docstring), after one untimed warm-up each."""
    from codesearch.files import select_files

    with tempfile.TemporaryDirectory(prefix="codesearch-static-twin-") as scratch:
        warm = Path(scratch, "warm")  # the teacher's ONNX export and the twin's refused one happen here, untimed
        warm.mkdir()
        (warm / "example.py").write_text("def add(a, b):\n    return a + b\n")
        for command in speed_commands(warm, Path(scratch, "warm-index"), query, teacher, twin).values():
            timed_run(command)
        copy = Path(scratch, source.name)
        shutil.copytree(source, copy, symlinks=True)
        runs = {way: timed_run(command)
                for way, command in speed_commands(copy, Path(scratch, "index"), query, teacher, twin).items()}
        files = len(select_files(copy).files)
    torch_lines = [line for line in runs["twin, table"].pop("stderr") if line.startswith('{"torch_imported"')]
    for run in runs.values():
        run.pop("stderr", None)
    return {"folder": source.name, "files": files, "query": query, "ways": runs,
            "table_imported_torch": json.loads(torch_lines[-1])["torch_imported"] if torch_lines else None,
            "goal_cpu_s": SPEED_GOAL_CPU_S}


def semble_dev(model: str, work_dir: Path, data: Path, records: Path, name: str, *options: str) -> dict:
    """codesearch_semble.py on the dev half for `model` (dense and hybrid, and what `options` add): {its method
    label without "codesearch ": {level: {"overall", "languages"}}} of the dev half."""
    command = [sys.executable, str(SEMBLE_SCRIPT), "--data", str(data), "--half", "dev", "--model", model,
               "--work-dir", str(work_dir), "--record-dir", str(records), "--record-name", name,
               *itertools.chain.from_iterable(("--ranking", ranking) for ranking in RANKINGS), *options]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                                             os.environ.get("PYTHONPATH")]))}
    subprocess.run(command, check=True, env=environment, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)
    report = json.loads((records / f"{name}.json").read_text())["metrics"]["by_half"]["dev"]
    return {method.removeprefix("codesearch "): {level: {"overall": figures[level]["overall"],
                                                        "languages": figures[level]["languages"]}
                                                for level in QUALITY_LEVELS} for method, figures in report.items()}


def measure_quality(teacher: str, twins: list[Path], args: argparse.Namespace) -> dict:
    """Dev-half figures of the teacher (its full index, and its first answer before the index is built) and each
    twin, and each twin minus the teacher."""
    from benchmarks.codesearch_semble import METRICS

    with tempfile.TemporaryDirectory(prefix="codesearch-static-twin-records-") as records:
        teacher_work = args.teacher_work_dir or args.work_dir / "teacher"
        figures = semble_dev(teacher, teacher_work, args.data, Path(records), "teacher", "--first-stage",
                             str(FIRST_ANSWER_CANDIDATES))
        first_answer = figures.pop(FIRST_ANSWER_LABEL)
        models = {"teacher": figures, "teacher, first answer": {"hybrid": first_answer}}
        for twin in twins:
            models[twin.name] = semble_dev(str(twin), args.work_dir / twin.name, args.data, Path(records), twin.name)
    teacher_figures = models["teacher"]
    differences = {twin.name: {ranking: {level: models[twin.name][ranking][level]["overall"]
                                         - teacher_figures[ranking][level]["overall"] for level in QUALITY_LEVELS}
                               for ranking in RANKINGS} for twin in twins}
    holds = {name: difference["hybrid"]["place"] >= -QUALITY_GOAL for name, difference in differences.items()}
    return {"half": "dev", "models": models, "twin_minus_teacher": differences,
            "goal": f"hybrid {METRICS['place']} at most {QUALITY_GOAL} below the teacher's", "goal_holds": holds}


def twin_provenance(twin: Path) -> dict:
    """What the twin's static_twin.json says of how it was made (train/static_twin.py), or {} when it has none."""
    path = twin / "static_twin.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def print_report(figures: dict) -> None:
    from benchmarks.codesearch_semble import METRICS

    quality = figures.get("quality")
    if quality:
        print(f"\n## semble's benchmark, dev half: {', '.join(METRICS[level] for level in QUALITY_LEVELS)}\n")
        print("| model | " + " | ".join(f"{ranking} {level}" for ranking in RANKINGS for level in QUALITY_LEVELS)
              + " |")
        print("| --- |" + " ---: |" * (len(RANKINGS) * len(QUALITY_LEVELS)))
        for name, models in quality["models"].items():
            print(f"| {name} | " + " | ".join(f"{models[ranking][level]['overall']:.3f}" if ranking in models else ""
                                              for ranking in RANKINGS for level in QUALITY_LEVELS) + " |")
    speed = figures.get("speed")
    if speed:
        print(f"\n## {speed['folder']} ({speed['files']} files), fresh: CPU seconds\n")
        print("| way | to the answer | whole command |\n| --- | ---: | ---: |")
        for way, run in speed["ways"].items():
            print(f"| {way} | {run['answer_cpu_s']:.2f} | {run['total_cpu_s']:.2f} |")


def main(argv: list[str] | None = None) -> None:
    from benchmarks.codesearch_semble import DEFAULT_DATA
    from benchmarks.common import add_record_argument, load_line, write_record

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--twin", type=Path, action="append", default=[],
                        help="a static twin folder (python -m train.static_twin --output DIR); repeatable, the "
                             "first is the one timed")
    parser.add_argument("--model", default="default", help="the teacher (codesearch --model; default: the bundled "
                        "model)")
    parser.add_argument("--speed-folder", type=Path, help="the fresh folder to time (about 500 code files)")
    parser.add_argument("--query", default=DEFAULT_QUERY, help=f"the timed query (default: {DEFAULT_QUERY!r})")
    parser.add_argument("--skip-quality", action="store_true", help="time only")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="semble's benchmark data (as "
                        "codesearch_semble.py's --data)")
    parser.add_argument("--work-dir", type=Path,
                        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "c2llm-static-twin",
                        help="codesearch_semble.py work folders, one per model, kept between runs")
    parser.add_argument("--teacher-work-dir", type=Path,
                        help="the teacher's codesearch_semble.py work folder, where its dev indexes may already be "
                             "(default: WORK_DIR/teacher)")
    add_record_argument(parser, "codesearch_static_twin")
    args = parser.parse_args(argv)
    if not args.twin:
        parser.error("--twin DIR: a static twin folder is needed; make one with python -m train.static_twin "
                     "--output DIR")
    missing = [str(twin) for twin in args.twin if not (twin / TWIN_WEIGHTS).is_file()]
    if missing:
        parser.error(f"--twin {', '.join(missing)}: no {TWIN_WEIGHTS} there; make a twin with python -m "
                     "train.static_twin --output DIR")
    if args.speed_folder is not None and not args.speed_folder.is_dir():
        parser.error(f"--speed-folder {args.speed_folder}: no such folder; name a code folder of ~500 files")
    if not args.skip_quality and not (args.data / "repos.json").is_file():
        parser.error(f"--data {args.data}: no repos.json there; semble's benchmark data is made by "
                     "benchmarks/codesearch_semble.py --build DIR (or pass --skip-quality)")
    twins = [twin.resolve() for twin in args.twin]
    loads = [load_line("start")]
    figures = {"twins": {twin.name: twin_provenance(twin) for twin in twins}}
    if not args.skip_quality:
        figures["quality"] = measure_quality(args.model, twins, args)
    if args.speed_folder is not None:
        figures["speed"] = measure_speed(args.speed_folder.resolve(), args.query, args.model, twins[0])
    loads.append(load_line("end"))
    print_report(figures)
    argv = sys.argv if argv is None else [__file__, *argv]
    print(f"record: {write_record(args.record_name, figures, loads, args.record_dir, argv)}")


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from benchmarks.tables import markdown_table, number  # noqa: E402


def codesearch_static_twin_quality(record: dict) -> str:
    """Dense and hybrid NDCG@10 (place level, then semble's file level) on semble's dev half: the teacher, each
    static twin with its recipe, and the twin's hybrid place-level difference to the teacher against the goal."""
    quality = record["metrics"]["quality"]
    rows = []
    for name, models in quality["models"].items():
        recipe = record["metrics"]["twins"].get(name, {})
        made = (f"{recipe['token_vectors']}, d={recipe['dimensions']}, SIF {recipe['sif_coefficient']:g}"
                if recipe else "the full model")
        difference = quality["twin_minus_teacher"].get(name, {}).get("hybrid", {}).get("place")
        if name == "teacher, first answer":
            made = "the full model over BM25's best 100 (`--first-answer fast`)"
        rows.append([name, made, *(number(models[ranking][level]["overall"]) if ranking in models else ""
                                   for ranking in ("dense", "hybrid") for level in ("place", "file")),
                     "" if difference is None else f"{difference:+.3f}"
                     + ("" if quality["goal_holds"][name] else " (goal: -0.030)")])
    return markdown_table(["model", "made as", "dense place", "dense file", "hybrid place", "hybrid file",
                           "hybrid place - full model"], rows, "llrrrrr")


def codesearch_static_twin_speed(record: dict) -> str:
    """CPU seconds to the answer and for the whole command on a fresh folder, the teacher against the twin."""
    speed = record["metrics"]["speed"]
    rows = [[way, number(run["answer_cpu_s"], 2), number(run["total_cpu_s"], 2), number(run["answer_wall_s"], 1)]
            for way, run in speed["ways"].items()]
    return markdown_table([f"{speed['folder']} ({speed['files']} files), fresh", "answer, CPU-s",
                           "whole command, CPU-s", "answer, wall s"], rows, "lrrr")


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "codesearch_static_twin_quality": (("codesearch_static_twin",), codesearch_static_twin_quality),
    "codesearch_static_twin_speed": (("codesearch_static_twin",), codesearch_static_twin_speed),
}


if __name__ == "__main__":
    main()
