"""The first answer on a fresh folder (codesearch.first_stage, `--first-answer fast`), with a fake encoder: it comes
before the index is built, embeds only BM25's best candidates, says which stage answered, and once the index is
built the answers are the default's."""

import asyncio
import json
import shutil
import threading

import numpy as np
import pytest

from codesearch.__main__ import main
from codesearch.chunking import CodePiece
from codesearch.first_stage import DEFAULT_CANDIDATES, FirstStage
from codesearch.request import SearchRequest
from codesearch.searcher import FolderSearch, IndexOptions
from tests.test_codesearch_index import DIM, FakeEmbedder
from tests.test_codesearch_mcp import payload

MODULES = 70  # 3 functions each: more pieces than the first stage embeds, so a fresh index answers early


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "tests").mkdir(parents=True)
    for number in range(MODULES):
        (root / f"module_{number}.py").write_text(
            f"def load_settings_{number}(path):\n    return open(path).read()\n\n\n"
            f"def count_words_{number}(text):\n    return len(text.split())\n\n\n"
            f"def send_report_{number}(client, report):\n    client.post(report)\n")
    (root / "config.py").write_text("def read_json_config(path):\n    \"\"\"Read a json config file.\"\"\"\n"
                                    "    import json\n    return json.load(open(path))\n")
    (root / "tests" / "test_config.py").write_text("def test_read_json_config():\n    read_json_config('x')\n")
    return root


def open_search(root, index_dir, embedder):
    return FolderSearch(root, IndexOptions(index_dir=index_dir, quiet=True), embedder)


@pytest.mark.parametrize("ranking", ["hybrid", "dense"])
def test_a_fresh_folder_answers_before_embedding_more_than_the_candidates(project, tmp_path, ranking):
    embedder = FakeEmbedder()
    folder = open_search(project, tmp_path / "index", embedder)
    first = []
    request = SearchRequest(query="read json config", top_k=5, ranking=ranking, non_code="keep")

    def answer(stage):
        first.append((folder.first_search(stage, request), list(embedder.documents), len(stage)))

    folder.refresh(answer)
    (hits, embedded_then, pieces), = first
    files = MODULES + 2
    assert pieces == 3 * MODULES + 2
    texts_then = [text for text in embedded_then if not text.endswith(".py")]  # the rest are file paths
    assert 0 < len(texts_then) <= DEFAULT_CANDIDATES < pieces  # only BM25's candidates went through the model
    assert 0 < len(embedded_then) - len(texts_then) <= files  # and the paths of their files
    assert "config.py" in [hit["path"] for hit in hits[:2]]
    assert len(embedder.documents) == pieces + files  # then the build embedded every other piece and path: none twice
    folder.close()


def test_once_built_the_answers_are_the_defaults(project, tmp_path):
    fast = open_search(project, tmp_path / "fast", FakeEmbedder())
    fast.refresh(lambda stage: fast.first_search(stage, SearchRequest(query="send a report")))
    waited = open_search(project, tmp_path / "waited", FakeEmbedder())
    waited.refresh()
    for query in ("send a report", "count the words of a text", "read_json_config"):
        assert fast.search(SearchRequest(query=query)) == waited.search(SearchRequest(query=query))
    fast.close()
    waited.close()


def test_bm25_first_answer_is_the_full_indexes_and_needs_no_model(project, tmp_path):
    embedder = FakeEmbedder()
    folder = open_search(project, tmp_path / "index", embedder)
    first = []
    request = SearchRequest(query="count words of text", ranking="bm25")
    folder.refresh(lambda stage: first.append(folder.first_search(stage, request)))
    assert first and not embedder.queries
    assert {hit.pop("stage") for hit in first[0]} == {"first"}
    assert first[0] == folder.search(request)
    folder.close()


def test_a_small_change_is_embedded_at_once_without_a_first_answer(project, tmp_path):
    folder = open_search(project, tmp_path / "index", FakeEmbedder())
    folder.refresh()
    (project / "module_3.py").write_text("def archive_logs(folder):\n    return folder\n")
    called = []
    folder.refresh(called.append)
    assert not called  # one piece to embed costs less than the first stage's candidates
    folder.close()


def test_after_an_edit_the_first_stage_keeps_stored_vectors_and_reads_changed_files_anew(project, tmp_path):
    embedder = FakeEmbedder()
    folder = open_search(project, tmp_path / "index", embedder)
    folder.refresh()
    for number in range(40):  # more changed pieces than the candidates
        (project / f"module_{number}.py").write_text(
            f"def archive_logs_{number}(folder):\n    return folder\n\n\ndef rotate_{number}(log):\n    pass\n"
            f"\n\ndef compress_{number}(log):\n    pass\n")
    stages = []
    folder.refresh(stages.append)
    stage, = stages
    titles = set(stage.titles)
    assert "def archive_logs_0" in titles and "def load_settings_0" not in titles  # the edit, not the stale pieces
    assert "def load_settings_50" in titles  # unchanged files, from the index
    unchanged = next(piece.text for piece in stage.pieces if piece.title == "def load_settings_50")
    assert unchanged in stage.vectors  # with its stored vector: never embedded again
    folder.close()


