#!/usr/bin/env bash
# The pooling ablation on SmolLM2-135M-Instruct (experiments/smollm2/README.md): the product recipe
# train/configs/smollm2-cpu.yaml, scaled down further so that all runs fit about 50 CPU-minutes on 2 shared cores,
# with only the pooling (or the PMA width) and the seed changing between runs; then the product evaluation (nDCG@10,
# python -m evaluation.suite: mteb's retrieval runner on each folder as a local task) on BENCHMARKS.
#
#   nice -n 10 bash experiments/smollm2/run_ablation.sh RUNS_DIR [VARIANT ...]
#
# STEPS (default 4) and ROWS (default 400) scale the training for the learning curve (one RUNS_DIR per STEPS).
# BENCHMARKS (default "humaneval humanevalx_py2cpp": text -> Python and Python -> C++, the two cheapest of the nine
# reported sets, 328 texts each) names folders of ../shared/data/benchmarks; training drops rows that overlap any.
# One torch thread per run (OMP_NUM_THREADS=1 unless set): two runs side by side on 2 cores, no oversubscription.
# VARIANT is NAME:SEED, NAME one of pma, last_token, mean, pma128 (default: the first three at seeds 0 and 1, then
# pma128 at seeds 0 and 1). Each finished run leaves RUNS_DIR/NAME-sSEED/suite.json (and mteb.json with MTEB=1: the
# MTEB-Code runner, evaluation.mteb_code, encodes the same texts again); a rerun skips runs whose suite.json
# exists. Two scripts with disjoint variants may run side by side on one RUNS_DIR.
# The table: python experiments/smollm2/summarize.py RUNS_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:?usage: bash experiments/smollm2/run_ablation.sh RUNS_DIR [NAME:SEED ...]}"
shift
variants=("$@")
if [ ${#variants[@]} -eq 0 ]; then
  variants=(pma:0 last_token:0 mean:0 pma:1 last_token:1 mean:1 pma128:0 pma128:1)
fi
read -r -a benchmarks <<< "${BENCHMARKS:-humaneval humanevalx_py2cpp}"
benchmarks=("${benchmarks[@]/#/../shared/data/benchmarks/}")
for folder in "${benchmarks[@]}"; do
  if [ ! -d "$folder" ]; then
    echo "no benchmark folder $folder: BENCHMARKS names folders of ../shared/data/benchmarks" >&2; exit 2
  fi
done
decontaminate=$(IFS=,; echo "${benchmarks[*]}")
python="${PYTHON:-python}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
max_length=128
steps="${STEPS:-4}" rows="${ROWS:-400}"
# The same data, steps and seed for every variant: STEPS steps of 16 docstring -> function pairs (64 by default),
# in-batch negatives only, no held-out split (the benchmarks are the evaluation, and the only folders decontaminated
# against: the others cost CPU time here), the last checkpoint exported.
common=(
  --set "model.max_seq_length=$max_length" --set mining.enabled=false --set data.eval_fraction=0
  --set "data.decontaminate=[$decontaminate]"
  --set "data.datasets=[{name: python_docstrings, source: py_stdlib, max_rows: $rows, modules: [json, csv, email,
         logging, argparse, http, unittest, asyncio, xml, urllib, collections, pathlib, shutil, textwrap, difflib]}]"
  --set "training.max_steps=$steps" --set training.save_steps=2 --set training.save_total_limit=2
  --set training.warmup_steps=0 --set training.logging_steps=1 --set merge.num_checkpoints=1
  --set merge.weights=null
)
mkdir -p "$runs"
for variant in "${variants[@]}"; do
  name="${variant%%:*}" seed="${variant##*:}"
  case "$name" in
    pma) head='{pma_num_heads: 32, pma_dim: 576, pooling: pma}' ;;
    pma128) head='{pma_num_heads: 32, pma_dim: 128, pooling: pma}' ;;
    last_token|mean) head="{pma_num_heads: 32, pma_dim: 576, pooling: $name}" ;;
    *) echo "unknown variant '$name': use pma, pma128, last_token or mean" >&2; exit 2 ;;
  esac
  out="$runs/$name-s$seed"
  if [ -f "$out/suite.json" ]; then echo "== $out: done"; continue; fi
  echo "== $out: training ($(date -u +%H:%M:%S))"
  "$python" -m train.train train/configs/smollm2-cpu.yaml --output-dir "$out" "${common[@]}" \
    --set "model.config_overrides=$head" --set "training.seed=$seed" > "$out.train.log" 2>&1
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
