"""Issue 4: SimCSE versus miCSE from all-MiniLM-L6-v2 on N unlabelled sentences of stsb's train split
(N drawn with the seed), 1 epoch, batch 64, lr 3e-5, temperature 0.05; stsb test Spearman.

    python bench/simcse_micse.py --sizes 1000,10000 --seeds 0,1,2 [--micse-lambda 0.1] [--objectives micse]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from cea.training import TrainConfig, train

R = Path("bench/results/simcse_micse")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--micse-lambda", type=float, default=0.1)
    parser.add_argument("--objectives", default="simcse,micse", help="run only these (e.g. a missing seed)")
    args = parser.parse_args()
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        for seed in [int(s) for s in args.seeds.split(",")]:
            for objective in args.objectives.split(","):
                folder = R / f"{objective}-n{size}-seed{seed}"
                if (folder / "results.json").exists():
                    result = json.loads((folder / "results.json").read_text())
                else:
                    extra = {"micse_lambda": args.micse_lambda} if objective == "micse" else {}
                    result = train(TrainConfig(dataset="stsb", objective=objective, train_limit=size, limit_seed=seed,
                                               seed=seed, epochs=1, batch_size=64, lr=3e-5, output=str(folder),
                                               options=extra), progress=False)
                rows.append({"objective": objective, "size": size, "seed": seed, "n_train": result["n_train"],
                             "test_spearman": result["metrics"]["test"]["spearman"],
                             "dev_spearman": result["metrics"]["dev"]["spearman"],
                             "train_seconds": result["train_seconds"]})
                print(json.dumps(rows[-1]), flush=True)
    R.mkdir(parents=True, exist_ok=True)
    (R / "summary.json").write_text(json.dumps(rows, indent=2))
    print("\n| sentences | objective | stsb test Spearman (mean ± std) | per seed | train s (mean) |\n|---:|---|---:|---|---:|")
    for size in sorted({r["size"] for r in rows}):
        for objective in args.objectives.split(","):
            sel = [r for r in rows if r["size"] == size and r["objective"] == objective]
            values = [r["test_spearman"] for r in sel]
            print(f"| {size} | {objective} | {np.mean(values):.2f} ± {np.std(values):.2f} | "
                  f"{', '.join(f'{v:.2f}' for v in values)} | {np.mean([r['train_seconds'] for r in sel]):.0f} |")


if __name__ == "__main__":
    main()
