"""Evaluation of C2LLM and baselines on code retrieval.

Two entry points (see `evaluation/README.md`):

- `python -m evaluation.suite`: the offline benchmark suite on local BEIR folders (nDCG@10, MRR@10,
  Recall@100) for our model, any sentence-transformers model, BM25 and all-MiniLM-L6-v2.
- `python -m evaluation.mteb_code`: MTEB(Code, v1) with our per-task prompts, the `ModelMeta` and the
  results layout for a leaderboard submission.

Importing this package is cheap: torch, sentence-transformers, mteb and bm25s are imported inside the
functions that need them.
"""
