#!/usr/bin/env bash
# The pooling ablation on SmolLM2-135M-Instruct (experiments/smollm2/README.md): the product recipe
# train/configs/smollm2-cpu.yaml, scaled down so that the runs fit 2 shared CPU cores, with only the pooling (or the
# PMA width) and the seed changing between runs, each trained until its dev loss stops falling; then the product
# evaluation (nDCG@10, python -m evaluation.suite: mteb's retrieval runner on each folder as a local task) on
# BENCHMARKS.
#
#   nice -n 10 bash experiments/smollm2/run_ablation.sh RUNS_DIR [VARIANT ...]
#
# The stopping rule, the same for every run: the dev loss (InfoNCE with in-batch negatives on DEV_PAIRS held-out
# pairs, batches of BATCH) is computed every EVAL_STEPS steps; a run stops at the first evaluation from MIN_STEPS on
# that is the PATIENCE-th in a row without a new lowest dev loss, and at STEPS at the latest; the linear learning-rate
# schedule spans STEPS whatever step a run stops at, and the checkpoint it stops at is exported.
# Defaults: STEPS=300, MIN_STEPS=60 (the CPU recipe's step count), EVAL_STEPS=10, PATIENCE=2, BATCH=4, DEV_PAIRS=32,
# ROWS=1000 (rows read). PATIENCE=0: no dev split, no stopping, STEPS steps (the first 4-step protocol is STEPS=4
# BATCH=16 ROWS=400 PATIENCE=0; the learning curve varies STEPS with ROWS=600).
# BENCHMARKS (default "humaneval humanevalx_py2cpp": text -> Python and Python -> C++, the two cheapest of the nine
# reported sets, 328 texts each) names folders of SHARED_DATA/benchmarks (SHARED_DATA default ../shared/data, from
# the repository root); training drops rows that overlap any.
# One torch thread per run (OMP_NUM_THREADS=1 unless set): two runs side by side on 2 cores, no oversubscription.
# VARIANT is NAME:SEED, NAME one of pma, last_token, mean, pma128 (default: the first three at seeds 0 and 1, then
# pma128 at seeds 0 and 1). Each finished run leaves RUNS_DIR/NAME-sSEED/suite.json (and mteb.json with MTEB=1: the
# MTEB-Code runner, evaluation.mteb_code, encodes the same texts again); a rerun skips runs whose suite.json
# exists. Two scripts with disjoint variants may run side by side on one RUNS_DIR.
# RECIPE (default train/configs/smollm2-cpu.yaml) is the recipe varied; python -m benchmarks.gpu --tiny gives the
# tiny random-weight one (train/configs/cpu-smoke.yaml) to run this script's every step in seconds, with
# PMA_WIDTHS (default "576 128": the widths of pma and pma128, 576 = SmolLM2's hidden size) narrowed to its 64.
# The table: python experiments/smollm2/summarize.py RUNS_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:?usage: bash experiments/smollm2/run_ablation.sh RUNS_DIR [NAME:SEED ...]}"
shift
variants=("$@")
if [ ${#variants[@]} -eq 0 ]; then
  variants=(pma:0 last_token:0 mean:0 pma:1 last_token:1 mean:1 pma128:0 pma128:1)
fi
shared_data="${SHARED_DATA:-../shared/data}"
read -r -a benchmarks <<< "${BENCHMARKS:-humaneval humanevalx_py2cpp}"
benchmarks=("${benchmarks[@]/#/$shared_data/benchmarks/}")
for folder in "${benchmarks[@]}"; do
  if [ ! -d "$folder" ]; then
    echo "no benchmark folder $folder: BENCHMARKS names folders of $shared_data/benchmarks (set SHARED_DATA to" \
      "the folder that holds benchmarks/)" >&2; exit 2
  fi
done
for name in STEPS MIN_STEPS EVAL_STEPS PATIENCE BATCH DEV_PAIRS ROWS; do
  value="${!name:-}"
  if [ -n "$value" ] && ! [[ "$value" =~ ^[0-9]+$ ]]; then
    echo "$name=$value: a whole number is needed (or unset it for the default)" >&2; exit 2
  fi
done
decontaminate=$(IFS=,; echo "${benchmarks[*]}")
python="${PYTHON:-python}"
recipe="${RECIPE:-train/configs/smollm2-cpu.yaml}"
read -r -a widths <<< "${PMA_WIDTHS:-576 128}"
if [ ! -f "$recipe" ]; then echo "no recipe file $recipe: RECIPE names a recipe file of the repository" >&2; exit 2; fi
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
max_length=128
steps="${STEPS:-300}" min_steps="${MIN_STEPS:-60}" eval_steps="${EVAL_STEPS:-10}" patience="${PATIENCE:-2}"
batch="${BATCH:-4}" dev_pairs="${DEV_PAIRS:-32}" rows="${ROWS:-1000}"
if [ "$patience" -gt 0 ]; then
  # the held-out share that gives DEV_PAIRS pairs (the cap makes it exact), a checkpoint at every evaluation
  stopping=(
    --set "data.eval_fraction=$(awk -v d="$dev_pairs" -v r="$rows" 'BEGIN { f = 2 * d / r; print (f < 1 ? f : 0.5) }')"
    --set "data.max_eval_queries=$dev_pairs" --set "training.eval_steps=$eval_steps"
    --set "training.save_steps=$eval_steps" --set "training.dev_loss_patience=$patience"
    --set "training.dev_loss_min_steps=$min_steps"
  )
else
  stopping=(--set data.eval_fraction=0 --set training.save_steps=2)
fi
# The same data, steps, schedule and stopping rule for every variant: batches of BATCH docstring -> function pairs,
# in-batch negatives only, the dev pairs held out of the training rows (the benchmarks are the evaluation, and the
# only folders decontaminated against: the others cost CPU time here), the last checkpoint exported.
common=(
  --set "model.max_seq_length=$max_length" --set mining.enabled=false
  --set "data.decontaminate=[$decontaminate]"
  --set "data.datasets=[{name: python_docstrings, source: py_stdlib, max_rows: $rows, modules: [json, csv, email,
         logging, argparse, http, unittest, asyncio, xml, urllib, collections, pathlib, shutil, textwrap, difflib]}]"
  --set "training.max_steps=$steps" --set "training.per_device_train_batch_size=$batch"
  --set training.save_total_limit=2 --set training.warmup_steps=0 --set training.logging_steps=1
  --set merge.num_checkpoints=1 --set merge.weights=null "${stopping[@]}"
)
mkdir -p "$runs"
for variant in "${variants[@]}"; do
  name="${variant%%:*}" seed="${variant##*:}"
  case "$name" in
    pma) head=(32 "${widths[0]}" pma) ;;
    pma128) head=(32 "${widths[1]}" pma) ;;
    last_token|mean) head=(32 "${widths[0]}" "$name") ;;
    *) echo "unknown variant '$name': use pma, pma128, last_token or mean" >&2; exit 2 ;;
  esac
  out="$runs/$name-s$seed"
  if [ -f "$out/suite.json" ]; then echo "== $out: done"; continue; fi
  echo "== $out: training ($(date -u +%H:%M:%S))"
  # one key at a time: a recipe's other config_overrides (a random model's shape) stay as they are
  "$python" -m train.train "$recipe" --output-dir "$out" "${common[@]}" \
    --set "model.config_overrides.pma_num_heads=${head[0]}" --set "model.config_overrides.pma_dim=${head[1]}" \
    --set "model.config_overrides.pooling=${head[2]}" --set "training.seed=$seed" > "$out.train.log" 2>&1
  echo "== $out: evaluating ($(date -u +%H:%M:%S))"
  "$python" -m evaluation.suite --model "$out/final" --data "${benchmarks[@]}" --max-seq-length "$max_length" \
    --dtype float32 --no-progress --output "$out/suite.json.tmp" > "$out.suite.log" 2>&1
  if [ "${MTEB:-0}" = 1 ]; then
    "$python" -m evaluation.mteb_code --model "$out/final" --local-data "${benchmarks[@]}" \
      --max-seq-length "$max_length" --dtype float32 --no-progress --cache-dir "$out/mteb-cache" \
      --output "$out/mteb.json" > "$out.mteb.log" 2>&1
  fi
  mv "$out/suite.json.tmp" "$out/suite.json"
  rm -f "$out/final/model.safetensors.merged" "$out"/checkpoint-*/optimizer.pt  # keep disk use down
done
echo "== all done ($(date -u +%H:%M:%S))"
