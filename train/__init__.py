"""C2LLM training recipe: `python -m train.train CONFIG --output-dir DIR` (see train/README.md)."""
