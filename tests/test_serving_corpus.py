"""Corpus embedding on Ray Data (`python -m serving.embed_corpus`): bad shards (a non-UTF-8 byte anywhere included)
refused before Ray starts, and Ray failing to start reported in one line (fast); and a job killed midway, plus a
file cut short, resumed by the same command into every id exactly once, the vectors those of in-process `encode` with
the same prompt (slow: Ray starts in ~10 s on this machine)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import serving.embed_corpus
from serving.embed_corpus import (RAY_START_ATTEMPTS, RAY_START_ENVIRONMENT, CorpusError, check_corpus, finished_ids,
                                  list_shards, main)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARDS, ROWS_PER_SHARD = 6, 40
MIN_COSINE = 0.9999
JOB_SECONDS = 600
RAY_ERROR_LINE = re.compile(r"\d\d:\d\d:\d\d,\d+ E \d+ \d+\]")  # the header of an error line of Ray's C++ log


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def corpus(folder: Path, shards: int = SHARDS, rows: int = ROWS_PER_SHARD) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    ids = []
    for shard in range(shards):
        batch = [{"id": f"doc-{shard}-{row}", "text": f"def f{row}(x):\n    return x * {shard}" + " # pad" * row}
                 for row in range(rows)]
        write_jsonl(folder / f"shard-{shard}.jsonl", batch)
        ids += [item["id"] for item in batch]
    return ids


@pytest.mark.parametrize(("rows", "named"), [
    ([{"id": "a", "body": "x"}], "no column 'text' (it has id, body); pass --id-column/--text-column"),
    ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], "id 'a' appears more than once"),
    ([{"id": "a", "text": "x"}, {"id": "b", "text": ""}], "row 1 has no text (null or empty)"),
    ([{"id": "a", "text": "x"}, {"id": None, "text": "y"}], "has a null id"),
    ([{"id": "a", "text": 3}], "holds int64, not text"),
])
def test_bad_shards_are_refused_naming_the_file_and_the_problem(tmp_path, rows, named):
    shard = write_jsonl(tmp_path / "shard.jsonl", rows)
    with pytest.raises(CorpusError, match=r"shard\.jsonl") as raised:
        check_corpus([shard], "json", "id", "text")
    assert named in str(raised.value)


@pytest.mark.parametrize("block_bytes", [1, 3, serving.embed_corpus.DECODE_BLOCK_BYTES])
def test_a_non_utf8_byte_anywhere_is_refused_naming_its_line(tmp_path, monkeypatch, block_bytes):
    monkeypatch.setattr(serving.embed_corpus, "DECODE_BLOCK_BYTES", block_bytes)  # a character split between blocks
    good = "".join(json.dumps({"id": f"r{row}", "text": "caf\u00e9 \u2603"}, ensure_ascii=False) + "\n"
                   for row in range(200))
    shard = tmp_path / "shard.jsonl"
    shard.write_bytes(good.encode() + b'{"id": "late", "text": "x\xe9y"}\n')  # Latin-1, past Arrow's first block
    with pytest.raises(CorpusError, match=r"shard\.jsonl: line 201, byte 26 is not UTF-8 .*re-encode the file"):
        check_corpus([shard], "json", "id", "text")
    shard.write_bytes(good.encode() + b'{"id": "key", "t\xffxt": "y"}\n')  # in a key: Arrow would name a column
    with pytest.raises(CorpusError, match=r"line 201, byte 17 is not UTF-8"):
        check_corpus([shard], "json", "id", "text")


def test_a_non_utf8_parquet_string_is_refused_naming_its_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = pa.array([b"ok", b"bad \xff"], pa.binary()).view(pa.string())  # as a writer that skips the check does
    pq.write_table(pa.table({"id": ["a", "b"], "text": texts}), tmp_path / "shard.parquet")
    with pytest.raises(CorpusError, match=r"shard\.parquet: row 1, column 'text' is not UTF-8 text"):
        check_corpus([tmp_path / "shard.parquet"], "parquet", "id", "text")


def forbid_ray_start(monkeypatch):
    import ray

    def refuse(*args, **kwargs):
        raise AssertionError("Ray started")

    monkeypatch.setattr(ray, "init", refuse)


def test_a_non_utf8_shard_ends_the_command_before_ray_starts(tiny_model_dir, tmp_path, monkeypatch, capsys):
    forbid_ray_start(monkeypatch)
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "shard.jsonl").write_bytes(b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "\xff"}\n')
    with pytest.raises(SystemExit) as ended:
        main(["--model", str(tiny_model_dir), "--input", str(tmp_path / "corpus"), "--output", str(tmp_path / "out")])
    assert ended.value.code == 2
    assert "shard.jsonl: line 2, byte 22 is not UTF-8" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_ray_failing_to_start_is_one_clear_error(tiny_model_dir, tmp_path, monkeypatch, capsys):
    import ray

    attempts = []

    def overloaded(*args, **kwargs):  # what ray.init raises when its processes come up too late
        attempts.append({name: os.environ.get(name) for name in RAY_START_ENVIRONMENT})
        raise Exception("The current node timed out during startup.")

    monkeypatch.setattr(ray, "init", overloaded)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    monkeypatch.delenv("RAY_agent_register_timeout_ms", raising=False)
    monkeypatch.setenv("RAY_BACKEND_LOG_LEVEL", "info")  # the user's own value wins
    corpus(tmp_path / "corpus", shards=1, rows=3)
    code = main(["--model", str(tiny_model_dir), "--input", str(tmp_path / "corpus"), "--output",
                 str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err
    assert f"error: Ray did not start after {RAY_START_ATTEMPTS} attempts (The current node timed out" in err
    assert "--address auto" in err
    assert attempts == [{**RAY_START_ENVIRONMENT, "RAY_BACKEND_LOG_LEVEL": "info"}] * RAY_START_ATTEMPTS
    assert "RAY_agent_register_timeout_ms" not in os.environ  # set for Ray's start only
    assert os.environ["RAY_BACKEND_LOG_LEVEL"] == "info"


def test_a_cluster_that_cannot_be_joined_is_one_clear_error(tiny_model_dir, tmp_path, monkeypatch, capsys):
    import ray

    def unreachable(*args, **kwargs):
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379")

    monkeypatch.setattr(ray, "init", unreachable)
    corpus(tmp_path / "corpus", shards=1, rows=3)
    code = main(["--model", str(tiny_model_dir), "--input", str(tmp_path / "corpus"), "--output",
                 str(tmp_path / "out"), "--address", "10.0.0.1:6379"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "error: could not join the Ray cluster at --address 10.0.0.1:6379 (Failed to connect" in err


def test_shards_must_share_one_format(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"id": "a", "text": "x"}])
    (tmp_path / "b.parquet").write_bytes(b"")
    with pytest.raises(CorpusError, match="pass only .jsonl or only .parquet"):
        list_shards([tmp_path])
    with pytest.raises(CorpusError, match="no such file or folder"):
        list_shards([tmp_path / "missing"])


def test_a_file_cut_short_is_removed_and_its_ids_left_to_embed(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": ["a", "b"], "vector": [[0.0], [1.0]]}), tmp_path / "whole.parquet")
    pq.write_table(pa.table({"id": ["c"], "vector": [[2.0]]}), tmp_path / "cut.parquet")
    cut = (tmp_path / "cut.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(cut[: len(cut) // 2])
    assert finished_ids(tmp_path, pa.string()).to_pylist() == ["a", "b"]
    assert not (tmp_path / "cut.parquet").exists()


def test_rows_written_twice_are_dropped_from_the_later_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": ["a", "b"], "vector": [[0.0], [1.0]]}), tmp_path / "1.parquet")
    pq.write_table(pa.table({"id": ["b", "c"], "vector": [[1.0], [2.0]]}), tmp_path / "2.parquet")
    pq.write_table(pa.table({"id": ["a"], "vector": [[0.0]]}), tmp_path / "3.parquet")  # nothing new: deleted
    assert finished_ids(tmp_path, pa.string()).to_pylist() == ["a", "b", "c"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["1.parquet", "2.parquet"]
    assert pq.read_table(tmp_path / "2.parquet").to_pylist() == [{"id": "c", "vector": [2.0]}]
    assert finished_ids(tmp_path, pa.string()).to_pylist() == ["a", "b", "c"]  # and a second pass changes nothing


def test_a_rewrite_a_kill_cut_short_is_removed_by_the_next_run(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """The rewrite that drops repeated rows goes through a temporary name (c2llm_plumbing.atomic); what a kill leaves
    under it is removed by the next run, never taken for output nor refused as a stranger's file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from c2llm_plumbing import atomic

    corpus(tmp_path / "corpus", shards=1, rows=2)
    output = tmp_path / "out"
    output.mkdir()
    pq.write_table(pa.table({"id": ["doc-0-0"], "vector": [[0.0]]}), output / "1.parquet")
    pq.write_table(pa.table({"id": ["doc-0-0", "doc-0-1"], "vector": [[0.0], [1.0]]}), output / "2.parquet")

    def killed(*args):  # the rename never happens, and nothing cleans up: as after SIGKILL
        raise KeyboardInterrupt

    with monkeypatch.context() as kill:
        kill.setattr(atomic.os, "replace", killed)
        kill.setattr(atomic, "remove", lambda path: None)
        with pytest.raises(KeyboardInterrupt):
            finished_ids(output, pa.string())
    assert [path for path in output.iterdir() if path.name.startswith(".")]  # the cut-short rewrite's file
    forbid_ray_start(monkeypatch)
    assert main(["--model", str(tiny_model_dir), "--input", str(tmp_path / "corpus"), "--output", str(output)]) == 0
    assert sorted(path.name for path in output.iterdir()) == ["1.parquet", "2.parquet"]
    assert pq.read_table(output / "2.parquet").to_pylist() == [{"id": "doc-0-1", "vector": [1.0]}]
    assert "0 to embed" in capsys.readouterr().err


