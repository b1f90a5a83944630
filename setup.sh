#!/usr/bin/env bash
# Create a virtual environment with everything C2LLM needs, offline-friendly.
#
#   bash setup.sh            # .venv: inference, training, evaluation and codesearch
#   bash setup.sh --dev      # .venv: the same plus test tools
#   bash setup.sh --compat   # .venv-compat: transformers 4.51 + sentence-transformers 5.x, for the compat tests
#
# torch is installed first and pinned to 2.13.0: on this project's machines pip takes that CPU build
# from local disk, whereas an unpinned torch (asked for by any other package) pulls a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")"

mode="${1:-}"
case "$mode" in
  "") venv=.venv; requirements=(-r requirements.txt -r requirements-train.txt -r requirements-eval.txt
        -r requirements-codesearch.txt) ;;
  --dev) venv=.venv; requirements=(-r requirements-dev.txt) ;;
  --compat) venv=.venv-compat; requirements=(-r requirements-compat.txt) ;;
  *) echo "unknown option '$mode': use no option, --dev or --compat" >&2; exit 2 ;;
esac

python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "torch==${TORCH_VERSION:-2.13.0}"
"$venv/bin/python" -m pip install --quiet "${requirements[@]}"
echo "ready: $venv ($("$venv/bin/python" -c 'import torch, transformers, sentence_transformers as st; print(f"torch {torch.__version__}, transformers {transformers.__version__}, sentence-transformers {st.__version__}")'))"
