"""codesearch --precision float32|int8|binary: quantized vectors from the stored float32 ones, never re-embedded.

The fake embedder (tests/test_codesearch_index.py) hashes words into 64-dimensional unit vectors; the unit tests
below use random unit vectors where rankings need to be compared.
"""

import asyncio
import json
import sqlite3

import numpy as np
import pytest

from codesearch.__main__ import main
from codesearch.index import SearchIndex
from codesearch.quantization import (POPCOUNT, DenseVectors, hamming_distances, int8_ranges, quantize_binary,
                                     quantize_int8)
from codesearch.searcher import FolderSearch, IndexOptions
from tests.test_codesearch_index import DIM, FakeEmbedder, project, run  # noqa: F401 (project: a fixture)

PRECISIONS = ("float32", "int8", "binary")


def unit_rows(count: int, dimension: int, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, dimension)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def stored_settings(index_dir) -> dict:
    with sqlite3.connect(index_dir / "index.sqlite") as db:
        return json.loads(db.execute("SELECT value FROM meta WHERE key='settings'").fetchone()[0])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("ranking", ["dense", "hybrid"])
def test_every_precision_finds_the_right_top_hit(project, capsys, precision, ranking):  # noqa: F811
    _, hits, err, _ = run(project, capsys, "--precision", precision, "--ranking", ranking)
    assert hits[0]["path"] == "pkg/config.py" and hits[0]["title"] == "def read_config"
    _, hits, _, _ = run(project, capsys, "--precision", precision, "--ranking", ranking, query="retry request url")
    assert hits[0]["title"] == "def retry_request"
    assert f"vectors {precision}, " in err and "bytes in memory" in err


def test_switching_precision_re_quantizes_without_re_embedding(project, capsys):  # noqa: F811
    index_dir = project.parent / "index"
    _, expected, _, first = run(project, capsys)
    assert first.documents and stored_settings(index_dir)["precision"] == "float32"
    for precision in ("int8", "binary", "float32", "binary"):
        embedder = FakeEmbedder()
        _, hits, err, _ = run(project, capsys, "--precision", precision, embedder=embedder)
        assert embedder.documents == [] and "embedded 0 pieces" in err  # the float32 vectors in SQLite are reused
        assert "quantizing the stored float32 vectors again" in err and "rebuilding" not in err
        assert stored_settings(index_dir)["precision"] == precision
        assert hits[0]["path"] == expected[0]["path"]
        snapshots = sorted(path.name for path in index_dir.glob("vectors*.npz"))
        assert snapshots == [{"float32": "vectors.npz"}.get(precision, f"vectors-{precision}.npz")]
    _, _, err, _ = run(project, capsys, "--precision", "binary")
    assert "precision changed" not in err  # same precision: the snapshot is trusted as it is


def test_an_index_written_before_precisions_existed_is_kept(project, capsys):  # noqa: F811
    index_dir = project.parent / "index"
    run(project, capsys)
    settings = stored_settings(index_dir)
    del settings["precision"]
    with sqlite3.connect(index_dir / "index.sqlite") as db:
        db.execute("UPDATE meta SET value=? WHERE key='settings'", (json.dumps(settings, sort_keys=True),))
    _, hits, err, embedder = run(project, capsys)
    assert embedder.documents == [] and "settings changed" not in err and "precision changed" not in err
    assert stored_settings(index_dir)["precision"] == "float32" and hits[0]["path"] == "pkg/config.py"


