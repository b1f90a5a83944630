"""Loading a release folder as a Hub user would: fresh process, another working directory."""

import json
import os

import numpy as np
import pytest

from modeling_c2llm import DTYPE_ARGUMENT

TEXTS = ["def add(a, b):\n    return a + b", "sort a list of tuples by the second item", "SELECT name FROM users;"]

LOAD_BOTH_WAYS = """
import json, sys, numpy as np, torch
from transformers import AutoModel
from sentence_transformers import SentenceTransformer
path, texts = {path!r}, {texts!r}
model, info = AutoModel.from_pretrained(path, trust_remote_code=True, output_loading_info=True{model_kwargs})
auto = model.encode(texts).numpy()
st = SentenceTransformer(path, trust_remote_code=True, model_kwargs={st_model_kwargs})
sent = st.encode(texts)
dim = st.get_embedding_dimension() if hasattr(st, "get_embedding_dimension") else st.get_sentence_embedding_dimension()
np.save("auto.npy", auto); np.save("st.npy", sent)
print(json.dumps(dict(missing=sorted(info["missing_keys"]), unexpected=sorted(info["unexpected_keys"]), dim=dim,
                      cls=type(model).__name__, modules=[type(m).__name__ for m in st],
                      has_lm_head=any("lm_head" in n for n, _ in model.named_parameters()),
                      code_modules=[type(model).__module__, type(st[0]).__module__])))
"""


def load_both_ways(fresh_python, path, model_kwargs: dict | None = None):
    # float32 explicitly: the default (preferred_dtype) is bfloat16 on bf16-capable CPUs, and these tests
    # compare the two loaders to 1e-5.
    kwargs = {DTYPE_ARGUMENT: "float32", **(model_kwargs or {})}
    code = LOAD_BOTH_WAYS.format(
        path=str(path), texts=TEXTS,
        model_kwargs="".join(f", {k}={v!r}" for k, v in kwargs.items()), st_model_kwargs=kwargs,
    )
    return fresh_python(code)


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_automodel_and_sentence_transformer_agree_in_a_fresh_process(tiny_model_dir, fresh_python, tmp_path):
    report = load_both_ways(fresh_python, tiny_model_dir)
    assert report["missing"] == [] and report["unexpected"] == []
    assert report["cls"] == "C2LLMModel" and not report["has_lm_head"]
    assert report["modules"] == ["C2LLMTransformer", "C2LLMPooling", "Normalize"]
    assert report["dim"] == 32  # d, not the backbone's hidden size of 64
    # the code came from the model folder through transformers' dynamic modules, not a local import
    assert all(module.startswith("transformers_modules.") for module in report["code_modules"])
    auto, sent = np.load(tmp_path / "auto.npy"), np.load(tmp_path / "st.npy")
    assert auto.shape == sent.shape == (len(TEXTS), 32)
    assert cosine_rows(auto, sent).min() >= 0.99999
    assert np.allclose(np.linalg.norm(sent, axis=1), 1.0, atol=1e-5)


def test_sdpa_and_eager_attention_give_the_same_embeddings(tiny_model_dir, fresh_python, tmp_path):
    load_both_ways(fresh_python, tiny_model_dir, {"attn_implementation": "sdpa"})
    sdpa = np.load(tmp_path / "st.npy")
    load_both_ways(fresh_python, tiny_model_dir, {"attn_implementation": "eager"})
    eager = np.load(tmp_path / "st.npy")
    assert cosine_rows(sdpa, eager).min() >= 0.99999


def test_loads_and_encodes_without_flash_attn_and_deepspeed(tiny_model_dir, fresh_python):
    """Inference needs neither package; a None entry in sys.modules makes any import of them fail."""
    code = f"""
import sys, json
sys.modules["flash_attn"] = None; sys.modules["deepspeed"] = None; sys.modules["peft"] = None
from sentence_transformers import SentenceTransformer
st = SentenceTransformer({str(tiny_model_dir)!r}, trust_remote_code=True)
print(json.dumps({{"shape": list(st.encode(["x = 1"]).shape)}}))
"""
    assert fresh_python(code)["shape"] == [1, 32]


def test_flash_attention_2_without_flash_attn_fails_clearly(tiny_model_dir, fresh_python):
    code = f"""
import json
from transformers import AutoModel
try:
    AutoModel.from_pretrained({str(tiny_model_dir)!r}, trust_remote_code=True, attn_implementation="flash_attention_2")
    print(json.dumps({{"error": None}}))
except (ImportError, ValueError) as error:
    print(json.dumps({{"error": str(error)}}))
"""
    error = fresh_python(code)["error"]
    if error is None:
        pytest.skip("flash-attn is installed here")
    assert "flash" in error.lower()


