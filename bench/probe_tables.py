"""Per-layer kNN probe tables for trec6, banking77 and clinc150 through the ``cea probe`` CLI.

For each data set runs

    cea probe --dataset D --layers all --pooling mean,cls --k 5 --output bench/results/probe-D

then reads bench/results/probe-D/results.json and prints markdown tables: rows = pooling, columns =
layer, cells = test accuracy and macro-F1 (in %). ``--no-run`` only rebuilds the tables from
existing results.json files.

    python bench/probe_tables.py [--datasets trec6,banking77,clinc150] [--no-run]
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
    out = ["| pooling | " + " | ".join(f"L{l}" for l in layers) + " |",
           "|---|" + "---:|" * len(layers)]
    for p in poolings:
        best = max(cell[(l, p)] for l in layers)
        vals = [f"**{cell[(l, p)]:.1f}**" if cell[(l, p)] == best else f"{cell[(l, p)]:.1f}" for l in layers]
        out.append(f"| {p} | " + " | ".join(vals) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="trec6,banking77,clinc150")
    ap.add_argument("--no-run", action="store_true", help="only read existing results")
    args = ap.parse_args()

    summary = {}
    markdown = []
    for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        folder = RESULTS / f"probe-{name}"
        cmd = ["cea", "probe", "--dataset", name, "--layers", "all", "--pooling", "mean,cls", "--k", "5",
               "--output", str(folder.relative_to(ROOT))]
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
        head = (f"### {name}\n\n{meta['n_references']:,} references ({meta['references']}) -> "
                f"{meta['n_queries']:,} test queries, k = {meta['k']}, source {meta['source']}; "
                f"probe total {meta['timings']['total']:.1f} s"
                + (f", CLI wall {wall:.1f} s" if wall is not None else ""))
        md = "\n\n".join([head, "Test accuracy (%):", table(rows, "accuracy", layers, poolings),
                          "Macro-F1 (%):", table(rows, "macro_f1", layers, poolings)])
        markdown.append(md)
        print("\n" + md + "\n", flush=True)
        summary[name] = {"command": shlex.join(cmd), "cli_wall_s": wall, "meta": meta,
                         "accuracy": {p: [next(r["accuracy"] for r in rows if r["layer"] == l and r["pooling"] == p)
                                          for l in layers] for p in poolings},
                         "macro_f1": {p: [next(r["macro_f1"] for r in rows if r["layer"] == l and r["pooling"] == p)
                                          for l in layers] for p in poolings}}
    (RESULTS / "probe_tables.md").write_text("\n\n".join(markdown) + "\n")
    (RESULTS / "probe_tables.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print(f"written {RESULTS / 'probe_tables.md'} and {RESULTS / 'probe_tables.json'}")


if __name__ == "__main__":
    main()
