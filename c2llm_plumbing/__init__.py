"""c2llm_plumbing: what every front door of C2LLM needs below it, written once (docs/development.md).

Named for the layer it is, the plumbing under training, evaluation, serving, codesearch, benchmarks and experiments:

- `models`: the model folder a `--model` option names, checked before any work, its prompts, and loading it;
- `arguments`: argparse `type=` checks (a whole number from 1, a share from 0 to 1, seconds above 0);
- `text`: text every store can keep (no lone surrogates);
- `atomic`: the one atomic write: a temporary name in the target's folder, then a rename;
- `records`: the one JSON record of a run (command, commit, lock, machine, load, figures) and its parts;
- `lockfile`: reading a lock (locks/*.txt) and what the running environment holds;
- `compat_litserve`, `compat_mcp`, `compat_mteb`: each dependency's non-public names this project still needs, one
  module per dependency, pinned by tests/test_plumbing.py so an upgrade that moves one fails there by name.

A leaf: it imports none of train, evaluation, codesearch, serving, benchmarks (tests/test_evaluation_independence.py
checks), and only the standard library at import time (torch, sentence-transformers, litserve, mcp and mteb inside the
functions or compat modules that need them), so `pip install .` and the inference venv can import it.
"""
