"""Serving C2LLM: an OpenAI-compatible embeddings server (`python -m serving`, on LitServe) and corpus embedding
on Ray Data (`python -m serving.embed_corpus`). Both need the `serve` extra (`pip install -e ".[serve]"`);
docs/serving.md has the commands."""
