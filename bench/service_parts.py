"""Issue 32: what one batch of a service costs, part by part, on one thread (as each of the service's workers runs).

    python bench/service_parts.py [--texts 512] [--repeats 3]

1. **Encoding a batch.** 512 random banking77 test texts in batches of 8 and 16 (what the service gathers from
   one-text clients), with the bundle's encoder in PyTorch and in int8 ONNX: one pass per batch (padded to its
   longest text) against the passes that cost least (:func:`cea.encoders.embeddings.least_cost_passes`) for a pass
   overhead of 1-100 tokens; beside them the texts length-sorted in passes of 64 and one text per pass. Sets
   :data:`cea.encoders.embeddings.PASS_OVERHEAD`.
2. **Searching for a batch.** banking77 bundle embeddings (all-MiniLM-L6-v2, train + dev + test), sampled or
   jittered to 1,000-50,000 references, searched for 1, 8, 64 and 512 queries (k 5) by the fp32 ``exact`` kind and
   the certified ``int8`` kind. Sets :data:`cea.knn.index.INT8_FROM`.

Texts/s and milliseconds are medians of ``--repeats`` passes, measured one after the other in one process. Run it
alone.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from functools import partial

import numpy as np

from common import save, table


def median_seconds(call, repeats: int) -> float:
    call()  # warm
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def encode_each(model, batches: list[list[str]], overhead=None) -> list:
    """Each of ``batches`` encoded in a pass of its own (``overhead``: :func:`cea.encoders.embeddings.encode`'s)."""
    from cea.encoders.embeddings import encode

    return [encode(model, b, overhead=overhead) for b in batches]


def encoding(texts: list[str], repeats: int) -> list[list]:
    from cea.encoders import load_encoder
    from cea.encoders.embeddings import encode
    from cea.encoders.onnx import OnnxEncoder, export_onnx
    from common import R

    folder = R / "onnx-minilm"
    torch_model = load_encoder("all-MiniLM-L6-v2")
    if not (folder / "onnx" / "model_int8.onnx").exists():
        torch_model.save(str(folder))
        export_onnx(torch_model, folder, int8=True)
    rows = []
    for name, model in (("torch", torch_model), ("onnx-int8", OnnxEncoder(folder, "int8", threads=1))):
        for size in (8, 16):
            batches = [texts[i : i + size] for i in range(0, len(texts), size)]
            for overhead in (None, 1, 2, 5, 10, 25, 50, 100):
                seconds = median_seconds(partial(encode_each, model, batches, overhead), repeats)
                rows.append([name, size, "one pass" if overhead is None else overhead, round(len(texts) / seconds, 1)])
                print(rows[-1], flush=True)
        seconds = median_seconds(partial(encode, model, texts, batch_size=64), repeats)
        rows.append([name, "all, sorted", "passes of 64", round(len(texts) / seconds, 1)])
        seconds = median_seconds(partial(encode_each, model, [[t] for t in texts[:128]]), repeats)
        rows.append([name, "all", "one text per pass", round(128 / seconds, 1)])
    return rows


def searching(repeats: int) -> list[list]:
    from cea.data import load_dataset
    from cea.encoders import load_encoder
    from cea.knn import build_index, normalize

    ds = load_dataset("banking77")
    texts = [t for frame in ds.splits.values() for t in frame["text"]]
    base = normalize(load_encoder("all-MiniLM-L6-v2").encode(texts, batch_size=64))
    rng = np.random.default_rng(0)
    rows = []
    for n in (1000, 3000, 8000, 13000, 50000):
        refs = base[rng.choice(len(base), n, replace=n > len(base))]
        if n > len(base):  # more references than texts: jittered copies
            refs = normalize(refs + 0.02 * rng.standard_normal(refs.shape).astype(np.float32))
        indexes = {kind: build_index(refs, kind, k=None)[0] for kind in ("exact", "int8")}
        for queries in (1, 8, 64, 512):
            q = normalize(base[rng.choice(len(base), queries)] + 0.05 * rng.standard_normal((queries, base.shape[1])))
            ms = {
                kind: 1000 * median_seconds(partial(index.search, q, 5), max(repeats, 10))
                for kind, index in indexes.items()
            }
            rows.append([n, queries, round(ms["exact"], 2), round(ms["int8"], 2), round(ms["exact"] / ms["int8"], 2)])
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)
    from cea.data import load_dataset

    texts = random.Random(0).sample(list(load_dataset("banking77")["test"]["text"]), args.texts)
    encoded = encoding(texts, args.repeats)
    searched = searching(args.repeats)
    save("service_parts", {"encoding": encoded, "searching": searched})
    table(["backend", "batch", "pass overhead (tokens)", "texts/s"], encoded, left=3)
    table(["references", "queries", "exact (ms)", "int8 (ms)", "exact / int8"], searched, left=2)


if __name__ == "__main__":
    main()
