"""Text -> unit vectors for codesearch, with sentence-transformers (torch) or ONNX Runtime.

Importing torch and sentence-transformers takes 5-10 s on a 2-core machine, far more than embedding a query. So
the first run with a model exports it once to ONNX (`export_onnx`, cached per model fingerprint) and later runs
encode with ONNX Runtime and the model's own `tokenizers` file, importing neither torch nor transformers.

The export is used only if it gives the same vectors as the sentence-transformers model (cosine >= PARITY_COSINE on
documents and queries, padded and truncated); a model that cannot be exported (or disagrees) is remembered as such
and encoded with torch. The backend therefore never changes what a search returns, only how fast.

On a machine with a CUDA GPU, a build with many pieces to embed runs the model with torch on the GPU
(`--device`, `document_device`); queries stay on the CPU path above, which answers one text in milliseconds.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import warnings
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from c2llm_plumbing.atomic import atomic_target

BACKENDS = ("auto", "onnx", "torch")
DEVICES = ("auto", "cpu", "cuda")
# `--device auto` embeds on the GPU from this many pieces up. Importing torch, starting CUDA and loading the model take
# ~14 s; an H100 then embeds ~1,600 pieces/s, its machine's 16 cores ~270: even at ~4,600 pieces, sooner with fewer
# cores (codesearch/reports/speed.md, "Index builds on a GPU")
GPU_MIN_PIECES = 4000
NVIDIA_DRIVER_FILES = ("/dev/nvidiactl", "/proc/driver/nvidia/version")
ONNX_FORMAT = 2  # bump when the exported files change meaning: older exports are redone
ONNX_OPSET = 17
# how attention is traced: "eager" (matmuls, an additive mask, softmax; the default) or "model" (as the model was
# loaded, SDPA for most: exported as Where and IsNaN over every score, slower; benchmarks/codesearch_encoder.py)
EXPORT_ATTENTION = ("eager", "model")
PARITY_COSINE = 0.9999
PARITY_TEXTS = (  # documents and queries of different lengths: one batch exercises padding and truncation
    "def read_config(path):\n    with open(path) as handle:\n        return json.load(handle)",
    "class Client:\n    timeout = 5\n\n    def send(self, payload):\n        return self.session.post(payload)",
    "x = 1",
    "retry a failed request",
    "import os\n" + "value = os.environ.get('HOME')\n" * 200,  # longer than any max_seq_length used here
)


class BackendError(ValueError):
    """The requested backend cannot run here; the message names the fix."""


def onnx_available() -> bool:
    return find_spec("onnxruntime") is not None and find_spec("onnx") is not None


def check_backend(name: str) -> None:
    """Refuse `--backend onnx` without ONNX Runtime before any work starts."""
    if name == "onnx" and not onnx_available():
        raise BackendError("--backend onnx needs onnxruntime and onnx: pip install onnxruntime onnx (or pass "
                           "--backend torch)")


def cuda_present(quick: bool = True) -> bool:
    """Whether torch sees a CUDA GPU. `quick` (what `--device auto` asks on every large build): a machine without
    NVIDIA's driver (no driver files, no nvidia-smi) answers False without importing torch, which alone takes
    seconds on a small CPU. An explicit `--device cuda` asks torch itself (ROCm builds of torch answer there)."""
    if find_spec("torch") is None:
        return False
    if quick and not any(Path(name).exists() for name in NVIDIA_DRIVER_FILES) and shutil.which("nvidia-smi") is None:
        return False
    import torch

    return torch.cuda.is_available()


def check_device(name: str) -> None:
    """Refuse `--device cuda` where torch sees no CUDA GPU, before any work starts."""
    if name not in DEVICES:
        raise BackendError(f"--device {name!r}: valid: {', '.join(DEVICES)}")
    if name == "cuda" and not cuda_present(quick=False):
        raise BackendError("--device cuda: torch sees no CUDA GPU here (torch.cuda.is_available() is False, or torch "
                           "is a CPU build); pass --device cpu, or auto to use a GPU only where there is one")


def document_device(name: str, pieces: int) -> str:
    """Where `pieces` new pieces are embedded under `--device name`: "cuda" or "cpu"."""
    if name == "cuda" or (name == "auto" and pieces >= GPU_MIN_PIECES and cuda_present()):
        return "cuda"
    return "cpu"


def encoder_cache_dir(model_fingerprint: str) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "c2llm-codesearch" / "encoders" / f"{model_fingerprint[:24]}-v{ONNX_FORMAT}"


class TorchEmbedder:
    """Document/query vectors from a SentenceTransformer, with its "document"/"query" prompts when it has them."""

    backend = "torch"

    def __init__(self, model, batch_size: int):
        self.model, self.batch_size = model, batch_size

    def encode_document(self, texts):
        return self.model.encode_document(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                          normalize_embeddings=True, show_progress_bar=False)

    def encode_query(self, texts):
        return self.model.encode_query(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                       normalize_embeddings=True, show_progress_bar=False)


class OnnxEmbedder:
    """The same vectors as `TorchEmbedder`, from an `export_onnx` folder: `tokenizers` + ONNX Runtime.

    Texts are tokenized in one call, sorted by token count and batched, so a batch pads to similar lengths.
    """

    backend = "onnx"

    def __init__(self, folder: Path, batch_size: int, max_seq_length: int):
        import onnxruntime
        from tokenizers import Tokenizer

        self.spec = json.loads((folder / "encoder.json").read_text())
        self.batch_size = batch_size
        self.max_seq_length = min(max_seq_length, self.spec["max_seq_length"])
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_seq_length, direction=self.spec["truncation_side"])
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # warnings about unused initializers are noise for a user
        self.session = onnxruntime.InferenceSession(str(folder / "model.onnx"), options,
                                                    providers=["CPUExecutionProvider"])

    def encode_document(self, texts):
        return self._encode(texts, self.spec["prompts"]["document"])

    def encode_query(self, texts):
        return self._encode(texts, self.spec["prompts"]["query"])

    def _encode(self, texts, prompt: str) -> np.ndarray:
        encodings = self.tokenizer.encode_batch([prompt + text for text in texts])
        order = np.argsort([-len(encoding.ids) for encoding in encodings], kind="stable")
        vectors = np.zeros((len(encodings), self.spec["dimension"]), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            features = self._pad([encodings[row] for row in rows])
            vectors[rows] = self.session.run(None, features)[0]  # (batch, d)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def _pad(self, encodings) -> dict[str, np.ndarray]:
        """(batch, longest) int64 arrays for each model input, padded on the tokenizer's side."""
        longest = max(len(encoding.ids) for encoding in encodings)
        arrays = {name: np.full((len(encodings), longest), fill, dtype=np.int64)
                  for name, fill in (("input_ids", self.spec["pad_token_id"]), ("attention_mask", 0),
                                     ("token_type_ids", 0))}
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            columns = slice(longest - n, longest) if self.spec["padding_side"] == "left" else slice(0, n)
            arrays["input_ids"][row, columns] = encoding.ids
            arrays["attention_mask"][row, columns] = 1
            arrays["token_type_ids"][row, columns] = encoding.type_ids
        return {name: arrays[name] for name in self.spec["inputs"]}


