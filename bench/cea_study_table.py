"""The CEA study table from ``bench/cea_study.sh`` runs: test kNN (k = 5), linear head and (softmax) trained head
accuracy of the epoch best on dev, per row and seed.

    python bench/cea_study_table.py bench/results/study-*
"""

from __future__ import annotations

import sys
from pathlib import Path

from common import results


def main() -> None:
    print("| data set | row | seed | best epoch (of 10) | test kNN-5 | test linear head | test trained head | train s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for run in sorted(Path(p) for p in sys.argv[1:]):
        r = results(run)
        if r is None:
            continue
        test, history = r["metrics"]["test"], r.get("dev_history", [])
        best = max(history, key=lambda h: h.get("dev_knn_accuracy", 0)) if history else {}
        _, ds, *row, seed = run.name.split("-")
        print(f"| {ds} | {'-'.join(row)} | {seed[1:]} | {best.get('epoch', '-')} | {test['knn_accuracy']:.2f} "
              f"| {test.get('linear_accuracy', float('nan')):.2f} | {test.get('head_accuracy', '-')} "
              f"| {r['train_seconds']:.0f} |")


if __name__ == "__main__":
    main()
