#!/usr/bin/env bash
# Refresh the locks, or report drift, by installing the newest versions pyproject.toml allows into scratch venvs
# and running each profile's tests there (tests/run_for_venv.sh). Not part of CI's gate: drift is a report.
#
#   bash locks/refresh.sh            # rewrite locks/<profile>.txt for each profile whose tests pass
#   bash locks/refresh.sh --check    # write nothing: print what moved and what it breaks
#   PROFILES="inference" bash locks/refresh.sh --check    # some profiles only (default: dev compat inference)
#
# Exit status 1 when a profile's tests fail at the newest versions (its lock is then left as it is).
set -euo pipefail
cd "$(dirname "$0")/.."
write=1
case "${1:-}" in
  "") ;;
  --check) write=0 ;;
  *) echo "unknown option '$1': use --check or nothing" >&2; exit 2 ;;
esac

scratch="$(mktemp -d -t c2llm-locks-XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
broken=()
for profile in ${PROFILES:-dev compat inference}; do
  venv="$scratch/$profile"
  echo "== $profile: newest allowed versions in $venv"
  if ! bash setup.sh "--$profile" --latest "--venv=$venv" > "$scratch/$profile-install.log" 2>&1; then
    tail -20 "$scratch/$profile-install.log"
    broken+=("$profile (install)")
    continue
  fi
  "$venv/bin/python" locks/lock.py diff "locks/$profile.txt"
  if bash tests/run_for_venv.sh "$profile" "$venv/bin/python" > "$scratch/$profile-tests.log" 2>&1; then
    echo "$profile: tests pass ($(tail -1 "$scratch/$profile-tests.log"))"
    if [ "$write" = 1 ]; then
      "$venv/bin/python" locks/lock.py write "locks/$profile.txt"
    fi
  else
    echo "$profile: tests FAIL at the newest versions; locks/$profile.txt kept. What broke:"
    grep -E "^(FAILED|ERROR) " "$scratch/$profile-tests.log" || tail -30 "$scratch/$profile-tests.log"
    tail -1 "$scratch/$profile-tests.log"
    broken+=("$profile")
  fi
done
if [ "${#broken[@]}" -gt 0 ]; then
  echo "drift breaks: ${broken[*]}"
  exit 1
fi
echo "no drift breaks anything$([ "$write" = 1 ] && echo '; locks rewritten: review and commit them with the tests run')"
