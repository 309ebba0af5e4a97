"""What probing every layer costs compared with a plain sentence-transformers encode.

(a) ``model.encode(texts, batch_size=64)``: sentence-transformers, last layer only.
(b) ``cea.encoders.encode_layers(model, texts, layers=0..6, poolings=[mean, cls])``: all 7 hidden
    states, both poolings, one forward pass.  (a) and (b) alternate, 3 repeats, medians; target b/a <= 1.3.
(c) ``cea.evaluation.probe(...)`` through the API with an empty temporary embedding store on disk
    (``cea.encoders.store.EmbeddingStore``), then the same call again with a fresh store on the same folder
    (answered from the disk); target second/first < 10 %. Model loading is part of probe() and is included in
    both wall times.

    python bench/probe_cost.py [--dataset trec6] [--repeats 3]

Its figure is a record (``docs/records/probe_cost.jsonl``): every layer's encode against one
``model.encode``, and the repeated probe's share where it ran.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from common import record

RESULTS = Path(__file__).resolve().parent / "results"
MODEL = "all-MiniLM-L6-v2"


def parse() -> argparse.Namespace:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="trec6")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="use only the first N texts in (a)/(b) (quick runs)")
    ap.add_argument("--skip-probe", action="store_true", help="skip part (c)")
    return ap.parse_args()


def encode_times(model, texts: list[str], layers: list[int], repeats: int) -> dict[str, list[float]]:
    """(a) and (b)'s seconds, alternating for ``repeats`` repeats after an untimed warm-up of both; each printed."""
    import cea.encoders

    def run_a():
        return model.encode(texts, batch_size=64)

    def run_b():
        return cea.encoders.encode_layers(model, texts, layers=layers, poolings=["mean", "cls"], progress=False)

    # untimed warm-up of both paths on one batch (first-call allocations, lazy imports)
    model.encode(texts[:64], batch_size=64)
    cea.encoders.encode_layers(model, texts[:64], layers=layers, poolings=["mean", "cls"], progress=False)

    times = {"a": [], "b": []}
    for r in range(repeats):
        for key, fn in (("a", run_a), ("b", run_b)) if r % 2 == 0 else (("b", run_b), ("a", run_a)):
            t0 = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - t0)
            print(f"repeat {r + 1}/{repeats} ({key}) {times[key][-1]:7.2f} s", flush=True)
    return times


def last_layer_gap(model, texts: list[str], depth: int) -> float:
    """Sanity: the largest 1 - cos between (a) and (b)'s last layer with mean pooling, normalised, on 256 texts."""
    import numpy as np

    import cea.encoders

    a_slice = np.asarray(model.encode(texts[:256], batch_size=64))
    b_slice = cea.encoders.encode_layers(model, texts[:256], layers=[depth], poolings=["mean"], progress=False)[
        (depth, "mean")
    ]
    b_slice = b_slice / np.linalg.norm(b_slice, axis=1, keepdims=True)
    a_norm = a_slice / np.linalg.norm(a_slice, axis=1, keepdims=True)
    return float(np.max(1 - np.sum(a_norm * b_slice, axis=1)))


def print_encode_table(times: dict[str, list[float]], med: dict[str, float], max_cos_gap: float) -> None:
    """(a) and (b) as a Markdown table, then their last layers' gap."""
    print()
    print("| step | what | median (s) | runs (s) |")
    print("|---|---|---:|---|")
    print(
        f"| (a) | `model.encode(texts, batch_size=64)`, last layer | {med['a']:.2f} | "
        f"{', '.join(f'{t:.2f}' for t in times['a'])} |"
    )
    print(
        f"| (b) | `encode_layers(...)`, 7 layers x 2 poolings | {med['b']:.2f} | "
        f"{', '.join(f'{t:.2f}' for t in times['b'])} |"
    )
    print(f"| b/a | | **{med['b'] / med['a']:.2f}** | target <= 1.3 |")
    print(f"\n(b) last layer mean vs (a), max 1 - cos over 256 texts: {max_cos_gap:.2e}")


