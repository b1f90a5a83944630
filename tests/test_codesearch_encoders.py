"""codesearch's two backends give the same vectors: the ONNX export of a sentence-transformers pipeline (BERT + PMA
head + Normalize, with prompts) against the pipeline itself, and the fallbacks when ONNX cannot be used."""

import json
import sys

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason='the ONNX backend of codesearch: pip install .')

from codesearch import encoders  # noqa: E402
from codesearch.encoders import OnnxEmbedder, TorchEmbedder, export_onnx, open_embedder  # noqa: E402
from codesearch.request import SearchRequest  # noqa: E402
from c2llm_plumbing.models import load_model  # noqa: E402

TEXTS = [  # lengths from 1 token to past the model's 64: several batches, padding and truncation
    "x",
    "def add(a, b):\n    return a + b",
    "open a json file and read the settings",
    "class Cache:\n    def get(self, key):\n        return self.store.get(key)\n" * 8,
    "SELECT name FROM users WHERE id = 1",
    "retry",
]


@pytest.fixture(scope="session")
def pma_model_dir(tiny_encoder_dir, tmp_path_factory):
    """Tiny BERT -> PMAPoolingHead -> Normalize, saved with query and document prompts."""
    from sentence_transformers import SentenceTransformer

    try:
        from sentence_transformers.sentence_transformer.modules import Normalize, Transformer
    except ImportError:  # sentence-transformers 5.x
        from sentence_transformers.models import Normalize, Transformer

    from sentence_c2llm import PMAPoolingHead

    folder = tmp_path_factory.mktemp("codesearch-model") / "pma"
    modules = [Transformer(str(tiny_encoder_dir), max_seq_length=64), PMAPoolingHead(32, 32, num_heads=4),
               Normalize()]
    model = SentenceTransformer(modules=modules, device="cpu",
                                prompts={"query": "search code: ", "document": "code: "})
    model.save(str(folder))
    return folder


@pytest.fixture
def model(pma_model_dir):
    return load_model(pma_model_dir, 64)


@pytest.fixture(scope="module")
def exported(pma_model_dir, tmp_path_factory):
    """(folder, parity cosine) of one ONNX export of the model (read-only: tests that export anew use their own)."""
    folder = tmp_path_factory.mktemp("onnx") / "onnx"
    return folder, export_onnx(load_model(pma_model_dir, 64), folder)


@pytest.mark.parametrize("batch_size", [1, 4])
def test_onnx_export_gives_the_torch_vectors(model, exported, batch_size):
    folder, cosine = exported
    assert cosine >= encoders.PARITY_COSINE
    onnx, torch_model = OnnxEmbedder(folder, batch_size, 64), TorchEmbedder(model, batch_size)
    for method in ("encode_document", "encode_query"):  # different prompts: different vectors, same on both
        got, want = getattr(onnx, method)(TEXTS), getattr(torch_model, method)(TEXTS)
        assert got.shape == want.shape == (len(TEXTS), 32)
        np.testing.assert_allclose(got, want, atol=2e-5)
    assert not np.allclose(onnx.encode_document(TEXTS), onnx.encode_query(TEXTS), atol=1e-3)
    assert json.loads((folder / "encoder.json").read_text())["prompts"] == {"document": "code: ",
                                                                            "query": "search code: "}


def test_a_shorter_max_seq_length_truncates_like_the_model(model, exported):
    model.max_seq_length = 16
    np.testing.assert_allclose(OnnxEmbedder(exported[0], 4, 16).encode_document(TEXTS),
                               TorchEmbedder(model, 4).encode_document(TEXTS), atol=2e-5)


