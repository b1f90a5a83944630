"""Shared fixtures: tiny random C2LLM folders built once per test session, and fresh-process runs.

Loading tests run in a new Python process whose working directory is NOT the repository root and
whose sys.path does not contain it, as on a Hub user's machine: a local import fallback can then not
hide a broken Hub load.
"""

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

YOUNG_GC_THRESHOLD = 7000  # allocations between collections of the youngest generation (Python's default: 700)
REPO_ROOT = Path(__file__).resolve().parents[1]  # on sys.path through pyproject.toml's pytest `pythonpath`
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in the tests may reach a hub
# A fresh cache of dynamic (remote-code) modules, as on a new machine: a stale copy from an earlier run
# could otherwise hide files that a real first load would not find.
os.environ["HF_MODULES_CACHE"] = tempfile.mkdtemp(prefix="hf-modules-")
# The tests' tensors are tiny: more than one intra-op thread adds only OpenMP hand-offs and spin-waiting, which on
# 2 shared cores cost 2-3 times the CPU time of one thread. Every test process (fresh ones inherit it) uses one,
# unless OMP_NUM_THREADS says otherwise; set before torch is imported, and on torch in case a plugin imported it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Python collects its youngest generation every 700 allocations, the middle one every 10 of those and the oldest
# every 10 of the middle's: with the million objects torch, transformers and the rest create, the full collections
# cost a tenth of the fast tier's CPU time. Ten times fewer (the tests' short-lived cycles wait a little longer).
gc.set_threshold(YOUNG_GC_THRESHOLD, *gc.get_threshold()[1:])

import torch  # noqa: E402

from tests.make_tiny_model import make_tiny_model  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

TINY_HIDDEN_SIZE = 64
TINY_EMBEDDING_DIM = 32  # smaller than the hidden size: the PMA reduces the dimension


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny C2LLM release folder: hidden 64, 2 layers, PMA with 4 heads and d = 32."""
    return make_tiny_model(
        tmp_path_factory.mktemp("models") / "c2llm-tiny",
        hidden_size=TINY_HIDDEN_SIZE,
        pma_dim=TINY_EMBEDDING_DIM,
        pma_heads=4,
    )


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir):
    """The tiny model loaded in this process (read-only: tests must not change it)."""
    import torch

    from modeling_c2llm import DTYPE_ARGUMENT, C2LLMModel

    # float32: tests compare against it to float32 tolerances (the default would be bfloat16 on bf16 CPUs).
    return C2LLMModel.from_pretrained(tiny_model_dir, **{DTYPE_ARGUMENT: torch.float32}).eval()


@pytest.fixture(scope="session")
def tiny_sentence_model(tiny_model_dir):
    """The tiny model through SentenceTransformer, as a Hub user loads it, in float32 (read-only: a test that changes
    it puts it back). Loading it costs about a CPU-second, mostly its Qwen2.5 tokenizer: one load serves every test."""
    from sentence_transformers import SentenceTransformer

    from modeling_c2llm import DTYPE_ARGUMENT

    # float32, as `tiny_model`: on CPUs that compute bfloat16 the default dtype would be bfloat16, whose rounding
    # differs between a padded batch and a text alone where the batch runs padded (transformers < 4.53)
    return SentenceTransformer(str(tiny_model_dir), trust_remote_code=True,
                               model_kwargs={DTYPE_ARGUMENT: torch.float32})


@pytest.fixture(scope="session")
def tiny_sentence_transformer(tiny_model_dir):
    """The tiny model as training loads it (`train.model.load_sentence_transformer`: float32, 64 tokens per text),
    loaded once (read-only: a test that changes a model takes `copy_sharing_tokenizer` of this one)."""
    from train.args import ModelArguments
    from train.model import load_sentence_transformer

    return load_sentence_transformer(tiny_model_dir, ModelArguments(max_seq_length=64, dtype="float32"))


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory):
    """A 2-layer, hidden-32 BERT saved as a sentence-transformers folder (mean pooling, max 64 tokens), with
    all-MiniLM-L6-v2's tokenizer (copied from the package)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel

    try:
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # sentence-transformers 5.x
        from sentence_transformers.models import Pooling, Transformer

    from c2llm_data.packaged_minilm import packaged_minilm_folder

    folder = tmp_path_factory.mktemp("encoder") / "tiny-bert"
    folder.mkdir()
    packaged = packaged_minilm_folder()
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (packaged / name).is_file():
            shutil.copyfile(packaged / name, folder / name)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=128)  # fmt: skip
    BertModel(config).save_pretrained(str(folder))
    transformer = Transformer(str(folder), max_seq_length=64)
    SentenceTransformer(modules=[transformer, Pooling(32, "mean")], device="cpu").save(str(folder))
    return folder


def copy_sharing_tokenizer(model):
    """A deep copy of a sentence-transformers model whose tokenizer is the original's, not a copy: copying a Qwen2.5
    tokenizer (its 151,665-token vocabulary) costs about 1.5 CPU-seconds, the tiny model's weights a few ms. The
    tokenizer must then be used read-only (each call sets its own truncation and padding)."""
    import copy

    return copy.deepcopy(model, {id(model.tokenizer): model.tokenizer})


def run_fresh_python(code: str, cwd: Path, extra_env: dict | None = None) -> dict:
    """Run `code` in a new interpreter started in `cwd` (with its own empty remote-code cache) and
    return the JSON it prints last."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_MODULES_CACHE": str(Path(cwd) / ".hf-modules"),
                **(extra_env or {})})
    assert Path(cwd).resolve() != REPO_ROOT
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
        stdin=subprocess.DEVNULL
    )
    if completed.returncode != 0:
        raise AssertionError(f"fresh process failed ({completed.returncode}):\n{completed.stderr[-4000:]}")
    last_line = completed.stdout.strip().splitlines()[-1]
    return json.loads(last_line[last_line.index("{"):])  # after any prompt text on the same line


def pytest_collection_finish(session):
    """Collection imported torch, transformers, sentence-transformers and the rest: about a million objects that live
    until the end, which every full garbage collection would traverse again (0.3 to 0.5 CPU-seconds each); frozen
    (after one collection, so that no garbage is kept), they are left out of every later collection."""
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(items):
    """A test that starts a fresh Python process (importing torch and loading a model anew) is slow."""
    for item in items:
        if "fresh_python" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def fresh_python(tmp_path):
    """Call as fresh_python(code) to run code in a new process from an empty temporary folder (marks the test
    slow)."""
    return lambda code, extra_env=None: run_fresh_python(code, tmp_path, extra_env)
