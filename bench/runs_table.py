"""Markdown rows of finished `cea train` runs: the bundle's head (logistic regression on the trained embeddings),
kNN-5 and the trained head on test, epochs, steps, training seconds and dev (linear head) at the judged epochs.

    python bench/runs_table.py bench/results/epochs-*
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def row(folder: Path) -> str:
    r = json.loads((folder / "results.json").read_text())
    test = r["metrics"]["test"]
    dev = ", ".join(f"{100 * h['dev_linear_accuracy']:.2f}" for h in r["dev_history"] if "dev_linear_accuracy" in h)
    cells = [folder.name, test.get("linear_accuracy"), test.get("knn_accuracy"), test.get("head_accuracy", "-"),
             f"{r['epochs']:g}", r["steps"], f"{r['train_seconds']:.0f}", dev or "-"]
    return "| " + " | ".join(str(c) for c in cells) + " |"


if __name__ == "__main__":
    print("| run | head | kNN-5 | trained head | epochs | steps | train s | dev head by judged epoch |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name in sys.argv[1:]:
        if (Path(name) / "results.json").exists():
            print(row(Path(name)))
