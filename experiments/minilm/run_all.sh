#!/usr/bin/env bash
# MiniLM experiment (does the recipe learn on a real pretrained model, offline?): every command, in order. Run from the repository top:
#   bash experiments/minilm/run_all.sh            # all steps
#   STEPS="eval_stock train_mean" bash experiments/minilm/run_all.sh   # some steps
# Heavy jobs run one at a time under `nice -n 10` (shared machine). Big files go to $CACHE (not in git).
set -euo pipefail
source "$(dirname "$0")/../common.sh"  # timed NAME COMMAND... (logged, niced, timed), reported_sets
export HF_HUB_OFFLINE=1
PY=${PY:-.venv/bin/python}  # the venv of setup.sh
CACHE=${CACHE:-/work/cache/c2llm_minilm}
B=${BENCHMARKS:-../shared/data/benchmarks}
E=experiments/minilm
SEED=${SEED:-0}
TRAIN_STEPS=${TRAIN_STEPS:-30}
TRAIN_OPTS=${TRAIN_OPTS:-}   # extra train.py options, e.g. "--train-layers 3 --lr 4e-5"
TAG=${TAG:-}                 # run-name suffix, e.g. "_long": runs/pma_s0_long, results/pma_s0_long.json
REPORTED=$(reported_sets $B)
EVAL_OPTS=${EVAL_OPTS:-"--max-queries 100 --max-corpus 500 --max-seq-length 256 --batch-size 32 --no-progress"}
LOGS=$CACHE/logs  # command logs (not in git)
mkdir -p $E/results/dev $LOGS

step_mine()        { timed mine $PY $E/mine.py --out $CACHE/data; }
step_eval_stock()  { timed eval_stock$TAG $PY -m evaluation.suite --model minilm --compare bm25 --data $REPORTED $EVAL_OPTS \
                       --output $E/results/stock$TAG.json --markdown $E/results/stock$TAG.md; }
train()            { timed train_$1_s$SEED$TAG $PY $E/train.py --pooling $1 --steps $TRAIN_STEPS --seed $SEED $TRAIN_OPTS \
                       --out $CACHE/runs/$1_s$SEED$TAG; }
evalrun()          { timed eval_$1_s$SEED$TAG $PY -m evaluation.suite --model $CACHE/runs/$1_s$SEED$TAG --data $REPORTED $EVAL_OPTS \
                       --output $E/results/$1_s$SEED$TAG.json --markdown $E/results/$1_s$SEED$TAG.md; }
step_train_mean()  { train mean; };  step_eval_mean()  { evalrun mean; }
step_train_pma()   { train pma; };   step_eval_pma()   { evalrun pma; }
step_train_cls()   { train cls; };   step_eval_cls()   { evalrun cls; }
step_table()       { $PY $E/summarize.py; }
# Weight-space merge of a run with the stock backbone (merge.py), to keep what stock knew about web queries.
# RUN=pma_s0_gw STOCK_WEIGHTS="0.2 0.4": runs/pma_s0_gw_m20, runs/pma_s0_gw_m40.
step_merge()       { for w in ${STOCK_WEIGHTS:-0.3}; do local tag=m$(awk "BEGIN { printf \"%.0f\", $w * 100 }"); \
                       timed merge_${RUN}_$tag $PY $E/merge.py --run $CACHE/runs/$RUN --stock-weight $w \
                         --out $CACHE/runs/${RUN}_$tag; done; }
# Tuning happens on cosqa_dev only (never on a reported benchmark): DEV_RUNS="pma_s0_gw pma_s0_gw_m20 ..." (minilm = stock).
step_dev()         { for r in ${DEV_RUNS:-minilm}; do local model=$CACHE/runs/$r; [ "$r" = minilm ] && model=minilm; \
                       timed dev_$r $PY -m evaluation.suite --model $model --data $B/cosqa_dev $EVAL_OPTS \
                         --output $E/results/dev/$r.json; done; }
# Ship the best run (see README): default_model/ = packaged backbone + fp16 delta + head.
step_export()      { $PY $E/export.py --run $CACHE/runs/${BEST:-pma_s0} --out ${OUT:?set OUT: default_model/ is made by train/configs/default-minilm.yaml}; }
step_eval_default(){ timed eval_default $PY -m evaluation.suite --model default --compare minilm --data $REPORTED $EVAL_OPTS \
                       --output $E/results/default.json --markdown $E/results/default.md; }

for s in ${STEPS:-mine eval_stock train_mean eval_mean train_pma eval_pma train_cls eval_cls table}; do step_$s; done
