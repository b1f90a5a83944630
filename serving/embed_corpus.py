"""`python -m serving.embed_corpus`: embed a corpus of JSONL or Parquet shards with Ray Data, one model per actor.

    python -m serving.embed_corpus --model PATH --input shards/ --output vectors/ --input-type document

Reads rows (`--id-column`, `--text-column`) from every `*.jsonl`/`*.parquet` under --input, embeds the texts in an
actor pool (`--actors` copies of the model), and writes Parquet files of (id, vector: fixed-size list of float32)
into --output. Run again after a kill, the same command resumes: the ids in the complete output files are skipped,
and a file the kill cut short (unreadable Parquet: its footer is written last) is deleted and its rows embedded
again; a row written twice (a killed run's workers can finish a write after the next run started) is dropped from
the later file. So every id ends up exactly once. On a cluster, `--address auto` joins it (docs/serving.md).

Checked before any work (before Ray starts): the model folder, the shards, every row streamed (UTF-8 throughout,
one format, the two columns, text strings, unique ids), and that the output folder holds only this job's files. Ray
failing to start (twice) or a cluster that cannot be joined ends the command with one line saying what to do.
"""

import argparse
import codecs
import contextlib
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from c2llm_plumbing.arguments import positive_int
from c2llm_plumbing.atomic import atomic_target
from serving import ModelOptions, add_model_options, checked_model

FORMATS = {".jsonl": "json", ".parquet": "parquet"}
# Ray Data's read and write tasks take one CPU each; declaring them beside the actors' CPUs keeps the actor pool from
# holding every declared CPU, where reads never get scheduled and the job hangs.
TASK_CPUS = 2
# The JSONL decode check reads this much at a time: its memory stays flat whatever a shard's size.
DECODE_BLOCK_BYTES = 8 * 2**20
# Ray reads each setting of the processes it starts from a `RAY_<setting>` environment variable (ray.init's own
# route, `_system_config`, is private), so these are set while ray.init starts them, and only then; a value the user
# exported wins. On a loaded 2-core machine the dashboard agent, started even with the dashboard off, can register
# after the raylet's default 30 s; the raylet then exits and ray.init reports "The current node timed out during
# startup". Five minutes outlasts ray.init's own wait for the node, so the raylet is never the one to give up.
AGENT_REGISTER_TIMEOUT_MS = 5 * 60 * 1000
# Ray's C++ processes log at error level what the user cannot act on (Ray Data creates its own actors "with
# constructor arguments in the object store", on every run); at fatal they still log what ended a process.
# RAY_BACKEND_LOG_LEVEL=info brings the lines back.
RAY_START_ENVIRONMENT = {"RAY_agent_register_timeout_ms": str(AGENT_REGISTER_TIMEOUT_MS),
                         "RAY_BACKEND_LOG_LEVEL": "fatal"}
# A second start finds Ray's files in the page cache and its first processes past their imports; more attempts only
# add processes to a machine too busy for two.
RAY_START_ATTEMPTS = 2


class CorpusError(ValueError):
    """The corpus or the output folder cannot be used as given; the message says what to change."""


class RayStartError(RuntimeError):
    """Ray did not start (or could not be joined); the message says what to do."""


@dataclass(frozen=True)
class Columns:
    """The corpus columns a row is read from (`--id-column`, `--text-column`)."""

    id: str
    text: str


