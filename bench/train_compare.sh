#!/usr/bin/env bash
# Issue 3 acceptance grid: the frozen model and eight training settings, all-MiniLM-L6-v2, 1 epoch,
# batch 32, lr 5e-5, P x K sampler (K = 4), test kNN (k = 5) with train references.
# Finished runs are reused, so the script can be stopped and restarted; seed 0 of both data sets first.
# On a 2-core machine two of these grids side by side with OMP_NUM_THREADS=1 each (e.g. one per data
# set) use the machine better than one with 2 threads (measured for embedding: 10% sooner,
# docs/benchmarks.md section 10). Then record the figures, so a grid can be
# finished over sessions: python bench/compare_table.py --record docs/records/compare.jsonl bench/results/compare-*
set -euo pipefail
cd "$(dirname "$0")/.."
SETTINGS="softmax,cea[pairs=sampled],cea[pairs=all],cea[pairs=all,memory=bank,memory_size=4096],cea[pairs=all,memory=datapoint],triplet,supcon,normalized-softmax"
for seeds in 0 0,1 0,1,2; do
  for ds in trec6 banking77; do
    cea compare --dataset "$ds" --objectives "$SETTINGS" --seeds "$seeds" --epochs 1 \
      --output "bench/results/compare-$ds"
  done
done
