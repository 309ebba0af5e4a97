#!/usr/bin/env bash
# Issue 16, session 14 (docs/benchmarks.md section 21): softmax's epochs on small training sets. Each run is a plain
# `cea train` with the defaults, `--epochs E` where given; finished runs are reused.
#   bash bench/epochs_rule.sh DATASET SHOTS SEEDS EPOCHS...    # SHOTS 0: the full train split; EPOCHS "default" or a number
# DATASET: a catalog name or a folder of train/dev/test files (bench/heldout_sets.py), runs named by its base name.
#   python bench/runs_table.py bench/results/epochs-*
# e.g. bash bench/epochs_rule.sh trec50 0 0,1,2 default 6 10 and bash bench/epochs_rule.sh banking77 8 0,1,2 default 3.
# Few-shot sample S trains with --seed S as in section 19.2; TRAIN_SEED=0 runs the issue's acceptance line instead
# (`--shots 8 --shots-seed S`, no --seed: training seed 0 for every sample; section 21's banking77 rows).
# On 2 cores: two of these side by side, OMP_NUM_THREADS=1 each.
set -euo pipefail
cd "$(dirname "$0")/.."
ds=$1 shots=$2 seeds=$3 name=$(basename "$1")
shift 3
for epochs in "$@"; do
  for s in ${seeds//,/ }; do
    if [ "$shots" = 0 ]; then args=(--seed "$s"); tag="$name-full-s$s"; else args=(--shots "$shots" --shots-seed "$s" --seed "${TRAIN_SEED:-$s}"); tag="$name-${shots}shot-s$s"; fi
    [ "$epochs" = default ] || args+=(--epochs "$epochs")
    out="bench/results/epochs-$tag-e$epochs"
    [ -f "$out/results.json" ] || cea train --dataset "$ds" "${args[@]}" --output "$out"
  done
done
