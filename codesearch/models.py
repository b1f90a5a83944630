"""Which model `--model` loads."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL_DIR = REPO_ROOT / "default_model"


def load_search_model(name: str):
    """`default`: the shipped offline default model (default_model/), or, until one is shipped, the packaged
    all-MiniLM-L6-v2; anything else: a sentence-transformers folder. Returns (model, description)."""
    from sentence_transformers import SentenceTransformer

    if name == "default":
        if (DEFAULT_MODEL_DIR / "modules.json").is_file():
            return SentenceTransformer(str(DEFAULT_MODEL_DIR), trust_remote_code=True), f"model {DEFAULT_MODEL_DIR.name}"
        from evaluation.baselines import packaged_minilm_folder

        return SentenceTransformer(str(packaged_minilm_folder())), "model all-MiniLM-L6-v2 (packaged, offline)"
    folder = Path(name).expanduser()
    if not (folder / "modules.json").is_file():
        raise SystemExit(f"error: --model {name!r} is neither 'default' nor a sentence-transformers folder "
                         "(no modules.json there)")
    return SentenceTransformer(str(folder), trust_remote_code=True), f"model {folder}"
