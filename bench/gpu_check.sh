#!/bin/bash
# The GPU checks of tables section 28, in one go on a machine with one CUDA GPU:
#   1. the tests that touch the device (CUDA test, encoders, objectives, training);
#   2. one banking77 epoch of the defaults per precision (--precision bf16 / fp32) and chunking
#      (--chunk-size auto / 0), each a `cea train` of its own, training seconds from results.json;
#   3. the probe tables of trec6, banking77 and clinc150 with fp32 and bf16 weights (--no-cache), compared
#      by `python bench/probe_tables.py --precisions fp32,bf16 --no-run` where the folders are in bench/results.
# Usage: bash bench/gpu_check.sh [MODEL] [DATA_PREFIX]   (defaults: all-MiniLM-L6-v2, the catalog's names;
# DATA_PREFIX is a folder holding banking77/, trec6/, clinc150/ as train/dev/test files where the catalog is
# out of reach). Writes under bench/results/gpu/.
set -u
cd "$(dirname "$0")/.."
model=${1:-all-MiniLM-L6-v2}
prefix=${2:-}
out=bench/results/gpu
mkdir -p $out
echo "=== tests on $(python -c 'import torch; print(torch.cuda.get_device_name())')"
python -m pytest -q -p no:cacheprovider -rfEs --tb=line tests/encoders/test_device.py tests/encoders/test_build_and_embed.py \
    tests/training tests/objectives 2>&1 | tail -15
for run in "bf16 auto" "fp32 auto" "fp32 0" "bf16 0"; do
    set -- $run
    echo "=== banking77, one epoch, precision $1, chunk size $2"
    python -m cea train --dataset ${prefix:+$prefix/}banking77 --model $model --epochs 1 --device cuda \
        --precision $1 --chunk-size $2 --output $out/train-banking77-$1-chunks$2 2>&1 | grep -E "test|training"
done
for name in trec6 banking77 clinc150; do
    for precision in fp32 bf16; do
        echo "=== probe $name $precision"
        python -m cea probe --dataset ${prefix:+$prefix/}$name --models $model --layers all --pooling mean,cls --k 5 \
            --device cuda --precision $precision --no-cache --output bench/results/probe-$name-$precision 2>&1 | tail -2
    done
done
python bench/probe_tables.py --precisions fp32,bf16 --no-run