def test_candidates_are_bm25s_best_rows_within_the_filters():
    pieces = [CodePiece(f"src/file_{n}.py", 1, 2, f"def parse_{n}", f"def parse_{n}(text):\n    return text")
              for n in range(5)] + [CodePiece("docs/notes.py", 1, 1, "x = 1", "x = 1")]
    stage = FirstStage(pieces, {})
    scores = stage.bm25_scores("parse text")
    rows = stage.candidates(SearchRequest(query="parse text"), scores, 3)
    assert len(rows) == 3 and all(scores[row] > 0 for row in rows)
    assert list(stage.candidates(SearchRequest(query="parse text", include=["*file_4.py"]), scores, 3)) == [4]
    unrelated = SearchRequest(query="unrelated words")
    assert not len(stage.candidates(unrelated, stage.bm25_scores(unrelated.query), 3))


def test_the_view_embeds_each_new_text_once_and_reuses_known_vectors():
    pieces = [CodePiece(f"f{n}.py", 1, 1, "same", "same text") for n in range(3)]
    pieces.append(CodePiece("g.py", 1, 1, "known", "known text"))
    known = np.full(DIM, DIM ** -0.5, dtype=np.float32)
    stage = FirstStage(pieces, {}, {"known text": known})
    embedder = FakeEmbedder()
    view = stage.view(np.arange(4), embedder.encode_document)
    # the one new text, then the files' paths (for the path term, codesearch.loaded.PathVectors), in one call
    assert embedder.documents == ["same text", "f0.py", "f1.py", "f2.py", "g.py"] and stage.embedded_texts == 1
    assert view.paths == ["f0.py", "f1.py", "f2.py", "g.py"]
    assert view.path_vectors.row_files.tolist() == [0, 1, 2, 3]
    stage.view(np.arange(4), embedder.encode_document)
    assert len(embedder.documents) == 5  # kept for the next query


def test_the_command_prints_the_first_answer_once_and_says_which_stage_answered(project, tmp_path, capsys):
    index = tmp_path / "index"
    argv = ["read json config", "--path", str(project), "--index-dir", str(index), "--json", "--first-answer", "fast"]
    assert main(argv, embedder=FakeEmbedder()) == 0
    captured = capsys.readouterr()
    hits = json.loads(captured.out)  # one JSON list: the first answer, not a second one after the build
    assert hits[0]["path"] == "config.py" and {hit["stage"] for hit in hits} == {"first"}
    assert "first answer, before the index is built" in captured.err
    assert captured.err.index("first answer") < captured.err.index("indexed ")  # the build comes after it
    assert main(argv, embedder=FakeEmbedder()) == 0  # built: the next search is the full index's, no note
    captured = capsys.readouterr()
    hits = json.loads(captured.out)
    assert "first answer" not in captured.err and hits[0]["path"] == "config.py" and "stage" not in hits[0]
    shutil.rmtree(index)


class HeldBuildEmbedder(FakeEmbedder):
    """The background build's embedding waits for `release` (the first stage's own candidates do not), so a test
    sees the server while its index is still building."""

    WAIT_SECONDS = 10

    def __init__(self):
        super().__init__()
        self.release = threading.Event()

    def encode_document(self, texts):
        if threading.current_thread().name.startswith("codesearch build"):
            assert self.release.wait(self.WAIT_SECONDS)
        return super().encode_document(texts)


def test_the_server_answers_from_the_first_stage_while_its_index_builds(project, tmp_path):
    from codesearch.mcp_server import ServedFolder, build_server

    embedder = HeldBuildEmbedder()
    served = ServedFolder(project, IndexOptions(index_dir=tmp_path / "index", quiet=True), embedder)
    server = build_server(served, "demote", "fast")

    def call(name, arguments):
        return payload(asyncio.run(server.call_tool(name, arguments)))

    try:
        hits = call("search", {"query": "read json config"})
        assert hits[0]["path"] == "config.py" and {hit["stage"] for hit in hits} == {"first"}
        status = call("index_status", {})
        assert status["building"] and status["pieces"] == 3 * MODULES + 2
        embedder.release.set()
        served.folder._build.thread.join()
        built = call("search", {"query": "read json config"})
        assert built[0]["path"] == "config.py" and all("stage" not in hit for hit in built)
        assert not call("index_status", {})["building"]
    finally:
        embedder.release.set()
        served.folder.close()


def test_a_query_no_piece_shares_a_word_with_is_answered_after_the_build(project, tmp_path, capsys):
    argv = ["zzyzx quux", "--path", str(project), "--index-dir", str(tmp_path / "index"), "--json", "--first-answer",
            "fast"]
    assert main(argv, embedder=FakeEmbedder()) == 0
    captured = capsys.readouterr()
    hits = json.loads(captured.out)  # the full index's dense answer, not an empty first one
    assert hits and all("stage" not in hit for hit in hits) and "no first answer" in captured.err
