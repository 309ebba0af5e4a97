"""Issue 16: what refitting a bundle's linear head costs after additions, at 10k and 100k references.

banking77's train + dev + test texts (13,083) encoded once by the frozen model; the first 10,000 are the
10k reference set. The 100k set is those 13,083 embeddings repeated with Gaussian jitter (sigma 0.02 per
dimension, then unit length), labels kept: real geometry, no 100k-text encoding on a 2-core machine.
Times are medians of ``--repeats`` fits, one process, ``OMP_NUM_THREADS`` as set:

- cold: a head fitted from scratch (what a bundle does once, at build time or after a restart with changes);
- add 10 (known class): 10 examples of an existing class appended, refit starting from the previous weights;
- add 10 (new class): the base set leaves one class out (banking77's first label); 10 of its real examples are
  appended and the head refitted (from scratch: ``fit_head`` ignores previous weights when the classes
  changed); its recall is measured on that class's other examples.

    OMP_NUM_THREADS=1 python bench/head_refit.py --cache /tmp/b77.npz

Its figure is a record (``docs/records/head_refit.jsonl``): the refit after 10 additions at the largest
size, against a fit from scratch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from functools import partial
from pathlib import Path

import numpy as np

from cea.knn.head import fit_head
from cea.knn.search import normalize
from common import record


def embeddings(cache: Path) -> tuple[np.ndarray, np.ndarray]:
    if cache.exists():
        data = np.load(cache, allow_pickle=False)
        return data["x"], data["y"]
    from cea.data import load_dataset
    from cea.encoders import load_encoder
    from cea.encoders.embeddings import encode

    ds, model = load_dataset("banking77"), load_encoder("all-MiniLM-L6-v2")
    frames = [ds[s] for s in ("train", "dev", "test")]
    x = normalize(np.vstack([encode(model, f["text"]) for f in frames])).astype(np.float32)
    y = np.concatenate([f["label"].to_numpy(dtype=str) for f in frames])
    np.savez(cache, x=x, y=y)
    return x, y


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", type=Path, default=Path("b77-frozen.npz"))
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    x, y = embeddings(args.cache)
    rng = np.random.default_rng(0)
    rows = []
    new_label = y[0]  # a class held out of the base set: 10 of its examples are then added as a new class
    held = np.flatnonzero(y == new_label)
    for n in (int(s) for s in args.sizes.split(",")):
        reps = -(-n // len(x))
        xs = np.vstack([x] + [normalize(x + rng.normal(0, 0.02, x.shape)).astype(np.float32) for _ in range(reps - 1)])[
            :n
        ]
        ys = np.tile(y, reps)[:n]
        base = ys != new_label
        xb, yb = xs[base], ys[base]
        cold_s, head = timed(partial(fit_head, xb, yb), args.repeats)
        known = normalize(xb[:10] + rng.normal(0, 0.02, (10, x.shape[1]))).astype(np.float32)
        known_x, known_y = np.vstack([xb, known]), np.concatenate([yb, yb[:10]])
        known_s, _ = timed(partial(fit_head, known_x, known_y, previous=head), args.repeats)
        grown_x, grown_y = np.vstack([xb, x[held[:10]]]), np.concatenate([yb, [new_label] * 10])
        new_s, new_head = timed(partial(fit_head, grown_x, grown_y, previous=head), args.repeats)
        row = {
            "references": len(xb),
            "classes": len(head.classes),
            "cold_s": round(cold_s, 2),
            "add10_known_s": round(known_s, 2),
            "add10_new_class_s": round(new_s, 2),
            "new_class_recall": round(float(np.mean(new_head.predict(x[held[10:]]) == new_label)), 3),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    print(
        "| references | classes | fit from scratch, s | refit after +10 of a known class, s "
        "| refit after +10 of a new class, s | the new class's recall |\n|---:|---:|---:|---:|---:|---:|"
    )
    for r in rows:
        print(
            f"| {r['references']:,} | {r['classes']} | {r['cold_s']} | {r['add10_known_s']} "
            f"| {r['add10_new_class_s']} | {r['new_class_recall']} |"
        )
    small, large = rows[0], rows[-1]
    record(
        f"head refit after 10 additions, {large['references']:,} references",
        large["add10_known_s"],
        baseline=large["cold_s"],
        unit="s",
        section="speed",
        baseline_is="from scratch",
        note=f"{small['add10_known_s']} s at {small['references']:,}; a new class's recall {large['new_class_recall']}",
    )


if __name__ == "__main__":
    main()
