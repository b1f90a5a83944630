"""The on-disk format of a codesearch index (codesearch.store, codesearch.vectors): an index written in it before
a change of the code still loads, and what each kind of settings change does to a stored index."""

import json
import sqlite3

import numpy as np
import pytest

from codesearch.index import SearchIndex
from codesearch.store_checks import settings_change
from tests.test_codesearch_index import FakeEmbedder, project  # noqa: F401 (project: a fixture)

# The statements the index format 1 writes, copied here (not imported) so a change to them fails this file.
FORMAT_1_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
    "CREATE TABLE files (path TEXT PRIMARY KEY, sha256 TEXT, size INTEGER, mtime_ns INTEGER, status TEXT)",
    "CREATE TABLE pieces (id INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT, line INTEGER, end_line INTEGER, "
    "title TEXT, text TEXT, vector BLOB)",
    "CREATE INDEX pieces_path ON pieces (path)",
    "CREATE TABLE queries (text TEXT PRIMARY KEY, vector BLOB)",
    "CREATE TABLE paths (path TEXT PRIMARY KEY, vector BLOB)",
)
GENERATION = 7
QUERY = "read a json config file"


def write_format_1_index(index_dir, project, vectors):  # noqa: F811
    """An index of `project`'s three files as format 1 stores it, written by hand: one piece per file."""
    import hashlib

    files = sorted(str(path.relative_to(project)) for path in project.rglob("*.py"))
    index_dir.mkdir()
    with sqlite3.connect(index_dir / "index.sqlite") as db:
        for statement in FORMAT_1_SCHEMA:
            db.execute(statement)
        settings = {"index_format": 1, "model": "fake", "precision": "float32"}
        db.executemany("INSERT INTO meta VALUES (?, ?)", [("settings", json.dumps(settings, sort_keys=True)),
                                                          ("generation", str(GENERATION)),
                                                          ("path_vectors", "complete")])
        for path in files:
            data, stat = (project / path).read_bytes(), (project / path).stat()
            db.execute("INSERT INTO files VALUES (?, ?, ?, ?, 'ok')",
                       (path, hashlib.sha256(data).hexdigest(), stat.st_size, stat.st_mtime_ns))
            db.execute("INSERT INTO pieces (path, line, end_line, title, text, vector) VALUES (?, 1, 2, ?, ?, ?)",
                       (path, f"title of {path}", data.decode(), vectors([data.decode()])[0].tobytes()))
            db.execute("INSERT INTO paths VALUES (?, ?)", (path, vectors([path])[0].tobytes()))
        db.execute("INSERT INTO queries VALUES (?, ?)", (QUERY, vectors([QUERY])[0].tobytes()))
    return files


@pytest.mark.parametrize("precision", ["float32", "int8", "binary"])
def test_an_index_written_in_format_1_loads_and_updates_without_embedding(project, tmp_path,  # noqa: F811
                                                                         precision):
    """The whole format pinned: tables, columns, meta keys and the float32 BLOBs; opening it keeps everything (a
    new precision only re-quantizes), an update of the same files embeds nothing and adds no table."""
    fake = FakeEmbedder()
    index_dir = tmp_path / "index"
    files = write_format_1_index(index_dir, project, fake._vectors)
    messages = []

    def refuse(texts):
        raise AssertionError(f"embedded {texts}")

    index = SearchIndex(index_dir, {"model": "fake", "precision": precision}, log=messages.append)
    try:
        assert index.rebuilt_because == "" and not any("rebuild" in message for message in messages)
        report = index.update(project, files, refuse, progress=False)
        assert (report.unchanged_files, report.embedded_files, report.embedded_paths) == (3, 0, 0)
        assert index.generation == GENERATION
        loaded = index.load()
        assert loaded.paths == files and loaded.titles == [f"title of {path}" for path in files]
        expected = fake._vectors([(project / path).read_text() for path in files])
        np.testing.assert_array_equal(index.float_vectors(loaded.ids, expected.shape[1]), expected)
        assert loaded.vectors.precision == precision and len(loaded.vectors.matrix) == len(files)
        assert sorted(index.path_vectors()) == files
        np.testing.assert_array_equal(index.cached_query(QUERY), fake._vectors([QUERY])[0])
        retriever = index.bm25(loaded.generation)
        assert retriever.get_scores(["json"]).argmax() == files.index("pkg/config.py")
    finally:
        index.close()
    with sqlite3.connect(index_dir / "index.sqlite") as db:
        schema = {row[0] for row in db.execute("SELECT sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")}
    assert schema == set(FORMAT_1_SCHEMA)


@pytest.mark.parametrize("new, expected", [
    ({"model": "/a", "chunking_version": 1, "precision": "float32"}, ("keep", [])),
    ({"model": "/b", "chunking_version": 1, "precision": "int8"}, ("rewrite", [])),
    ({"model": "/a", "chunking_version": 2, "precision": "float32"}, ("resplit", ["chunking_version"])),
    ({"model": "/a", "chunking_version": 2, "precision": "float32", "max_seq_length": 64},
     ("rebuild", ["chunking_version", "max_seq_length"])),
])
def test_a_settings_change_keeps_the_vectors_unless_they_depend_on_it(new, expected):
    assert settings_change({"model": "/a", "chunking_version": 1, "precision": "float32"}, new) == expected
    assert settings_change(None, new) == ("keep", [])
