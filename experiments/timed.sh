# Sourced by the experiments' shell scripts (which set E, LOGS and, optionally, NICE):
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
