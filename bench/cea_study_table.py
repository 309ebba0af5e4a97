"""The CEA study table from ``bench/cea_study.sh`` runs: test kNN (k = 5), linear head and (softmax) trained head
accuracy of the epoch best on dev, per row and seed.

    python bench/cea_study_table.py bench/results/study-*

Its figures are records (``docs/records/cea_study_table.jsonl``): each cea row's head accuracy, mean of its seeds,
against the softmax row's (``the CEA study's table, D, ROW``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from common import record, results


def main() -> None:
    done: dict[tuple, list[dict]] = {}
    print(
        "| data set | row | seed | best epoch (of 10) | test kNN-5 | test linear head | test trained head | train s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for run in sorted(Path(p) for p in sys.argv[1:]):
        r = results(run)
        if r is None:
            continue
        test, history = r["metrics"]["test"], r.get("dev_history", [])
        best = max(history, key=lambda h: h.get("dev_knn_accuracy", 0)) if history else {}
        _, ds, *row, seed = run.name.split("-")
        print(
            f"| {ds} | {'-'.join(row)} | {seed[1:]} | {best.get('epoch', '-')} | {test['knn_accuracy']:.2f} "
            f"| {test.get('linear_accuracy', float('nan')):.2f} | {test.get('head_accuracy', '-')} "
            f"| {r['train_seconds']:.0f} |"
        )
        done.setdefault((ds, "-".join(row)), []).append(test)
    for (ds, row), tests in done.items():
        if row == "softmax" or "linear_accuracy" not in tests[0]:
            continue
        softmax = [t["linear_accuracy"] for t in done.get((ds, "softmax"), []) if "linear_accuracy" in t]
        record(
            f"the CEA study's table, {ds}, {row}",
            round(sum(t["linear_accuracy"] for t in tests) / len(tests), 2),
            baseline=round(sum(softmax) / len(softmax), 2) if softmax else None,
            unit=f"% test accuracy, mean of {len(tests)} seeds",
            section="studies",
            baseline_is="softmax fine-tuning",
            command="bash bench/cea_study.sh " + ds + " S softmax " + row,
            note=f"the head; kNN-5 {sum(t['knn_accuracy'] for t in tests) / len(tests):.2f}",
        )


if __name__ == "__main__":
    main()
