"""Per-layer kNN probe tables for trec6, banking77 and clinc150 through the ``cea probe`` CLI.

For each data set runs

    cea probe --dataset D --layers all --pooling mean,cls --k 5 --output bench/results/probe-D

then reads bench/results/probe-D/results.json and prints markdown tables: rows = pooling, columns =
layer, cells = test accuracy and macro-F1 (in %). ``--no-run`` only rebuilds the tables from
existing results.json files.

``--precisions fp32,bf16`` probes each set once per encoding precision (``cea probe --precision P --no-cache``,
one after the other, into bench/results/probe-D-P) and prints, per set, each precision's encode seconds and how far
its table moved from the first precision's (the largest change of any cell, and of the mean-pooled cells): the
test of issue 33 item 2 (a table may move at most 0.1 point for bf16 encoding to become the default).

    python bench/probe_tables.py [--datasets trec6,banking77,clinc150] [--no-run]
    python bench/probe_tables.py --precisions fp32,bf16
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from common import results

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"


def table(rows: list[dict], metric: str, layers: list[int], poolings: list[str]) -> str:
    cell = {(r["layer"], r["pooling"]): r[metric] for r in rows}
    out = ["| pooling | " + " | ".join(f"L{layer}" for layer in layers) + " |", "|---|" + "---:|" * len(layers)]
    for p in poolings:
        best = max(cell[(layer, p)] for layer in layers)
        vals = [
            f"**{cell[(layer, p)]:.1f}**" if cell[(layer, p)] == best else f"{cell[(layer, p)]:.1f}" for layer in layers
        ]
        out.append(f"| {p} | " + " | ".join(vals) + " |")
    return "\n".join(out)


def probe_command(name: str, folder: Path, *extra: str) -> list[str]:
    """``cea probe`` of every layer, mean and CLS pooling, kNN-5 on data set ``name``, into ``folder``."""
    return [
        "cea",
        "probe",
        "--dataset",
        name,
        "--layers",
        "all",
        "--pooling",
        "mean,cls",
        "--k",
        "5",
        *extra,
        "--output",
        str(folder.relative_to(ROOT)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="trec6,banking77,clinc150")
    ap.add_argument("--no-run", action="store_true", help="only read existing results")
    ap.add_argument("--precisions", default=None, help="e.g. fp32,bf16: each set once per precision, compared")
    args = ap.parse_args()
    if args.precisions:
        return compare_precisions(
            [d.strip() for d in args.datasets.split(",") if d.strip()],
            [p.strip() for p in args.precisions.split(",") if p.strip()],
            args.no_run,
        )

    summary = {}
    markdown = []
    for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        folder = RESULTS / f"probe-{name}"
        cmd = probe_command(name, folder)
        wall = None
        if not args.no_run:
            print("$ " + shlex.join(cmd), flush=True)
            t0 = time.perf_counter()
            done = subprocess.run(cmd, cwd=ROOT)
            wall = time.perf_counter() - t0
            if done.returncode:
                sys.exit(f"{name}: cea probe failed with exit code {done.returncode}")
        data = results(folder)
        rows, meta = data["rows"], data["meta"]
        layers = sorted({r["layer"] for r in rows})
        poolings = list(meta["poolings"])
        head = (
            f"### {name}\n\n{meta['n_references']:,} references ({meta['references']}) -> "
            f"{meta['n_queries']:,} test queries, k = {meta['k']}, source {meta['source']}; "
            f"probe total {meta['timings']['total']:.1f} s" + (f", CLI wall {wall:.1f} s" if wall is not None else "")
        )
        md = "\n\n".join(
            [
                head,
                "Test accuracy (%):",
                table(rows, "accuracy", layers, poolings),
                "Macro-F1 (%):",
                table(rows, "macro_f1", layers, poolings),
            ]
        )
        markdown.append(md)
        print("\n" + md + "\n", flush=True)
        summary[name] = {
            "command": shlex.join(cmd),
            "cli_wall_s": wall,
            "meta": meta,
            "accuracy": {
                p: [next(r["accuracy"] for r in rows if r["layer"] == layer and r["pooling"] == p) for layer in layers]
                for p in poolings
            },
            "macro_f1": {
                p: [next(r["macro_f1"] for r in rows if r["layer"] == layer and r["pooling"] == p) for layer in layers]
                for p in poolings
            },
        }
    (RESULTS / "probe_tables.md").write_text("\n\n".join(markdown) + "\n")
    (RESULTS / "probe_tables.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print(f"written {RESULTS / 'probe_tables.md'} and {RESULTS / 'probe_tables.json'}")


def compare_precisions(datasets: list[str], precisions: list[str], no_run: bool) -> None:
    """Each set probed once per precision (no cache: each encodes), then each table against the first's."""
    lines = [
        "| data set | precision | encode s | x the first | largest change of a cell | of a mean-pooled cell |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name in datasets:
        runs = {}
        for precision in precisions:
            folder = RESULTS / f"probe-{name}-{precision}"
            cmd = probe_command(name, folder, "--precision", precision, "--no-cache")
            if not no_run:
                print("$ " + shlex.join(cmd), flush=True)
                if subprocess.run(cmd, cwd=ROOT).returncode:
                    sys.exit(f"{name} {precision}: cea probe failed")
            data = results(folder)
            runs[precision] = (
                {(r["layer"], r["pooling"]): r["accuracy"] for r in data["rows"]},
                next(v for k, v in data["meta"]["timings"].items() if k.startswith("encode")),
            )
        base, base_s = runs[precisions[0]]
        for precision, (cells, seconds) in runs.items():
            moved = {key: cells[key] - base[key] for key in base}
            worst = max(moved, key=lambda key: abs(moved[key]))
            mean_worst = max((k for k in moved if k[1] == "mean"), key=lambda key: abs(moved[key]))
            lines.append(
                f"| {name} | {precision} | {seconds:.1f} | {base_s / seconds:.2f} | "
                f"{moved[worst]:+.2f} (L{worst[0]} {worst[1]}) | "
                f"{moved[mean_worst]:+.2f} (L{mean_worst[0]} mean) |"
            )
    print("\n".join(lines))
    (RESULTS / "probe_precisions.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
