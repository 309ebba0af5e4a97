#!/usr/bin/env bash
# Issue 16: the CEA study's central table under its protocol (lr 5e-5, batch 32, up to 10 epochs, the epoch
# best on dev kept), all-MiniLM-L6-v2 (the study: ELECTRA-small and BERT-base), P x K batches (K = 4).
#   bash bench/cea_study.sh DATASET SEED ROW...     (rows below; finished runs are reused)
#   python bench/cea_study_table.py bench/results/study-*
# On 2 cores: two of these side by side, OMP_NUM_THREADS=1 each, with different rows. Label names off: the study
# had none (the rows of sections 15.5 and 18.5 ran before cea had them).
set -euo pipefail
cd "$(dirname "$0")/.."
ds=$1 seed=$2
shift 2
declare -A ROWS=(
  [softmax]="--objective softmax --head-init random"   # the study's fine-tuning: a randomly started head
  [softmax-probe]="--objective softmax"                # cea's default since section 19: the head from the probe
  [cea-sampled]="--objective cea --pairs sampled"
  [cea-sampled-class]="--objective cea --pairs sampled --memory class"
  [cea-sampled-mixed]="--objective cea --pairs sampled --memory mixed"
  [cea-sampled-datapoint]="--objective cea --pairs sampled --memory datapoint"
  [cea-all]="--objective cea --pairs all"
  [cea-all-class]="--objective cea --pairs all --memory class"
  [cea-all-datapoint]="--objective cea --pairs all --memory datapoint"
)
for row in "$@"; do
  out="bench/results/study-$ds-$row-s$seed"
  [ -f "$out/results.json" ] && continue
  # shellcheck disable=SC2086
  python -m cea train --dataset "$ds" ${ROWS[$row]} --lr 5e-5 --batch-size 32 --epochs 10 --select best \
    --label-names off --seed "$seed" --output "$out"
  rm -rf "$out/checkpoints"  # ten epochs of checkpoints with optimizer state: about 2.5 GB a row
done
