#!/usr/bin/env bash
# Causal toy: a tiny Qwen2-shaped C2LLM trained from scratch with PMA, last-token and mean pooling.
# Every command, in order. Run from the repository top:
#   bash experiments/causal_toy/run_all.sh                       # seed 0: train + evaluate the 3 poolings, table
#   SEED=1 bash experiments/causal_toy/run_all.sh                # the same with seed 1
#   STEPS="train_pma eval_pma table" bash experiments/causal_toy/run_all.sh   # some steps
# One job at a time, 1 thread, `nice -n 19` (the 2 cores are shared). Model folders go to $CACHE (not in git).
set -euo pipefail
source "$(dirname "$0")/../common.sh"  # timed NAME COMMAND... (logged, niced, timed), reported_sets
export HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
PY=${PY:-.venv/bin/python}  # the venv of setup.sh
CACHE=${CACHE:-/work/cache/causal_toy}
B=${BENCHMARKS:-../shared/data/benchmarks}
E=experiments/causal_toy
SEED=${SEED:-0}
TRAIN_STEPS=${TRAIN_STEPS:-300}
TRAIN_OPTS=${TRAIN_OPTS:-}   # extra train.py options, e.g. "--lr 2e-3"
REPORTED=$(reported_sets $B)
EVAL_OPTS=${EVAL_OPTS:-"--max-queries 200 --max-corpus 1000 --max-seq-length 256 --dtype float32 --no-progress"}  # float32: C2LLM would load in bfloat16 on a CPU with native bf16
LOGS=$CACHE/logs  # command logs (not in git)
mkdir -p $E/results $LOGS

NICE=19

train()   { timed train_$1_s$SEED $PY $E/train.py --pooling $1 --steps $TRAIN_STEPS --seed $SEED --threads 1 $TRAIN_OPTS \
              --out $CACHE/runs/$1_s$SEED; cp $CACHE/runs/$1_s$SEED/train_log.json $E/results/train_log_$1_s$SEED.json; }
evalrun() { timed eval_$1_s$SEED $PY -m evaluation.suite --model $CACHE/runs/$1_s$SEED --data $REPORTED $EVAL_OPTS \
              --output $E/results/$1_s$SEED.json --markdown $E/results/$1_s$SEED.md; }
step_train_pma()        { train pma; };        step_eval_pma()        { evalrun pma; }
step_train_last_token() { train last_token; }; step_eval_last_token() { evalrun last_token; }
step_train_mean()       { train mean; };       step_eval_mean()       { evalrun mean; }
step_eval_bm25()        { timed eval_bm25 $PY -m evaluation.suite --model bm25 --data $REPORTED $EVAL_OPTS \
                            --output $E/results/bm25.json --markdown $E/results/bm25.md; }  # reference column
step_table()            { $PY $E/summarize.py; }

for s in ${STEPS:-train_pma eval_pma train_last_token eval_last_token train_mean eval_mean table}; do step_$s; done
