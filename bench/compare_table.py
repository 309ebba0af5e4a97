"""Markdown table of `cea compare` grid folders, from their finished runs (also while they run).

    python bench/compare_table.py bench/results/compare-trec6 [bench/results/compare-banking77 ...]
    python bench/compare_table.py --record docs/records/compare.jsonl bench/results/compare-trec6
    python bench/compare_table.py --record docs/records/compare.jsonl --time-seeds 1,2 ...

A grid of 3 seeds x 9 settings on banking77 takes longer than one working session on this machine,
and run folders are not kept between sessions. ``--record FILE`` appends each finished run's figures to FILE as
records (``common.record``: the figure ``objectives grid, D, SETTING, seed S``, its kNN-5 test accuracy, and the
data set, setting, seed, test metrics, time, memory; no model, no data) and builds the table from FILE and the
folders together, so a grid can be completed over sessions.
``--time-seeds`` takes time and memory from those seeds only (runs measured under the same
conditions), accuracy from every seed.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import common
from common import results


def rows_of(folder: Path) -> list[dict]:
    rows = []
    for setting in sorted(p for p in folder.iterdir() if p.is_dir()):
        for path in sorted(setting.glob("seed-*/results.json")):
            r = results(path.parent)
            test = r["metrics"]["test"]
            rows.append(
                {
                    "dataset": r["config"]["dataset"],
                    "setting": setting.name,
                    "seed": r["config"]["seed"],
                    "epochs": r["config"]["epochs"],
                    "knn_accuracy": test["knn_accuracy"],
                    "knn_macro_f1": test["knn_macro_f1"],
                    "head_accuracy": test.get("head_accuracy"),
                    "seconds_per_epoch": r["seconds_per_epoch"],
                    "peak_memory_mb": r["peak_memory_mb"],
                    "finished": time.strftime("%Y-%m-%d", time.gmtime(path.stat().st_mtime)),
                }
            )
    return rows


def merge(record: Path | None, folders: list[Path]) -> list[dict]:
    """Rows of the record and of the folders; a run in both keeps the record's (first measured) figures."""
    kept = {}
    if record is not None and record.exists():
        for line in record.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                kept[(r["dataset"], r["setting"], r["seed"])] = r
    new = [r for f in folders for r in rows_of(f) if (r["dataset"], r["setting"], r["seed"]) not in kept]
    if record is not None and new:
        common.RECORDS = record.parent
        for r in new:
            common.record(
                f"objectives grid, {r['dataset']}, {r['setting'].rstrip('_')}, seed {r['seed']}",
                r["knn_accuracy"],
                unit="% kNN-5 test accuracy",
                name=record.stem,
                section="4",
                **r,
            )
    for r in new:
        kept[(r["dataset"], r["setting"], r["seed"])] = r
    return list(kept.values())


def stat(runs: list[dict], key: str, seeds: set[int] | None = None) -> str:
    """``key``'s mean ± sd over ``runs`` (those of ``seeds`` where given); "-" where none."""
    v = np.array([r[key] for r in runs if seeds is None or r["seed"] in seeds], float)
    if len(v) == 0:
        return "-"
    return f"{v.mean():.2f} ± {v.std():.2f}" if len(v) > 1 else f"{v[0]:.2f}"


def table(rows: list[dict], dataset: str, time_seeds: set[int] | None = None) -> str:
    lines = [
        f"### {dataset}",
        "",
        "| setting | seeds | kNN accuracy | macro-F1 | head accuracy | s / epoch | peak MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for setting in sorted({r["setting"] for r in rows if r["dataset"] == dataset}):
        runs = sorted((r for r in rows if r["dataset"] == dataset and r["setting"] == setting), key=lambda r: r["seed"])
        head = stat(runs, "head_accuracy") if all(r["head_accuracy"] is not None for r in runs) else "-"
        seeds = ",".join(str(r["seed"]) for r in runs)
        lines.append(
            f"| {setting} | {seeds} | {stat(runs, 'knn_accuracy')} | {stat(runs, 'knn_macro_f1')} | {head} | "
            f"{stat(runs, 'seconds_per_epoch', time_seeds)} | {stat(runs, 'peak_memory_mb', time_seeds)} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--record", type=Path, default=None)
    parser.add_argument("--time-seeds", default=None, help="e.g. 1,2: time and memory from these seeds only")
    args = parser.parse_args()
    time_seeds = None if args.time_seeds is None else {int(x) for x in args.time_seeds.split(",")}
    all_rows = merge(args.record, [f for f in args.folders if f.exists()])
    print("\n\n".join(table(all_rows, d, time_seeds) for d in sorted({r["dataset"] for r in all_rows})))