class Embedder:
    """A Ray Data actor: the model loaded once, then (id, text) batches -> (id, vector) tables."""

    def __init__(self, model: ModelOptions, prompt_name: str | None, columns: Columns, torch_threads: int,
                 device: str):
        import torch

        from c2llm_plumbing.models import load_model

        torch.set_num_threads(torch_threads)  # the actor's declared CPUs, not every core of the node
        self.model = load_model(model.folder, model.max_seq_length, device)
        self.prompt_name, self.encode_batch_size, self.columns = prompt_name, model.encode_batch_size, columns

    def __call__(self, batch):
        import pyarrow as pa

        texts = batch.column(self.columns.text).to_pylist()
        vectors = self.model.encode(texts, prompt_name=self.prompt_name, batch_size=self.encode_batch_size,
                                    convert_to_numpy=True)  # (rows, d) float32
        flat = pa.array(vectors.astype("float32").reshape(-1))
        return pa.table({"id": batch.column(self.columns.id),
                         "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])})


def list_shards(inputs: list[Path]) -> tuple[list[Path], str]:
    """Every .jsonl or .parquet file named or under a named folder, and the one format they share."""
    shards = []
    for path in inputs:
        if path.is_dir():
            shards += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in FORMATS)
        elif path.is_file():
            shards.append(path)
        else:
            raise CorpusError(f"--input {path}: no such file or folder")
    if not shards:
        raise CorpusError(f"--input {' '.join(map(str, inputs))}: no .jsonl or .parquet files there")
    suffixes = {shard.suffix for shard in shards}
    if not suffixes <= set(FORMATS) or len(suffixes) > 1:
        raise CorpusError(f"the shards are {', '.join(sorted(suffixes))}: pass only .jsonl or only .parquet files")
    return shards, FORMATS[suffixes.pop()]


def check_utf8(shard: Path) -> None:
    """Refuse a JSONL shard holding a byte sequence that is not UTF-8, naming its line.

    Arrow's JSON reader keeps such bytes in string columns unchecked (and decodes a bad key as a column name), so
    they would first fail as a `UnicodeDecodeError` inside a Ray worker. The file is decoded in blocks, so its size
    does not bound the memory; a character split between two blocks is joined by the incremental decoder.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    lines_before, offset, line_start = 0, 0, 0  # in the bytes already decoded: newlines, length, last line's start
    with shard.open("rb") as handle:
        while True:
            block = handle.read(DECODE_BLOCK_BYTES)
            try:
                decoder.decode(block, final=not block)
            except UnicodeDecodeError as error:
                # error.object is the block after the bytes (at most 3, no newline) kept from the block before
                before = error.object[:error.start]
                start = offset - (len(error.object) - len(block)) + error.start
                line = lines_before + before.count(b"\n") + 1
                if b"\n" in before:
                    line_start = start - len(before) + before.rfind(b"\n") + 1
                raise CorpusError(f"{shard}: line {line}, byte {start - line_start + 1} is not UTF-8 ({error.reason}: "
                                  f"{error.object[error.start:error.end]!r}); re-encode the file as UTF-8 (e.g. "
                                  "iconv -f LATIN1 -t UTF-8) or fix or drop that line") from None
            if not block:
                return
            if b"\n" in block:
                lines_before += block.count(b"\n")
                line_start = offset + block.rfind(b"\n") + 1
            offset += len(block)


def first_invalid_text(batch) -> tuple[int, str] | None:
    """The (row, column) of the first string in `batch` that is not valid UTF-8, or None."""
    import pyarrow as pa

    for name, column in zip(batch.schema.names, batch.columns):
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            continue
        for row, value in enumerate(column.cast(pa.large_binary()).to_pylist()):
            try:
                if value is not None:
                    value.decode("utf-8")
            except UnicodeDecodeError:
                return row, name
    return None


def check_corpus(shards: list[Path], file_format: str, id_column: str, text_column: str):
    """The ids of every shard (a pyarrow array), after checking every row, streamed in batches: text that decodes
    as UTF-8, the columns, texts that are strings and not empty, and ids that are there and unique."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    ids = []
    for shard in shards:
        if file_format == "json":
            check_utf8(shard)
        shard_ids, rows_before = [], 0
        try:
            dataset = ds.dataset(shard, format=file_format)
            missing = [column for column in (id_column, text_column) if column not in dataset.schema.names]
            if missing:
                raise CorpusError(f"{shard}: no column {', '.join(map(repr, missing))} (it has "
                                  f"{', '.join(dataset.schema.names)}); pass --id-column/--text-column")
            text_type = dataset.schema.field(text_column).type
            if not pa.types.is_string(text_type) and not pa.types.is_large_string(text_type):
                raise CorpusError(f"{shard}: column {text_column!r} holds {text_type}, not text")
            for batch in dataset.to_batches():
                try:
                    batch.validate(full=True)  # Arrow reads bytes into string columns without checking them
                except pa.ArrowInvalid as error:
                    where = first_invalid_text(batch)
                    if where is None:
                        raise
                    row, column = where
                    raise CorpusError(f"{shard}: row {rows_before + row}, column {column!r} is not UTF-8 text "
                                      f"({error}); rewrite the file with UTF-8 strings") from None
                texts = batch.column(text_column)
                empty = pc.or_(pc.is_null(texts), pc.equal(pc.utf8_length(texts), 0))
                if pc.any(empty).as_py():
                    row = rows_before + pc.index(empty, True).as_py()
                    raise CorpusError(f"{shard}: row {row} has no text (null or empty); drop it or give it text")
                if pc.any(pc.is_null(batch.column(id_column))).as_py():
                    raise CorpusError(f"{shard}: column {id_column!r} has a null id; give every row an id")
                shard_ids.append(batch.column(id_column))
                rows_before += batch.num_rows
        except (pa.ArrowInvalid, OSError, UnicodeDecodeError) as error:
            raise CorpusError(f"{shard}: not readable as {file_format} ({error}); fix or remove the file") from None
        ids.append(pa.chunked_array(shard_ids, type=dataset.schema.field(id_column).type).combine_chunks())
    all_ids = pa.concat_arrays(ids) if len({array.type for array in ids}) == 1 else None
    if all_ids is None:
        raise CorpusError(f"the shards' {id_column!r} columns have different types: "
                          f"{', '.join(sorted({str(array.type) for array in ids}))}; give every shard one id type")
    if pc.count_distinct(all_ids).as_py() < len(all_ids):
        counts = pc.value_counts(all_ids)
        repeated = counts.filter(pc.greater(counts.field("counts"), 1)).field("values")[0]
        holders = [str(shard) for shard, array in zip(shards, ids) if pc.any(pc.equal(array, repeated)).as_py()]
        raise CorpusError(f"id {repeated.as_py()!r} appears more than once, in {', '.join(holders)}: ids must be "
                          "unique, as the output holds each id once")
    return all_ids


def finished_ids(output: Path, id_type):
    """The ids in the output's complete Parquet files, each once.

    A file cut short by a kill is deleted: its rows are embedded again. A row whose id an earlier file (in name order)
    already holds is dropped from the later file, rewritten under a temporary name then renamed: the Ray workers of a
    killed run can finish a write after its driver is gone and after the next run listed what was done, so that run
    embeds those rows again (the same model gives the same vector, so either copy may stay).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    done, seen = [], set()
    for path in sorted(output.rglob("*.parquet")):
        try:
            ids = pq.read_table(path, columns=["id"]).column("id").combine_chunks().cast(id_type)
        except (pa.ArrowInvalid, OSError):
            print(f"removing {path}: cut short by an earlier run; its rows are embedded again", file=sys.stderr)
            path.unlink()
            continue
        fresh = [value not in seen for value in ids.to_pylist()]
        if not all(fresh):
            print(f"{path}: dropping {fresh.count(False):,} rows an earlier file already holds", file=sys.stderr)
            ids = ids.filter(pa.array(fresh))
            rewrite_without_repeats(path, pa.array(fresh))
        seen.update(ids.to_pylist())
        done.append(ids)
    return pa.concat_arrays(done) if done else pa.array([], type=id_type)


def rewrite_without_repeats(path: Path, keep):
    """Keep only the rows of `path` where `keep` is true; a file left empty is deleted."""
    import pyarrow.parquet as pq

    table = pq.read_table(path).filter(keep)
    if table.num_rows == 0:
        path.unlink()
        return
    with atomic_target(path) as partial:  # ".NAME-<random>", not *.parquet: never read as output if a kill cuts it
        pq.write_table(table, partial)


@contextlib.contextmanager
def ray_start_environment():
    """RAY_START_ENVIRONMENT in this process's environment while Ray starts, then the environment as it was: Ray's
    processes keep the values they started with, and nothing else this process starts sees them."""
    added = {name: value for name, value in RAY_START_ENVIRONMENT.items() if name not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def start_ray(address: str | None, num_cpus: int) -> None:
    """Join the Ray cluster at `address`, or start a local Ray with `num_cpus` (retried once); RayStartError if not."""
    import ray

    if address:
        try:
            with ray_start_environment():
                ray.init(address=address)
        except Exception as error:  # ray.init raises plain Exception and ConnectionError alike when it cannot join
            raise RayStartError(f"could not join the Ray cluster at --address {address} ({error}); check that it "
                                "runs (`ray status` on one of its nodes), or leave out --address for a local Ray") \
                from None
        return
    for attempt in range(1, RAY_START_ATTEMPTS + 1):
        try:
            with ray_start_environment():
                ray.init(num_cpus=num_cpus, num_gpus=None, include_dashboard=False)
            return
        except Exception as error:  # "The current node timed out during startup" is a plain Exception
            ray.shutdown()
            last_error = error
            print(f"Ray did not start (attempt {attempt} of {RAY_START_ATTEMPTS}): {error}", file=sys.stderr)
    raise RayStartError(f"Ray did not start after {RAY_START_ATTEMPTS} attempts ({last_error}); the machine is "
                        "likely too busy for Ray's processes to come up in time: rerun when fewer processes compete "
                        f"for its CPUs, or start Ray first (`ray start --head --num-cpus {num_cpus}`, then pass "
                        "--address auto); Ray's own logs are in /tmp/ray/session_latest/logs")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m serving.embed_corpus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_options(parser)
    parser.add_argument("--input", type=Path, nargs="+", required=True,
                        help="shard files or folders of them (.jsonl or .parquet, one format)")
    parser.add_argument("--output", type=Path, required=True, help="folder for the (id, vector) Parquet files")
    parser.add_argument("--input-type", help="the model's prompt name for every text, e.g. document or query "
                                             "(default: none, the model's own default)")
    parser.add_argument("--id-column", default="id", help="(default: id)")
    parser.add_argument("--text-column", default="text", help="(default: text)")
    parser.add_argument("--actors", type=positive_int, default=1, help="model copies embedding in parallel "
                                                                       "(default: 1)")
    parser.add_argument("--cpus-per-actor", type=positive_int, default=1,
                        help="CPUs each actor declares and its torch threads (default: 1)")
    parser.add_argument("--gpus-per-actor", type=float, default=0.0,
                        help="GPUs each actor declares (default: 0; 1 puts each model on its own GPU)")
    parser.add_argument("--batch-size", type=positive_int, default=256,
                        help="rows handed to an actor at a time (default: 256)")
    parser.add_argument("--address", help="a running Ray cluster ('auto' on one of its nodes); default: a local "
                                          "Ray with the CPUs the actors and the read/write tasks need")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    model_dir = checked_model(parser, args.model, "--input-type", args.input_type, "ray", "pyarrow")
    if args.gpus_per_actor < 0:
        parser.error(f"--gpus-per-actor {args.gpus_per_actor}: pass 0 or more")
    if args.output.exists() and not args.output.is_dir():
        parser.error(f"--output {args.output} is a file; pass a folder")
    try:
        shards, file_format = list_shards(args.input)
        ids = check_corpus(shards, file_format, args.id_column, args.text_column)
    except CorpusError as error:
        parser.error(str(error))
    args.output.mkdir(parents=True, exist_ok=True)
    for leftover in args.output.glob(".*.parquet-*"):  # a rewrite a kill interrupted; the original is whole
        leftover.unlink()
    stray = [path.name for path in args.output.iterdir() if path.suffix != ".parquet"]
    if stray:
        parser.error(f"--output {args.output} holds other files ({', '.join(stray[:5])}); pass an empty folder or "
                     "this job's output folder")
    done = finished_ids(args.output, ids.type)
    return embed(args, model_dir, shards, file_format, ids, done)


def embed(args: argparse.Namespace, model_dir: Path, shards: list[Path], file_format: str, ids, done) -> int:
    import pyarrow.compute as pc
    import ray

    todo = len(ids) - int(pc.sum(pc.is_in(ids, value_set=done)).as_py() or 0)
    print(f"{len(ids):,} rows in {len(shards)} shards; {len(ids) - todo:,} already in {args.output}, {todo:,} to "
          "embed", file=sys.stderr)
    if todo == 0:
        return 0
    try:
        start_ray(args.address, args.actors * args.cpus_per_actor + TASK_CPUS)
    except RayStartError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    try:
        started = time.perf_counter()
        paths = [str(shard) for shard in shards]
        dataset = (ray.data.read_json(paths, lines=True) if file_format == "json" else ray.data.read_parquet(paths))
        if len(done):
            def unfinished(batch):  # rows whose id is not in the output yet
                return batch.filter(pc.invert(pc.is_in(batch.column(args.id_column), value_set=done)))

            dataset = dataset.map_batches(unfinished, batch_format="pyarrow")
        device = "cuda" if args.gpus_per_actor > 0 else "cpu"
        dataset = dataset.map_batches(
            Embedder, batch_size=args.batch_size, batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=args.actors), num_cpus=args.cpus_per_actor,
            num_gpus=args.gpus_per_actor or None,
            fn_constructor_kwargs={"model": ModelOptions.from_args(args, model_dir), "prompt_name": args.input_type,
                                   "columns": Columns(id=args.id_column, text=args.text_column),
                                   "torch_threads": args.cpus_per_actor, "device": device})
        dataset.write_parquet(str(args.output))
        seconds = time.perf_counter() - started
    finally:
        ray.shutdown()
    written = finished_ids(args.output, ids.type)
    missing = len(ids) - int(pc.sum(pc.is_in(ids, value_set=written)).as_py() or 0)
    if missing or len(written) != len(ids):
        print(f"error: {args.output} holds {len(written):,} vectors for {len(ids):,} ids ({missing:,} missing)",
              file=sys.stderr)
        return 1
    print(f"embedded {todo:,} rows in {seconds:.1f} s ({todo / seconds:.1f} rows/s); {args.output} holds every id "
          "once", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
