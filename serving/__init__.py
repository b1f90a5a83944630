"""Serving C2LLM: an OpenAI-compatible embeddings server (`python -m serving`, on LitServe) and corpus embedding
on Ray Data (`python -m serving.embed_corpus`). Both need the `serve` extra (`pip install -e ".[serve]"`, or
`bash setup.sh --dev`); docs/serving.md has the commands."""

import importlib.util


def missing_serve_extra(*modules: str) -> str | None:
    """A message naming the fix when the `serve` extra's packages are not installed, else None."""
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    return (f"{', '.join(missing)} not installed: install the serve extra (pip install -e '.[serve]', or "
            "bash setup.sh --dev)")