def probe_twice(dataset: str) -> dict:
    """(c): ``probe()`` with an empty store, then again from the disk; the runs, their ratio and the store's files."""
    import cea.data
    import cea.encoders.store
    import cea.evaluation

    ds_full = cea.data.load_dataset(dataset)
    with tempfile.TemporaryDirectory(prefix="cea-bench-cache-") as tmp:
        runs = []
        for label in ("first (empty cache)", "second (from cache)"):
            store = cea.encoders.store.EmbeddingStore(root=tmp)  # a new one each time: the second reads the disk
            t0 = time.perf_counter()
            res = cea.evaluation.probe(
                ds_full, models=[MODEL], layers="all", poolings=("mean", "cls"), cache=store, progress=False
            )
            wall = time.perf_counter() - t0
            knn_s = sum(r["seconds"] for r in res.rows)
            runs.append(
                {
                    "run": label,
                    "wall_s": wall,
                    "meta_timings": res.meta["timings"],
                    "knn_s": knn_s,
                    "n_rows": len(res.rows),
                }
            )
            print(f"probe {label}: {wall:.2f} s  {res.meta['timings']}  kNN {knn_s:.2f} s", flush=True)
        n_files = sum(1 for _ in Path(tmp).rglob("*.npz"))  # the store's parts
    first, second = runs
    return {"runs": runs, "ratio_second_over_first": second["wall_s"] / first["wall_s"], "cache_files_written": n_files}


def print_probe_table(probe: dict) -> None:
    """(c)'s runs as a Markdown table: wall, encode, kNN and the rest."""
    print()
    print("| probe() call | wall (s) | encode (s) | kNN, 14 configs (s) | rest: model load, fingerprint, data (s) |")
    print("|---|---:|---:|---:|---:|")
    for run in probe["runs"]:
        enc = run["meta_timings"][f"encode {MODEL}"]
        print(
            f"| {run['run']} | {run['wall_s']:.2f} | {enc:.2f} | {run['knn_s']:.2f} | "
            f"{run['wall_s'] - enc - run['knn_s']:.2f} |"
        )
    print(f"| second / first | **{100 * probe['ratio_second_over_first']:.1f} %** | | | target < 10 % |")


def main() -> None:
    args = parse()

    import torch

    import cea.data
    import cea.encoders

    ds = cea.data.load_dataset(args.dataset)
    texts = [t for s in ("train", "dev", "test") for t in ds[s]["text"]]
    if args.limit:
        texts = texts[: args.limit]
    model = cea.encoders.load_encoder(MODEL)
    depth = cea.encoders.num_layers(model)
    layers = list(range(depth + 1))
    print(f"{args.dataset}: {len(texts):,} texts; {MODEL}, {depth} blocks; torch threads {torch.get_num_threads()}")

    times = encode_times(model, texts, layers, args.repeats)
    max_cos_gap = last_layer_gap(model, texts, depth)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "dataset": args.dataset,
        "n_texts": len(texts),
        "model": MODEL,
        "repeats": args.repeats,
        "encode_a_s": times["a"],
        "encode_layers_b_s": times["b"],
        "median_a_s": med["a"],
        "median_b_s": med["b"],
        "ratio_b_over_a": med["b"] / med["a"],
        "last_layer_mean_max_cosine_gap_a_vs_b": max_cos_gap,
        "torch_threads": torch.get_num_threads(),
    }
    print_encode_table(times, med, max_cos_gap)

    if not args.skip_probe:
        result["probe"] = probe_twice(args.dataset)
        print_probe_table(result["probe"])

    path = RESULTS / f"probe_cost-{args.dataset}{f'-limit{args.limit}' if args.limit else ''}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwritten {path}")
    cached = (
        f"again from the cache: {100 * result['probe']['ratio_second_over_first']:.1f} %" if "probe" in result else None
    )
    record(
        "probing 7 layers x 2 poolings against one encode",
        round(med["b"] / med["a"], 2),
        baseline=1,
        unit="x",
        section="speed",
        baseline_is=f"model.encode of the last layer, {med['a']:.2f} s",
        note=cached,
    )


if __name__ == "__main__":
    main()
