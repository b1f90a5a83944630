#!/usr/bin/env bash
# Every summary table in experiments/minilm/results/ (the ones README.md quotes), from the per-run suite JSON that
# run_all.sh and ablations.sh write there (not in git). Run from the repository top:
#   bash experiments/minilm/tables.sh
set -euo pipefail
PY=${PY:-.venv/bin/python}
S="$PY experiments/minilm/summarize.py"

# Pooling, 30 steps, cut protocol (--max-queries 100 --max-corpus 500): results/table.md
$S
# Pooling, 160 steps, full sets
$S --name table_pooling_160_steps --columns "bm25=stock_long.bm25.json" "stock MiniLM=stock_long.json" \
  "PMA (ours)=pma_s0_long.json" "mean (ours)=mean_s0_long.json" "CLS (ours)=cls_s0_long.json"
# Grouped batches + web-style queries, merged 0.6 / 0.4 with stock (shipped)
$S --name table_grouped_web_merge --columns "bm25=stock_long.bm25.json" \
  "stock MiniLM=pma_s0_gw_m40_vs_stock.minilm.json" "PMA gw + 0.4 stock (shipped)=pma_s0_gw_m40_vs_stock.json"
# One epoch in bf16: side by side, the step curve, checkpoint averaging
$S --name table_epoch --columns "bm25=epoch_side_by_side.bm25.json" "stock MiniLM=epoch_side_by_side.minilm.json" \
  "shipped default=epoch_side_by_side.default.json" "PMA epoch, unmerged=epoch_side_by_side.pma_s0_ep.json" \
  "PMA epoch + 0.6 stock=epoch_side_by_side.json"
$S --name table_epoch_steps --columns "stock MiniLM=epoch_side_by_side.minilm.json" \
  "200 steps=epoch_checkpoints.json" "400 steps=epoch_checkpoints.checkpoint-400.json" \
  "600 steps=epoch_checkpoints.checkpoint-600.json" "800 steps=epoch_side_by_side.pma_s0_ep.json"
$S --name table_checkpoint_average --columns "stock MiniLM=checkpoint_average.minilm.json" \
  "PMA epoch + 0.6 stock=checkpoint_average.pma_s0_ep_m60.json" "checkpoint average + 0.4 stock=checkpoint_average.json"
# cosqa_dev, the only set tuned on (merge weights)
$S --name table_cosqa_dev --benchmarks cosqa_dev --columns "stock MiniLM=dev/minilm.json" \
  "gw=dev/pma_s0_gw.json" "gw + 0.2 stock=dev/pma_s0_gw_m20.json" "gw + 0.4 stock=dev/pma_s0_gw_m40.json" \
  "epoch=dev/pma_s0_ep.json" "epoch + 0.2 stock=dev/pma_s0_ep_m20.json" "epoch + 0.4 stock=dev/pma_s0_ep_m40.json" \
  "epoch + 0.6 stock=dev/pma_s0_ep_m60.json" "checkpoint average=dev/pma_s0_ep_avg4_m0.json" \
  "checkpoint average + 0.2 stock=dev/pma_s0_ep_avg4_m20.json" \
  "checkpoint average + 0.4 stock=dev/pma_s0_ep_avg4_m40.json"
# Ablations (learning rate, loss scale, prompts, padding side, pooling, seed), 200 steps: unmerged, merged 0.5 / 0.5
# with stock, inputs only, and each benchmark's best merged score
$S --name table_ablations --columns "stock MiniLM=ablation_stock.json" \
  "PMA s0=ablation_base.ablation_base.json" "PMA s1=ablation_seed1.ablation_seed1.json" \
  "mean s0=ablation_mean.ablation_mean.json" "mean s1=ablation_mean_seed1.ablation_mean_seed1.json" \
  "lr 1e-5=ablation_lr1e-5.ablation_lr1e-5.json" "lr 1e-4=ablation_lr1e-4.ablation_lr1e-4.json" \
  "scale 50=ablation_scale50.ablation_scale50.json" \
  "lr 1e-5 + scale 50=ablation_lr1e-5_scale50.ablation_lr1e-5_scale50.json" \
  "task prompts=ablation_prompts.ablation_prompts.json"
$S --name table_ablations_merged --columns "stock MiniLM=ablation_stock.json" \
  "PMA s0=ablation_base.json" "PMA s1=ablation_seed1.json" "mean s0=ablation_mean.json" \
  "mean s1=ablation_mean_seed1.json" "lr 1e-5=ablation_lr1e-5.json" "lr 1e-4=ablation_lr1e-4.json" \
  "scale 50=ablation_scale50.json" "lr 1e-5 + scale 50=ablation_lr1e-5_scale50.json" \
  "task prompts=ablation_prompts.json"
$S --name table_ablations_inputs --columns "stock MiniLM=ablation_stock.json" \
  "stock, left padding=ablation_stock.minilm_left_padding.json" "stock + task prompts=ablation_stock_prompts.json" \
  "task-prompts run=ablation_prompts.ablation_prompts.json" \
  "task-prompts run, trained prompts only=ablation_prompts_seen.json"
$S --name table_ablations_best --best-per-set "best per set" --columns \
  "stock MiniLM=ablation_stock.json" "PMA s0=ablation_base.json" "PMA s1=ablation_seed1.json" \
  "mean s0=ablation_mean.json" "mean s1=ablation_mean_seed1.json" "lr 1e-5=ablation_lr1e-5.json" \
  "lr 1e-4=ablation_lr1e-4.json" "scale 50=ablation_scale50.json" "lr 1e-5 + scale 50=ablation_lr1e-5_scale50.json"