def export_onnx(model, target: Path, batch_size: int = 8, attention: str = "eager") -> float:
    """Export a loaded SentenceTransformer (every module, normalisation included) to `target`, check it against the
    model on PARITY_TEXTS and return the smallest cosine. Raises ValueError when it disagrees; nothing is left
    at `target` unless it passed (written to a temporary folder, then renamed). `attention`: EXPORT_ATTENTION."""
    import torch

    if attention not in EXPORT_ATTENTION:
        raise ValueError(f"attention={attention!r}; valid: {', '.join(EXPORT_ATTENTION)}")

    tokenizer = model.tokenizer
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("the model's tokenizer has no fast (tokenizers) version")
    tokenize = getattr(model, "preprocess", None) or model.tokenize  # sentence-transformers 6 / 5
    sample = tokenize(list(PARITY_TEXTS[:2]))
    inputs = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in sample]

    class Pipeline(torch.nn.Module):
        """Positional inputs -> the pipeline's sentence_embedding, the one signature ONNX can trace."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, *tensors):
            return self.model(dict(zip(inputs, tensors)))["sentence_embedding"]  # (batch, d)

    with atomic_target(target) as temporary:
        temporary.mkdir()
        with torch.no_grad(), warnings.catch_warnings(), _attention(model, attention):
            warnings.simplefilter("ignore")  # the tracer's warnings are about branches an encoder never takes
            axes = {**{name: {0: "batch", 1: "tokens"} for name in inputs}, "sentence_embedding": {0: "batch"}}
            torch.onnx.export(  # the TorchScript exporter needs only `onnx` (the torch.export one adds onnxscript)
                Pipeline(model).eval(), tuple(sample[name] for name in inputs), str(temporary / "model.onnx"),
                input_names=inputs, output_names=["sentence_embedding"], opset_version=ONNX_OPSET, dynamo=False,
                dynamic_axes=axes)
        tokenizer.backend_tokenizer.save(str(temporary / "tokenizer.json"))
        spec = {"format": ONNX_FORMAT, "inputs": inputs, "dimension": _dimension(model),
                "max_seq_length": int(model.max_seq_length), "pad_token_id": int(tokenizer.pad_token_id or 0),
                "padding_side": tokenizer.padding_side, "truncation_side": tokenizer.truncation_side,
                "prompts": {"document": _prompt(model, ("document", "passage", "corpus")),
                            "query": _prompt(model, ("query",))}}
        (temporary / "encoder.json").write_text(json.dumps(spec, indent=2))
        onnx = OnnxEmbedder(temporary, batch_size, model.max_seq_length)
        reference = TorchEmbedder(model, batch_size)
        texts = list(PARITY_TEXTS)
        cosine = min(float(np.min(np.sum(onnx.encode_document(texts) * reference.encode_document(texts), axis=1))),
                     float(np.min(np.sum(onnx.encode_query(texts) * reference.encode_query(texts), axis=1))))
        if not cosine >= PARITY_COSINE:
            raise ValueError(f"the ONNX export gives different vectors (cosine {cosine:.6f} < {PARITY_COSINE})")
        spec["parity_cosine"] = cosine
        (temporary / "encoder.json").write_text(json.dumps(spec, indent=2))
    return cosine


@contextmanager
def _attention(model, attention: str):
    """With "eager": the model's transformers backbones switched to eager attention while traced, then restored. The
    TorchScript exporter writes SDPA with a boolean mask as Where and IsNaN over every (batch, head, query, key)
    score, a cost eager's additive mask does not have (measured in codesearch/reports/speed.md).
    Backbones without `set_attn_implementation` (transformers 4.x fixes attention when the model is built) or that
    refuse eager are traced as they are; the parity check covers every case."""
    switched = []
    for module in model.modules() if attention == "eager" else ():
        if hasattr(module, "set_attn_implementation") and getattr(module, "config", None) is not None:
            loaded = module.config._attn_implementation
            try:
                module.set_attn_implementation("eager")
            except ValueError:  # a model that supports only its own attention kernels
                continue
            switched.append((module, loaded))
    try:
        yield
    finally:
        for module, implementation in switched:
            module.set_attn_implementation(implementation)


def _dimension(model) -> int:
    get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension  # ST 6 / 5
    return int(get())


def _prompt(model, names) -> str:
    """The prompt sentence-transformers' encode_document/encode_query put before each text."""
    for name in names:
        if name in model.prompts:
            return model.prompts[name] or ""
    return model.prompts.get(model.default_prompt_name, "") if model.default_prompt_name else ""


