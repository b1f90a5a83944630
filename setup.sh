#!/usr/bin/env bash
# Create a virtual environment with everything C2LLM needs, offline-friendly.
#
#   bash setup.sh            # .venv: inference, training, evaluation and codesearch
#   bash setup.sh --dev      # .venv: the same plus test tools
#   bash setup.sh --compat   # .venv-compat: transformers 4.51 + sentence-transformers 5.x, for the compat tests
#
# torch is installed first and pinned to 2.13.0: on this project's machines pip takes that CPU build
# from local disk, whereas an unpinned torch (asked for by any other package) pulls a multi-GB CUDA build.
# The rest comes from pyproject.toml's extras, installed editable: the venv's `codesearch` command runs this
# clone's code. Only the codesearch package is installed; the top-level model files stay importable from
# this folder alone (the loading tests rely on that).
set -euo pipefail
cd "$(dirname "$0")"

mode="${1:-}"
case "$mode" in
  "") venv=.venv; extras=train,eval,treesitter ;;
  --dev) venv=.venv; extras=dev ;;
  --compat) venv=.venv-compat; extras=compat ;;  # not train: it needs transformers 5
  *) echo "unknown option '$mode': use no option, --dev or --compat" >&2; exit 2 ;;
esac

python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "torch==${TORCH_VERSION:-2.13.0}"
"$venv/bin/python" -m pip install --quiet --editable ".[$extras]"
echo "ready: $venv ($("$venv/bin/python" -c 'import torch, transformers, sentence_transformers as st; print(f"torch {torch.__version__}, transformers {transformers.__version__}, sentence-transformers {st.__version__}")'))"