def test_without_trust_remote_code_loading_stops_with_an_error(tiny_model_dir, fresh_python):
    """transformers asks before running repository code; with no answer (stdin closed, as in CI) it
    must fail with an error naming the fix, never hang."""
    code = f"""
import json
from transformers import AutoModel
try:
    AutoModel.from_pretrained({str(tiny_model_dir)!r})
    print(json.dumps({{"error": None}}))
except ValueError as error:
    print(json.dumps({{"error": str(error)}}))
"""
    assert "trust_remote_code" in fresh_python(code)["error"]


def test_sentence_transformer_save_and_reload(tiny_model_dir, fresh_python, tmp_path):
    """A user's `model.save(dir)` must reload from that dir (custom code ends up where loading looks)."""
    code = f"""
import json, numpy as np
from sentence_transformers import SentenceTransformer
st = SentenceTransformer({str(tiny_model_dir)!r}, trust_remote_code=True)
before = st.encode({TEXTS!r})
st.save("resaved")
again = SentenceTransformer("resaved", trust_remote_code=True)
after = again.encode({TEXTS!r})
print(json.dumps({{"max_diff": float(np.abs(before - after).max()), "dim": int(after.shape[1]),
                   "padding_side": again.tokenizer.padding_side}}))
"""
    report = fresh_python(code)
    assert report["max_diff"] < 1e-5 and report["dim"] == 32
    assert report["padding_side"] == "left"


def test_release_folder_can_be_read_by_other_users(tiny_model_dir):
    import stat

    for path in [tiny_model_dir, *tiny_model_dir.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & stat.S_IROTH, f"{path} is not readable by others ({oct(mode)})"


def test_release_folder_holds_only_safetensors_weights(tiny_model_dir):
    names = {path.name for path in tiny_model_dir.rglob("*") if path.is_file()}
    assert "model.safetensors" in names
    assert not any(name.endswith((".bin", ".pt", ".pth", ".pkl", ".ckpt")) for name in names)
    config = json.loads((tiny_model_dir / "config.json").read_text())
    assert config["auto_map"] == {"AutoConfig": "configuration_c2llm.C2LLMConfig",
                                  "AutoModel": "modeling_c2llm.C2LLMModel"}
    assert json.loads((tiny_model_dir / "tokenizer_config.json").read_text())["padding_side"] == "left"


def test_default_dtype_is_the_preferred_one_and_float32_is_one_argument_away(tiny_model_dir, tiny_model):
    import torch
    from transformers import AutoModel

    from modeling_c2llm import preferred_dtype

    default = AutoModel.from_pretrained(tiny_model_dir, trust_remote_code=True)
    assert default.dtype == preferred_dtype()
    full = AutoModel.from_pretrained(tiny_model_dir, trust_remote_code=True, **{DTYPE_ARGUMENT: torch.float32})
    assert full.dtype == torch.float32
    tokenizer = tiny_model.saved_tokenizer  # the folder's, loaded once per session (each load: a CPU-second)
    cosines = torch.nn.functional.cosine_similarity(default.encode(TEXTS, tokenizer), full.encode(TEXTS, tokenizer))
    assert cosines.min() > 0.99  # bfloat16 (where chosen) stays close to float32


@pytest.mark.parametrize(("flags", "native"), [
    ("fpu sse avx2 avx512f avx512_bf16", True),  # Cooper Lake, Zen 4
    ("fpu sse avx2 amx_bf16 amx_tile", True),  # AMX without the AVX512 form listed
    ("fpu sse avx2 avx512f", False),  # AVX512 without bfloat16: emulated, slower than float32
    ("fp asimd", False),
])
def test_the_cpu_bfloat16_probe_reads_the_flags_linux_lists(tmp_path, flags, native):
    """A public route (Linux's CPU flags) to the choice torch's private probe made; elsewhere float32."""
    from modeling_c2llm import cpu_computes_bfloat16

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: test\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
    assert cpu_computes_bfloat16(str(cpuinfo)) is native
    assert cpu_computes_bfloat16(str(tmp_path / "missing")) is False


def test_the_cpu_bfloat16_probe_agrees_with_torch_on_this_machine():
    import torch

    from modeling_c2llm import cpu_computes_bfloat16

    probe = getattr(torch.cpu, "_is_avx512_bf16_supported", None)  # private: only a cross-check here, never shipped
    if probe is None or not os.path.exists("/proc/cpuinfo"):
        pytest.skip("no torch probe or no /proc/cpuinfo to compare with")
    assert cpu_computes_bfloat16() == probe()
