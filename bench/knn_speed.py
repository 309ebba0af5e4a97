"""Exact cosine kNN speed: scikit-learn brute force and FAISS's flat index versus cea.knn.KNNClassifier.

Random unit vectors (seed 0) as references and queries, random labels; every method is timed as
fit + predict, the methods alternate inside each repeat, and the medians are reported.

    python bench/knn_speed.py                      # 100k refs x 384 d, 10k queries, 3 repeats
    CEA_RECORD=0 python bench/knn_speed.py --refs 20000 --queries 2000 --repeats 1   # quick, no record
    python bench/knn_speed.py --avx2               # an AVX2-only CPU's kernels (AVX-512 and VNNI off everywhere)

Its figure is a record (``docs/records/knn_speed.jsonl``): cea's ``auto`` backend's median seconds against
scikit-learn's brute force.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from common import avx2_only, record

RESULTS = Path(__file__).resolve().parent / "results"
BACKENDS = ("auto", "torch", "faiss")


def unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def parse() -> argparse.Namespace:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--refs", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--classes", type=int, default=77)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--output", type=Path, default=None, help="JSON file (default bench/results/knn_speed-...json)")
    ap.add_argument("--avx2", action="store_true", help="AVX-512 and VNNI off in every library (common.avx2_only)")
    return ap.parse_args()


def contenders(args: argparse.Namespace, X: np.ndarray, Q: np.ndarray, y: np.ndarray) -> dict:
    """Each method's run (fit on ``X``, ``y``, predict ``Q``): its predictions and what it reports of itself."""
    from sklearn.neighbors import KNeighborsClassifier

    from cea.knn import KNNClassifier
    from cea.knn.classifier import vote

    def run_sklearn():
        return KNeighborsClassifier(n_neighbors=args.k, metric="cosine", algorithm="brute").fit(X, y).predict(Q), {}

    def run_cea(backend):
        def go():
            knn = KNNClassifier(n_neighbors=args.k, tie_break="smallest", backend=backend).fit(X, y)
            pred = knn.predict(Q)
            return pred, {"backend_": knn.backend_, "n_fallback_": knn.n_fallback_}

        return go

    def run_faiss():  # FAISS's own flat index and the majority vote (ties to the smallest label, as cea's here)
        import faiss

        index = faiss.IndexFlatIP(X.shape[1])
        index.add(X)
        return vote(y[index.search(Q, args.k)[1]], args.classes, tie_break="smallest")[0], {}

    return {"sklearn": run_sklearn, "faiss": run_faiss, **{f"cea-{b}": run_cea(b) for b in BACKENDS}}


@dataclass
class Runs:
    """Each method's seconds per repeat, its last predictions, and what it reported each repeat."""

    times: dict[str, list[float]]
    preds: dict[str, np.ndarray]
    extra: dict[str, list[dict]]


def timed(methods: dict, repeats: int) -> Runs:
    """Every method ``repeats`` times, the one going first rotating each repeat; each run printed."""
    runs = Runs({m: [] for m in methods}, {}, {m: [] for m in methods})
    names = list(methods)
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]  # rotate who goes first
        for m in order:
            t0 = time.perf_counter()
            pred, info = methods[m]()
            runs.times[m].append(time.perf_counter() - t0)
            runs.extra[m].append(info)
            if m in runs.preds and not np.array_equal(runs.preds[m], pred):
                print(f"warning: {m} predictions changed between repeats")
            runs.preds[m] = pred
            print(f"repeat {r + 1}/{repeats} {m:10s} {runs.times[m][-1]:8.2f} s {info}", flush=True)
    return runs


def summary_rows(runs: Runs) -> list[dict]:
    """Each method's row: median and min seconds, its speed-up on scikit-learn and agreement with it."""
    med = {m: statistics.median(t) for m, t in runs.times.items()}
    rows = []
    for m in runs.times:
        row = {
            "method": m,
            "median_s": med[m],
            "min_s": min(runs.times[m]),
            "times_s": runs.times[m],
            "speedup_vs_sklearn": med["sklearn"] / med[m],
            "agreement_with_sklearn": float(np.mean(runs.preds[m] == runs.preds["sklearn"])),
        }
        if m.startswith("cea-"):
            row["backend_"] = runs.extra[m][-1]["backend_"]
            row["n_fallback_"] = [e["n_fallback_"] for e in runs.extra[m]]
        rows.append(row)
    return rows


def print_table(args: argparse.Namespace, rows: list[dict]) -> None:
    """The rows as a Markdown table under a line naming the run."""
    print()
    print(
        f"exact kNN, {args.refs:,} refs x {args.dim} d, {args.queries:,} queries, k={args.k}, "
        f"{args.classes} labels, median of {args.repeats} (fit + predict)"
    )
    print()
    print(
        "| method | backend used | median time (s) | min (s) | sklearn / method (medians) | "
        "agreement with sklearn | n_fallback_ |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for row in rows:
        fb = f"{row['n_fallback_'][-1]:,} / {args.queries:,}" if row.get("backend_") == "int8" else ""
        print(
            f"| {row['method']} | {row.get('backend_', 'own')} | {row['median_s']:.2f} | {row['min_s']:.2f} | "
            f"{row['speedup_vs_sklearn']:.2f}x | {row['agreement_with_sklearn']:.6f} | {fb} |"
        )


def main() -> None:
    args = parse()
    if args.avx2:
        avx2_only()

    import torch

    rng = np.random.default_rng(0)
    X = unit(rng, args.refs, args.dim)
    Q = unit(rng, args.queries, args.dim)
    y = rng.integers(0, args.classes, args.refs)
    runs = timed(contenders(args, X, Q, y), args.repeats)
    rows = summary_rows(runs)
    print_table(args, rows)

    out = {
        "config": vars(args) | {"output": None},
        "rows": rows,
        "loadavg_at_end": Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else None,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
    }
    path = args.output or RESULTS / f"knn_speed-{args.refs}x{args.dim}-q{args.queries}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nwritten {path}")
    best = next(r for r in rows if r["method"] == "cea-auto")
    faiss = next(r for r in rows if r["method"] == "faiss")
    sklearn = next(r for r in rows if r["method"] == "sklearn")
    kernels = ", AVX2 kernels" if args.avx2 else ""  # another machine's figure: a figure of its own
    record(
        f"exact kNN, {args.refs:,} x {args.queries:,}, {args.dim}-d{kernels}",
        round(best["median_s"], 2),
        baseline=round(sklearn["median_s"], 2),
        unit="s",
        section="speed",
        baseline_is="scikit-learn brute",
        note=f"{best['backend_']}; agrees on {best['agreement_with_sklearn']:.4f}"
        + f"; FAISS IndexFlatIP {faiss['median_s']:.2f} s",
    )


if __name__ == "__main__":
    main()