def run_job(corpus_dir: Path, model_dir: Path, output: Path, log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "serving.embed_corpus", "--model", str(model_dir), "--input", str(corpus_dir),
               "--output", str(output), "--input-type", "document", "--actors", "2", "--batch-size", "10"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with open(log, "ab") as handle:  # its own session: the kill reaches the driver and what it started
        return subprocess.Popen(command, env=env, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


@pytest.mark.slow
def test_a_killed_job_resumes_into_every_id_exactly_once(tiny_model_dir, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from sentence_transformers import SentenceTransformer

    ids = corpus(tmp_path / "corpus")
    output, log = tmp_path / "vectors", tmp_path / "job.log"
    job = run_job(tmp_path / "corpus", tiny_model_dir, output, log)
    deadline = time.monotonic() + JOB_SECONDS
    while len(list(output.glob("*.parquet"))) < 3:  # killed once some, not all, files are written
        assert job.poll() is None, log.read_text()[-4000:]
        assert time.monotonic() < deadline, log.read_text()[-4000:]
        time.sleep(0.2)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait(timeout=60)
    written = sorted(output.glob("*.parquet"))
    assert 0 < len(written) < len(ids) // 10, "the kill came after the job finished"
    cut = written[0].read_bytes()  # and one file cut short, as a kill during its write leaves it
    written[0].write_bytes(cut[: len(cut) // 2])

    resumed = run_job(tmp_path / "corpus", tiny_model_dir, output, log)
    assert resumed.wait(timeout=JOB_SECONDS) == 0, log.read_text()[-4000:]
    assert f"removing {written[0]}" in log.read_text()
    assert not RAY_ERROR_LINE.search(log.read_text()), "Ray logged an error line a user cannot act on"
    table = pa.concat_tables(pq.read_table(path) for path in sorted(output.glob("*.parquet")))
    assert sorted(table.column("id").to_pylist()) == sorted(ids)  # each id once: nothing lost, nothing twice

    texts = {row["id"]: row["text"] for path in sorted((tmp_path / "corpus").glob("*.jsonl"))
             for row in map(json.loads, path.read_text().splitlines())}
    model = SentenceTransformer(str(tiny_model_dir), trust_remote_code=True, device="cpu")
    expected = model.encode([texts[i] for i in table.column("id").to_pylist()], prompt_name="document")
    vectors = np.array(table.column("vector").to_pylist(), dtype=np.float32)
    cosines = (vectors * expected).sum(axis=1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(expected, axis=1)
    assert cosines.min() >= MIN_COSINE
