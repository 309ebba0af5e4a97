#!/usr/bin/env bash
# Issue 4 benchmarks, all-MiniLM-L6-v2, in order of cost. Finished runs are reused.
#   1. stsb: frozen Spearman per layer and cosine-regression per truncated depth (1 epoch, batch 16,
#      lr 2e-5), the best depth by dev re-run with seeds 1 and 2;
#   2. top-1/2/3 retrieval and MRR on banking77 and clinc150, frozen and after cea (pairs all, 1 epoch);
#   3. SimCSE versus miCSE on 1,000 and 10,000 stsb train sentences, 3 seeds (bench/simcse_micse.py).
set -euo pipefail
cd "$(dirname "$0")/.."
R=bench/results
cea sweep-layers --dataset stsb --seeds 0,1,2 --epochs 1 --batch-size 16 --lr 2e-5 --output $R/sweep-stsb
python bench/retrieval.py
python bench/simcse_micse.py --sizes 1000,10000 --seeds 0,1,2
