#!/usr/bin/env bash
# The tests each venv profile of setup.sh runs, in one place for CI (.ci/run) and the lock refresh
# (locks/refresh.sh):
#
#   bash tests/run_for_venv.sh PROFILE PYTHON [PYTEST_ARGS...]
#
#   dev        the fast tier (CI runs every tier through the README's command)
#   compat     the model core, codesearch and the SmolLM2 start model under transformers 4.51, sentence-transformers
#              5.1 and the floors
#   inference  the model core under a Hub user's `pip install -r requirements.txt` (newest transformers 5.x)
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${1:?usage: bash tests/run_for_venv.sh dev|compat|inference PYTHON [PYTEST_ARGS...]}"
python="${2:?usage: bash tests/run_for_venv.sh dev|compat|inference PYTHON [PYTEST_ARGS...]}"
shift 2

model_core=(tests/test_config.py tests/test_pma.py tests/test_encode.py tests/test_loading.py tests/test_release.py
            tests/test_hub_code_safety.py tests/test_pma_head_on_other_backbones.py tests/test_speed_structure.py
            tests/test_published_parity.py tests/test_bad_folders.py)
case "$profile" in
  dev) selection=(-m "not slow") ;;
  compat) selection=("${model_core[@]}" tests/test_default_model.py tests/test_codesearch_encoders.py
                     tests/test_codesearch_index.py tests/test_codesearch_files.py tests/test_smollm2.py) ;;
  inference) selection=("${model_core[@]}") ;;
  *) echo "unknown profile '$profile': use dev, compat or inference" >&2; exit 2 ;;
esac
exec "$python" -m pytest -q -p no:cacheprovider "${selection[@]}" "$@"
