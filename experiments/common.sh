# Sourced by the experiments' shell scripts (which set PY, E, LOGS and, optionally, NICE), from the repository top.
#   timed NAME COMMAND...
# runs COMMAND under `nice -n $NICE` (default 10: the cores are shared) with its output in $LOGS/NAME.log, prints
# when it starts and ends, and appends {"NAME": wall seconds} to $E/results/timings.jsonl (summarize.py reads it).
timed() {
  local name=$1; shift
  local t0; t0=$(date +%s)
  echo "[$(date -u +%H:%M:%S)] start $name: $*"
  nice -n "${NICE:-10}" "$@" > "$LOGS/$name.log" 2>&1
  echo "[$(date -u +%H:%M:%S)] done $name in $(( $(date +%s) - t0 ))s"
  echo "{\"$name\": $(( $(date +%s) - t0 ))}" >> "$E/results/timings.jsonl"
}

# The reported benchmark folders under $1 (names from experiments/reported.py, the one list), space-separated.
reported_sets() {
  "$PY" -c "import sys; sys.path.insert(0, '.'); from experiments.reported import REPORTED_OFFLINE_BENCHMARKS as names
print(' '.join(f'{sys.argv[1]}/{name}' for name in names))" "$1"
}