def test_auto_exports_once_then_reuses_the_export(pma_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    messages = []
    first = open_embedder(pma_model_dir, "fingerprint-a", "auto", 64, 8, log=messages.append)
    assert first.backend == "onnx" and "exported the model to ONNX" in messages[0]
    monkeypatch.setattr(encoders, "export_onnx", lambda *a, **k: pytest.fail("exported twice"))
    second = open_embedder(pma_model_dir, "fingerprint-a", "auto", 64, 8, log=messages.append)
    assert second.backend == "onnx" and len(messages) == 1
    np.testing.assert_array_equal(first.encode_query(TEXTS), second.encode_query(TEXTS))


def test_a_model_that_does_not_export_is_encoded_with_torch_and_not_retried(pma_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def broken_export(*args, **kwargs):
        raise RuntimeError("unsupported operator")

    monkeypatch.setattr(encoders, "export_onnx", broken_export)
    messages = []
    embedder = open_embedder(pma_model_dir, "fingerprint-b", "auto", 32, 8, log=messages.append)
    assert embedder.backend == "torch" and embedder.model.max_seq_length == 32
    assert "could not be exported to ONNX (unsupported operator" in messages[0]
    monkeypatch.setattr(encoders, "export_onnx", lambda *a, **k: pytest.fail("export retried"))
    assert open_embedder(pma_model_dir, "fingerprint-b", "auto", 32, 8, log=messages.append).backend == "torch"
    with pytest.raises(encoders.BackendError, match="--backend torch"):  # asked for explicitly: an error, not a note
        monkeypatch.setattr(encoders, "export_onnx", broken_export)
        open_embedder(pma_model_dir, "fingerprint-b", "onnx", 32, 8)


def test_disagreeing_export_is_refused_and_leaves_nothing(model, tmp_path, monkeypatch):
    real_encode = OnnxEmbedder._encode
    monkeypatch.setattr(OnnxEmbedder, "_encode", lambda self, texts, prompt: real_encode(self, texts, prompt + "x "))
    with pytest.raises(ValueError, match="different vectors"):
        export_onnx(model, tmp_path / "onnx")
    assert list(tmp_path.iterdir()) == []


def test_torch_backend_and_missing_onnxruntime(pma_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert open_embedder(pma_model_dir, "fingerprint-c", "torch", 64, 8).backend == "torch"
    monkeypatch.setattr(encoders, "onnx_available", lambda: False)
    assert open_embedder(pma_model_dir, "fingerprint-c", "auto", 64, 8).backend == "torch"
    with pytest.raises(encoders.BackendError, match="pip install onnxruntime onnx"):
        encoders.check_backend("onnx")


@pytest.mark.slow
def test_a_query_after_the_export_imports_neither_torch_nor_transformers(pma_model_dir, tmp_path):
    """What makes a new query fast: a fresh process that embeds a query with the export loads no torch."""
    import subprocess

    from tests.conftest import REPO_ROOT

    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "app.py").write_text("def load_settings(path):\n    return open(path).read()\n")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1",
           "PATH": "/usr/bin:/bin"}
    command = [sys.executable, "-c", "import sys; from codesearch.__main__ import main; code = main(sys.argv[1:]); "
               "print('MODULES', 'torch' in sys.modules, 'transformers' in sys.modules, "
               "'sentence_transformers' in sys.modules); sys.exit(code)",
               "settings", "--path", str(tmp_path / "code"), "--model", str(pma_model_dir), "--ranking", "dense"]
    first = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert first.returncode == 0, first.stderr
    assert "exported the model to ONNX" in first.stderr
    command[command.index("settings")] = "read the settings file"  # a new query: its vector is not cached
    second = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert second.returncode == 0, second.stderr
    assert "(onnx)" in second.stderr and "MODULES False False False" in second.stdout
    assert "app.py" in second.stdout


def test_attention_is_traced_eager_and_the_model_keeps_its_own(model, exported, tmp_path, monkeypatch):
    """SDPA with a padding mask is exported with an IsNaN over every layer's attention scores; eager attention is not
    (the PMA head's own stays). The loaded model keeps its attention implementation after the export; a model that
    refuses eager is exported as loaded; an unknown choice names the valid ones."""
    onnx = pytest.importorskip("onnx")
    backbone = model[0].auto_model
    if not hasattr(backbone, "set_attn_implementation"):
        pytest.skip("transformers 4.x fixes attention when the model is built: traced as loaded")
    loaded = backbone.config._attn_implementation
    export_onnx(model, tmp_path / "as-loaded", attention="model")
    assert backbone.config._attn_implementation == loaded

    def nan_checks(folder):
        return sum(node.op_type == "IsNaN" for node in onnx.load(str(folder / "model.onnx")).graph.node)

    assert nan_checks(tmp_path / "as-loaded") - nan_checks(exported[0]) == backbone.config.num_hidden_layers
    with pytest.raises(ValueError, match="valid: eager, model"):
        export_onnx(model, tmp_path / "unknown", attention="flash")

    def refuse(implementation):
        raise ValueError(f"{implementation} is not supported")

    monkeypatch.setattr(backbone, "set_attn_implementation", refuse)
    export_onnx(model, tmp_path / "refused")
    assert nan_checks(tmp_path / "refused") == nan_checks(tmp_path / "as-loaded")


# where a build embeds: --device ---------------------------------------------------------------------------------

def test_device_cuda_is_refused_without_a_gpu_before_any_work(tmp_path, monkeypatch, capsys):
    from codesearch.__main__ import main

    monkeypatch.setattr(encoders, "cuda_present", lambda quick=True: False)
    (tmp_path / "app.py").write_text("def main():\n    pass\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["main", "--path", str(tmp_path), "--device", "cuda", "--index-dir", str(tmp_path / "index")])
    assert exit_info.value.code == 2
    assert "--device cuda: torch sees no CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "index").exists()
    with pytest.raises(encoders.BackendError, match="valid: auto, cpu, cuda"):
        encoders.check_device("gpu")


def test_auto_embeds_on_the_gpu_only_for_large_builds_where_there_is_one(monkeypatch):
    def no_probe(quick=True):
        raise AssertionError("a small build must not look for a GPU (that imports torch)")

    monkeypatch.setattr(encoders, "cuda_present", no_probe)
    assert encoders.document_device("auto", encoders.GPU_MIN_PIECES - 1) == "cpu"
    assert encoders.document_device("cpu", 10**6) == "cpu"
    monkeypatch.setattr(encoders, "cuda_present", lambda quick=True: True)
    assert encoders.document_device("auto", encoders.GPU_MIN_PIECES) == "cuda"
    assert encoders.document_device("cuda", 1) == "cuda"
    monkeypatch.setattr(encoders, "cuda_present", lambda quick=True: False)
    assert encoders.document_device("auto", 10**6) == "cpu"


def test_without_nvidia_s_driver_looking_for_a_gpu_imports_no_torch(tmp_path):
    """The check every large build on a CPU machine makes under --device auto costs no torch import."""
    import subprocess
    from pathlib import Path

    from tests.conftest import REPO_ROOT

    if any(Path(name).exists() for name in encoders.NVIDIA_DRIVER_FILES):
        pytest.skip("NVIDIA's driver is installed here: the check imports torch to ask it")
    probe = subprocess.run([sys.executable, "-c", "import sys; from codesearch.encoders import cuda_present; "
                            "print(cuda_present(), 'torch' in sys.modules)"],
                           capture_output=True, text=True, env={"PYTHONPATH": str(REPO_ROOT), "PATH": str(tmp_path)},
                           timeout=120)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["False", "False"]


def test_a_gpu_build_embeds_there_and_gives_the_index_a_cpu_build_gives(pma_model_dir, tmp_path, monkeypatch):
    """--device cuda: the build's pieces go through a model loaded for "cuda" (here a CPU stand-in: no GPU in CI),
    also when the query's CPU model loaded first; the index answers as one built on the CPU. Edits under auto stay
    on the CPU."""
    from codesearch import searcher
    from codesearch.searcher import FolderSearch, IndexOptions

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    project = tmp_path / "project"
    project.mkdir()
    for number in range(4):
        (project / f"module_{number}.py").write_text(
            f"def load_settings_{number}(path):\n    return open(path).read()\n\n\n"
            f"def send_request_{number}(url):\n    return fetch(url, retries={number})\n")
    loads = []

    def load_for(folder, max_seq_length, device="cpu"):
        loads.append(device)
        return load_model(folder, max_seq_length)  # the stand-in runs on the CPU

    monkeypatch.setattr(searcher, "load_sentence_model", load_for)
    hits = {}
    for device in ("cuda", "cpu"):
        options = IndexOptions(str(pma_model_dir), max_seq_length=64, device=device,
                               index_dir=tmp_path / f"index-{device}", quiet=True)
        folder = FolderSearch(project, options)
        folder.query_vector("read the settings file")  # the CPU model loads first, as a server's first search does
        folder.refresh()
        assert (folder._gpu_model is not None) == (device == "cuda")
        hits[device] = folder.search(SearchRequest(query="read the settings file", top_k=3))
        folder.close()
    assert loads == ["cuda"]
    assert [(hit["path"], hit["line"]) for hit in hits["cuda"]] == [(hit["path"], hit["line"]) for hit in hits["cpu"]]
    np.testing.assert_allclose([hit["score"] for hit in hits["cuda"]], [hit["score"] for hit in hits["cpu"]],
                               atol=1e-3)
    (project / "module_0.py").write_text("def parse_flags(argv):\n    return argv[1:]\n")
    folder = FolderSearch(project, IndexOptions(str(pma_model_dir), max_seq_length=64, device="auto",
                                                index_dir=tmp_path / "index-cuda", quiet=True))
    assert folder.refresh().report.embedded_files == 1
    folder.close()
    assert loads == ["cuda"]  # one edited file is far below GPU_MIN_PIECES


def test_a_gpu_that_fails_leaves_auto_s_build_to_the_cpu_and_stops_cuda_s(pma_model_dir, tmp_path, monkeypatch):
    """Out of memory (or a driver torch cannot use) on the GPU: `auto` builds on the CPU and says so; `cuda` stops
    with an error naming --device cpu, keeping nothing half-written."""
    from codesearch.searcher import FolderSearch, IndexOptions

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(encoders, "cuda_present", lambda quick=True: True)
    monkeypatch.setattr(encoders, "GPU_MIN_PIECES", 1)

    def out_of_memory(self):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(FolderSearch, "gpu_model", out_of_memory)
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("def load_settings(path):\n    return open(path).read()\n")
    logged = []
    folder = FolderSearch(project, IndexOptions(str(pma_model_dir), max_seq_length=64, device="auto",
                                                index_dir=tmp_path / "index-auto", quiet=True), log=logged.append)
    assert folder.refresh().report.embedded_pieces == 1
    assert folder.search(SearchRequest(query="settings", top_k=1))[0]["path"] == "app.py"
    folder.close()
    assert any(line.startswith("embedding on the CPU: the GPU failed (CUDA out of memory") for line in logged)
    folder = FolderSearch(project, IndexOptions(str(pma_model_dir), max_seq_length=64, device="cuda",
                                                index_dir=tmp_path / "index-cuda", quiet=True), log=logged.append)
    with pytest.raises(encoders.BackendError, match="--device cuda: the model could not embed on the GPU .* pass "
                                                    "--device cpu"):
        folder.refresh()
    assert folder.index.stored_pieces() == []
    folder.close()


def test_a_first_answer_comes_before_the_build_looks_for_a_gpu(pma_model_dir, tmp_path, monkeypatch):
    """Looking for a GPU imports torch (seconds): `--first-answer fast` answers first."""
    from codesearch.searcher import FolderSearch, IndexOptions

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    order = []
    monkeypatch.setattr(encoders, "cuda_present", lambda quick=True: order.append("gpu probe") or False)
    monkeypatch.setattr(encoders, "GPU_MIN_PIECES", 1)
    project = tmp_path / "project"
    project.mkdir()
    for number in range(3):
        (project / f"module_{number}.py").write_text(f"def load_{number}(path):\n    return open(path).read()\n")
    folder = FolderSearch(project, IndexOptions(str(pma_model_dir), max_seq_length=64,
                                                index_dir=tmp_path / "index", quiet=True))
    folder.refresh(lambda stage: order.append("first answer"), candidates=1)
    folder.close()
    assert order == ["first answer", "gpu probe"]
