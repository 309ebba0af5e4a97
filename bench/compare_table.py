"""Markdown table of a `cea compare` grid folder, from its finished runs (also while it is running).

    python bench/compare_table.py bench/results/compare-trec6 [bench/results/compare-banking77 ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def table(folder: Path) -> str:
    lines = [f"### {folder.name}", "",
             "| setting | runs | kNN accuracy | macro-F1 | head accuracy | s / epoch | peak MB |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for setting in sorted(p for p in folder.iterdir() if p.is_dir()):
        results = [json.loads(f.read_text()) for f in sorted(setting.glob("seed-*/results.json"))]
        if not results:
            continue
        def stat(get):
            v = np.array([get(r) for r in results], float)
            return f"{v.mean():.2f} ± {v.std():.2f}" if len(v) > 1 else f"{v[0]:.2f}"
        head = (stat(lambda r: r["metrics"]["test"]["head_accuracy"])
                if all("head_accuracy" in r["metrics"]["test"] for r in results) else "-")
        lines.append(f"| {setting.name} | {len(results)} | {stat(lambda r: r['metrics']['test']['knn_accuracy'])} | "
                     f"{stat(lambda r: r['metrics']['test']['knn_macro_f1'])} | {head} | "
                     f"{stat(lambda r: r['seconds_per_epoch'])} | {stat(lambda r: r['peak_memory_mb'])} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print("\n\n".join(table(Path(p)) for p in sys.argv[1:]))