def test_resident_vector_bytes_per_precision(project, tmp_path):  # noqa: F811
    for precision, bytes_per_vector, bytes_per_path in (("float32", DIM * 4, DIM * 4), ("int8", DIM, DIM),
                                                         ("binary", DIM // 8, DIM)):
        folder = FolderSearch(project, IndexOptions(index_dir=tmp_path / "index", quiet=True, precision=precision),
                              FakeEmbedder())
        try:
            pieces = folder.refresh().pieces
            # and the 3 files' path vectors (int8 where the pieces are quantized), with each piece's file (4 bytes)
            assert pieces == 6 and folder.resident_vector_bytes == pieces * bytes_per_vector + 3 * bytes_per_path + 24
        finally:
            folder.close()


@pytest.mark.parametrize("argv", [["q", "--precision", "float16"], ["serve", "--mcp", "--precision", "int4"]])
def test_a_bad_precision_is_refused_with_the_valid_ones(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--path", str(tmp_path)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "invalid choice" in err
    assert "float32" in err and "int8" in err and "binary" in err
    assert not (tmp_path / "cache").exists()
    with pytest.raises(ValueError, match="pass one of float32, int8, binary"):
        SearchIndex(tmp_path / "index", {"model": "fake", "precision": "fp8"})


def test_binary_rescores_only_its_candidates_with_float_vectors():
    vectors = unit_rows(2000, 64)
    query = vectors[7] + 0.3 * unit_rows(1, 64, seed=1)[0]
    query /= np.linalg.norm(query)
    asked = []

    def read_float(rows):
        asked.append(len(rows))
        return vectors[rows]

    binary = DenseVectors.from_float(vectors, "binary", read_float, rescore_multiplier=5)
    assert binary.matrix.shape == (2000, 8) and binary.resident_bytes == 2000 * 64 // 8
    scores = binary.scores(query, top_k=10)
    assert asked == [50]  # 5 x top_k rows read back, not the matrix
    exact = vectors @ query
    rescored = np.argsort(-scores)[:50]
    np.testing.assert_allclose(scores[rescored], exact[rescored], rtol=1e-5)  # exact cosines for the candidates
    others = np.setdiff1d(np.arange(2000), rescored)
    assert scores[others].max() < scores[rescored].min()  # everything else below them, in Hamming order
    assert np.argmax(scores) == np.argmax(exact) == 7



def test_binary_with_offsets_picks_and_keeps_its_rescored_rows_above_the_rest():
    vectors = unit_rows(2000, 64)
    query = unit_rows(1, 64, seed=3)[0]
    offsets = np.zeros(2000)
    far = int(np.argmin(vectors @ query))
    offsets[far] = 5.0  # a row the Hamming order puts last, lifted by the ranking's term (a file path's cosine)
    binary = DenseVectors.from_float(vectors, "binary", lambda rows: vectors[rows], rescore_multiplier=5)
    scores = binary.scores(query, top_k=10, offsets=offsets)
    rescored = np.argsort(-scores)[:50]
    assert far in rescored  # picked for rescoring with its offset in
    np.testing.assert_allclose(scores[rescored], (vectors @ query + offsets)[rescored], rtol=1e-5)
    others = np.setdiff1d(np.arange(2000), rescored)
    assert scores[others].max() < scores[rescored].min()


def test_hybrid_rescores_the_dense_rows_fusion_reads_not_only_top_k():
    from codesearch import ranking
    from codesearch.loaded import LoadedIndex
    from codesearch.request import SearchRequest

    vectors = unit_rows(2000, 64)
    asked = []

    def read_float(rows):
        asked.append(len(rows))
        return vectors[rows]

    binary = DenseVectors.from_float(vectors, "binary", read_float, rescore_multiplier=2)
    query, paths = unit_rows(1, 64, seed=4)[0], [f"f{row}.py" for row in range(2000)]
    index = LoadedIndex(np.arange(2000), binary, paths, [1] * 2000, [2] * 2000, ["x"] * 2000, generation=0)
    for kind in ("dense", "hybrid"):
        ranking.score_rows(SearchRequest(query="q", ranking=kind), index, ranking.QuerySignals(query, np.zeros(2000)),
                           top_k=10)
    # dense: 2 x 10 rows; hybrid fuses dense's best FUSION_DEPTH rows, so 2 x FUSION_DEPTH of them are exact
    assert asked == [20, 2 * ranking.FUSION_DEPTH]

def test_int8_scores_are_the_cosines_up_to_the_buckets():
    vectors = unit_rows(500, 64)
    int8 = DenseVectors.from_float(vectors, "int8")
    assert int8.matrix.dtype == np.int8 and int8.resident_bytes == 500 * 64
    np.testing.assert_array_equal(int8.ranges, int8_ranges(vectors))  # calibrated on the corpus
    query = unit_rows(1, 64, seed=2)[0]
    error = np.abs(int8.scores(query, top_k=10) - vectors @ query)
    bucket = (int8.ranges[1] - int8.ranges[0]) / 255
    assert error.max() <= np.abs(query) @ bucket / 2 + 1e-5  # at most half a bucket per dimension
    assert np.argmax(int8.scores(query, 10)) == np.argmax(vectors @ query)
    outside = quantize_int8(np.full((1, 64), 9.0, np.float32), int8.ranges)  # a query past the corpus's range
    assert (outside == 127).all()


def test_hamming_distance_counts_differing_bits():
    assert [int(POPCOUNT[value]) for value in (0, 1, 3, 128, 255)] == [0, 1, 2, 1, 8]
    bits = quantize_binary(np.array([[1, -1, 1, -1, 1, 1, 1, 1, -1], [-1] * 9], np.float32))  # (2, 2) packed
    query = quantize_binary(np.ones((1, 9), np.float32))[0]
    assert bits.shape == (2, 2) and hamming_distances(bits, query).tolist() == [3, 9]
    for dimension in (64, 384, 100):  # 8 bytes a row and more (read as 64-bit words), and a ragged row
        bits = quantize_binary(unit_rows(50, dimension))
        query = quantize_binary(unit_rows(1, dimension, seed=3))[0]
        expected = np.unpackbits(np.bitwise_xor(bits, query), axis=1).sum(axis=1)
        assert hamming_distances(bits, query).tolist() == expected.tolist()


def test_codes_are_those_of_sentence_transformers():
    """The numpy codes match sentence-transformers' quantize_embeddings (imported here, never at query time)."""
    import sentence_transformers

    try:
        from sentence_transformers.util.quantization import quantize_embeddings
    except ImportError:  # sentence-transformers 5.x
        from sentence_transformers.quantization import quantize_embeddings
    vectors = unit_rows(300, 64)
    ranges = int8_ranges(vectors)
    np.testing.assert_array_equal(quantize_binary(vectors), quantize_embeddings(vectors, "ubinary"))
    theirs = quantize_embeddings(vectors, "int8", calibration_embeddings=vectors).astype(int)
    ours = quantize_int8(vectors, ranges).astype(int)
    if int(sentence_transformers.__version__.split(".")[0]) >= 6:
        np.testing.assert_array_equal(ours, theirs)
    else:  # 5.x truncates toward zero where 6.x floors: at most one bucket apart
        assert np.abs(ours - theirs).max() <= 1


def test_the_mcp_server_opens_indexes_at_its_precision_and_reports_their_memory(project, tmp_path):  # noqa: F811
    """The server's tools in process: index_status names the precision and the resident bytes; search works on
    binary vectors, and an edit is re-quantized before the next answer."""
    from codesearch.mcp_server import ServedFolder, build_server

    options = IndexOptions(index_dir=tmp_path / "index", quiet=True, precision="binary", rescore_multiplier=4)
    served = ServedFolder(project, options, FakeEmbedder())
    server = build_server(served, "demote")

    def call(name, arguments):
        result = asyncio.run(server.call_tool(name, arguments))
        assert not result.is_error, result.content
        value = result.structured_content
        return value["result"] if set(value) == {"result"} else value

    try:
        status = call("index_status", {})
        paths_bytes = 3 * DIM + 6 * 4  # 3 files' path vectors (int8), 6 pieces' file rows
        assert status["precision"] == "binary" and status["resident_vector_bytes"] == 6 * DIM // 8 + paths_bytes
        assert call("search", {"query": "retry request url", "ranking": "dense"})[0]["title"] == "def retry_request"
        (project / "pkg" / "extra.py").write_text("def parse_yaml_settings(text):\n    return yaml.load(text)\n")
        hits = call("search", {"query": "parse yaml settings", "ranking": "dense"})
        assert hits[0]["path"] == "pkg/extra.py"
        assert call("index_status", {})["resident_vector_bytes"] == 7 * DIM // 8 + 4 * DIM + 7 * 4
    finally:
        served.folder.close()


@pytest.mark.parametrize("precision", ["int8", "binary"])
@pytest.mark.parametrize("damage", ["garbage", "wrong ranges"])
def test_a_damaged_quantized_snapshot_is_made_again_from_the_float_vectors(project, capsys, precision,  # noqa: F811
                                                                           damage):
    index_dir = project.parent / "index"
    _, expected, _, _ = run(project, capsys, "--precision", precision)
    snapshot = index_dir / f"vectors-{precision}.npz"
    if damage == "garbage":
        snapshot.write_bytes(b"PK\x03\x04 truncated")
    else:  # same generation and ids, a misshapen array: only the shape checks can catch it
        with np.load(snapshot) as saved:
            fields = dict(saved)
        fields["vectors"] = fields["vectors"][:, :-1]
        fields["ranges"] = np.zeros((2, 3), np.float32)
        np.savez(snapshot, **fields)
    code, hits, err, embedder = run(project, capsys, "--precision", precision)
    assert code == 0 and "rebuilding it from the database" in err and not embedder.documents
    assert hits == expected
