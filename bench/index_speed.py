"""Issue 6: exact search versus a FAISS HNSW index at 100k and 1M references: recall@5 and speed.

References and queries are synthetic 384-d unit vectors with the structure of sentence embeddings:
2,000 topic centres, each vector a centre plus Gaussian noise (cosine to its centre about 0.8),
so neighbours are meaningful (uniform random vectors are a worst case no text set looks like).
1,000 queries drawn the same way; exact search is cea's (``search_torch``, float32 matrix product),
HNSW is cea's default (M 32, efConstruction 80) at efSearch 64 and 128. Run it alone.

    python bench/index_speed.py [--sizes 100000,1000000] [--noise 0.035]

Its figure is a record (``docs/records/index_speed.jsonl``): one HNSW query (ef 64) at the largest size,
against exact search.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from common import record, save, table


def vectors(rng, centres, n, noise=0.035):
    topic = rng.integers(0, len(centres), n)
    x = centres[topic] + noise * rng.standard_normal((n, centres.shape[1]), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def timed_search(index, queries, k: int = 5, single: int = 200) -> tuple[np.ndarray, dict]:
    """The neighbours of all queries searched at once, the time per query that way, and the median time of one query
    searched alone (the first ``single``)."""
    t0 = time.perf_counter()
    _, found = index.search(queries, k)
    batch = time.perf_counter() - t0
    one = []
    for q in queries[:single]:
        t0 = time.perf_counter()
        index.search(q[None], k)
        one.append(time.perf_counter() - t0)
    return found, {
        "batch_1000_ms_per_query": round(1000 * batch / len(queries), 3),
        "one_query_ms_p50": round(1000 * statistics.median(one), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument(
        "--noise", type=float, default=0.035, help="per-dimension noise around the centres (0.1: near uniform)"
    )
    args = ap.parse_args()
    import faiss
    import torch

    from cea.knn.index import INDEXES, build_index

    rng = np.random.default_rng(0)
    centres = rng.standard_normal((2000, args.dim), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    queries = vectors(rng, centres, 1000, args.noise)
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        refs = vectors(np.random.default_rng(n), centres, n, args.noise)
        cos = float(np.mean(np.sum(refs[:1000] * refs[1:1001], axis=1)))
        exact = INDEXES["exact"](args.dim)
        exact.add(refs)
        truth, speed = timed_search(exact, queries)
        rows.append({"n": n, "index": "exact", "build_s": 0.0, "recall_at_5": 1.0, **speed})
        print(json.dumps(rows[-1]), flush=True)
        hnsw, info = build_index(refs, "hnsw")
        for ef in (64, 128):
            hnsw.faiss.hnsw.efSearch = ef
            found, speed = timed_search(hnsw, queries)
            recall = float(np.mean([len(set(t) & set(f)) / 5 for t, f in zip(truth.tolist(), found.tolist())]))
            rows.append(
                {
                    "n": n,
                    "index": f"hnsw ef{ef}",
                    "build_s": info["build_seconds"],
                    "recall_at_5": round(recall, 4),
                    "recall_at_5_at_build": info["recall_at_k"],
                    **speed,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
        print(f"n={n}: mean cosine of two random references {cos:.3f}", flush=True)
        del hnsw, refs, exact
    out = {
        "rows": rows,
        "noise": args.noise,
        "threads": torch.get_num_threads(),
        "faiss": faiss.__version__,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    save(f"index_speed-noise{args.noise}", out)
    table(
        ["references", "index", "build s", "recall@5", "ms / query (1,000 at once)", "one query, p50 ms"],
        [
            [
                f"{r['n']:,}",
                r["index"],
                f"{r['build_s']:.1f}",
                f"{r['recall_at_5']:.4f}",
                r["batch_1000_ms_per_query"],
                r["one_query_ms_p50"],
            ]
            for r in rows
        ],
        left=2,
    )
    n = max(r["n"] for r in rows)
    at = {r["index"]: r for r in rows if r["n"] == n}
    record(
        f"one query at {n:,} references, HNSW ef 64",
        at["hnsw ef64"]["one_query_ms_p50"],
        baseline=at["exact"]["one_query_ms_p50"],
        unit="ms p50",
        section="speed",
        baseline_is="exact",
        note=f"recall@5 {at['hnsw ef64']['recall_at_5']} (ef 128: {at['hnsw ef128']['one_query_ms_p50']} ms, "
        f"{at['hnsw ef128']['recall_at_5']})",
    )


if __name__ == "__main__":
    main()
