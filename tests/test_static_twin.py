"""train/static_twin.py (the static twin of a sentence-transformers model) and the torch-free table embedder of
benchmarks/codesearch_static_twin.py, on a tiny BERT with all-MiniLM-L6-v2's tokenizer (conftest.tiny_encoder_dir)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.codesearch_static_twin import StaticTableEmbedder, main as benchmark_main
from train.static_twin import (STATIC_TWIN_TYPE, TWIN_CONFIG, TwinRecipe, distil, main as twin_main, sif_weights,
                               static_table, teacher_rows, twin_vocabulary)

TEXTS = ["def read_config(path):\n    return json.load(open(path))", "parse the options given on the command line",
         "x", ""]  # fmt: skip
TWIN_DIMENSIONS = 16  # below the tiny teacher's width (32): PCA reduces


@pytest.fixture(scope="module")
def teacher(tiny_encoder_dir):
    from c2llm_plumbing.models import load_model

    return load_model(tiny_encoder_dir, None)


@pytest.fixture(scope="module")
def twin_dir(tiny_encoder_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("twin") / "twin"
    distil(tiny_encoder_dir, folder, TwinRecipe(dimensions=TWIN_DIMENSIONS))
    return folder


@pytest.fixture(scope="module")
def twin(twin_dir):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(twin_dir), trust_remote_code=True, device="cpu")


def test_vocabulary_leaves_out_special_and_placeholder_tokens(teacher):
    vocabulary = teacher.tokenizer.get_vocab()
    kept = set(twin_vocabulary(teacher.tokenizer))
    assert vocabulary["the"] in kept
    assert not kept & {vocabulary["[CLS]"], vocabulary["[SEP]"], vocabulary["[PAD]"], vocabulary["[unused0]"]}


def test_a_token_row_is_the_teachers_vector_of_that_one_token_text(teacher):
    """A whole-word token's row is exactly what the full pipeline (its pooling included) gives for that word."""
    token_id = teacher.tokenizer.get_vocab()["the"]
    row = teacher_rows(teacher, [token_id])[0]
    encoded = teacher.encode(["the"], convert_to_numpy=True)[0]
    assert np.allclose(row, encoded, atol=1e-5)


def test_full_width_table_keeps_the_teachers_geometry_and_weighs_frequent_tokens_less():
    """At the teacher's width PCA only centres and rotates: distances between (un-weighted) rows are kept; SIF then
    scales each row, earlier (more frequent) vocabulary ranks less."""
    rows = np.random.default_rng(0).normal(size=(50, 8)).astype(np.float32)
    token_ids = list(range(3, 53))
    table = static_table(rows, token_ids, vocabulary_size=60, dimensions=8)
    weights = sif_weights(len(token_ids))
    unweighted = table[token_ids] / weights[:, None]
    distances = np.linalg.norm(rows[:, None] - rows[None], axis=-1)
    assert np.allclose(np.linalg.norm(unweighted[:, None] - unweighted[None], axis=-1), distances, atol=1e-4)
    assert not table[:3].any() and not table[53:].any()  # ids left out: zero rows
    assert np.all(np.diff(weights) > 0)


def test_backbone_mean_rows_are_the_backbones_mean_over_the_wrapped_token(teacher):
    """model2vec's way, for comparison: the tiny teacher pools by mean, so both ways agree on it."""
    token_id = teacher.tokenizer.get_vocab()["the"]
    assert np.allclose(teacher_rows(teacher, [token_id], "backbone-mean"), teacher_rows(teacher, [token_id]),
                       atol=1e-5)


def test_sif_coefficient_zero_weighs_every_token_alike():
    assert np.all(sif_weights(5, 0.0) == 1.0)


def test_too_many_dimensions_is_refused_with_the_limit():
    with pytest.raises(ValueError, match="between 1 and 8"):
        static_table(np.zeros((20, 8), dtype=np.float32), list(range(20)), 20, dimensions=9)


@pytest.mark.parametrize("option, message", [(["--dimensions", "0"], "must be a positive width"),
                                             (["--sif-coefficient", "1.5"], "must be in [0, 1)")])
def test_cli_refuses_a_bad_recipe_before_loading_anything(tmp_path, capsys, option, message):
    with pytest.raises(SystemExit):
        twin_main(["--output", str(tmp_path / "twin"), "--model", str(tmp_path / "none"), *option])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "twin").exists()


def test_twin_folder_names_its_own_module_and_records_how_it_was_made(twin_dir, twin):
    modules = json.loads((twin_dir / "modules.json").read_text())
    assert modules[0]["type"] == STATIC_TWIN_TYPE and (twin_dir / "static_twin.py").is_file()
    assert json.loads((twin_dir / TWIN_CONFIG).read_text())["dimensions"] == TWIN_DIMENSIONS
    assert twin.encode(TEXTS[:1]).shape == (1, TWIN_DIMENSIONS)
    assert not [path for path in twin_dir.parent.iterdir() if path.name.startswith(".")]  # no temporary left


def test_length_cap_truncates_as_codesearch_sets_it(twin_dir):
    """codesearch caps every model's length through load_model; a StaticEmbedding refuses the assignment, the
    twin's module truncates instead."""
    from c2llm_plumbing.models import load_model

    capped = load_model(twin_dir, 3)
    assert capped.max_seq_length == 3
    long_text = "alpha beta gamma delta epsilon"
    assert np.allclose(capped.encode([long_text]), capped.encode(["alpha beta gamma"]), atol=1e-6)
    assert load_model(twin_dir, None).max_seq_length == float("inf")


def test_table_embedder_gives_the_sentence_transformers_vectors(twin_dir, twin):
    """The torch-free embedder (a static backend's prototype) equals SentenceTransformer(twin), the empty text
    included (a zero vector on both sides)."""
    table = StaticTableEmbedder(twin_dir, max_seq_length=10_000)
    expected = twin.encode(TEXTS, convert_to_numpy=True)
    for vectors in (table.encode_document(TEXTS), table.encode_query(TEXTS)):
        assert vectors.shape == expected.shape and np.allclose(vectors, expected, atol=1e-5)
    assert not table.encode_query([""]).any()


def test_benchmark_refuses_a_folder_that_is_no_twin(tmp_path, capsys):
    with pytest.raises(SystemExit):
        benchmark_main(["--twin", str(tmp_path), "--skip-quality"])
    assert "python -m train.static_twin" in capsys.readouterr().err