def open_embedder(model_folder: Path, model_fingerprint: str, backend: str, max_seq_length: int, batch_size: int,
                  log=lambda message: print(message, file=sys.stderr, flush=True)):
    """The embedder `--backend` asks for. `auto` uses ONNX when it is installed and the model exported with parity
    (trying the export once per model), torch otherwise."""
    from c2llm_plumbing.models import load_model

    check_backend(backend)
    cache = encoder_cache_dir(model_fingerprint)
    if backend != "torch" and onnx_available():
        if (cache / "encoder.json").is_file():
            return OnnxEmbedder(cache, batch_size, max_seq_length)
        failed = cache.with_name(cache.name + ".failed")
        if backend == "onnx" or not failed.is_file():
            model = load_model(model_folder, sys.maxsize)  # exported at the model's own limit; runs cap it
            started = time.monotonic()
            try:
                cosine = export_onnx(model, cache, batch_size)
            except Exception as error:  # any tracer or runtime failure: torch still gives the right vectors
                if backend == "onnx":
                    raise BackendError(f"--backend onnx: this model could not be exported to ONNX ({error}); pass "
                                       "--backend torch") from error
                failed.parent.mkdir(parents=True, exist_ok=True)
                failed.write_text(f"{type(error).__name__}: {error}\n")
                log(f"encoding with torch: the model could not be exported to ONNX ({error}; noted in {failed})")
                model.max_seq_length = min(max_seq_length, model.max_seq_length)
                return TorchEmbedder(model, batch_size)
            log(f"exported the model to ONNX for fast queries in {time.monotonic() - started:.1f} s (once per model; "
                f"cosine to torch {cosine:.6f}; {cache})")
            return OnnxEmbedder(cache, batch_size, max_seq_length)
    return TorchEmbedder(load_model(model_folder, max_seq_length), batch_size)
