"""How fast a bundle answers, as the service asks it: what ``cea fit --latency`` chooses by.

What it does
    :func:`answer_speed` times a :class:`cea.serving.Bundle` in this process: the p99 of answering ``clients``
    one-text requests that arrive together (one :meth:`~cea.serving.Bundle.predict_many` of that many requests: the
    batch the service's batcher forms when that many one-text clients wait) and the texts/s of ``batch``-text
    requests (bulk work).

How
    Requests of texts drawn in turn from the texts given, after one warm-up call; the batches are timed for
    ``seconds`` each (at least ``rounds`` of them). The HTTP layer adds its own time to each request, the same for
    every encoder (``bench/serve_load.py`` measures the service with a trivial encoder as that limit).

What it expects
    An open bundle and at least one text.
"""

from __future__ import annotations

import itertools
import time

import numpy as np

CLIENTS = 16  # one-text clients whose requests the service answers in one batch
BULK = 64  # texts per request for bulk work


def answer_speed(bundle, texts: list[str], clients: int = CLIENTS, batch: int = BULK, seconds: float = 1.0,
                 rounds: int = 20) -> dict:
    """``{"p99_ms", "p50_ms"}`` of ``clients`` one-text requests answered at once and ``texts_per_second`` of
    ``batch``-text requests, by ``bundle`` on ``texts``."""
    cycle = itertools.cycle(texts)
    bundle.predict_many([([next(cycle)], None, None) for _ in range(clients)])  # warm-up: first-call costs

    def timed(make, size):
        times, end = [], time.perf_counter() + seconds
        while len(times) < rounds or time.perf_counter() < end:
            requests = make([next(cycle) for _ in range(size)])
            start = time.perf_counter()
            bundle.predict_many(requests)
            times.append(time.perf_counter() - start)
        return np.asarray(times)

    together = timed(lambda chunk: [([text], None, None) for text in chunk], clients)
    bulk = timed(lambda chunk: [(chunk, None, None)], batch)
    return {"p99_ms": round(float(np.percentile(together, 99)) * 1e3, 2),
            "p50_ms": round(float(np.median(together)) * 1e3, 2),
            "texts_per_second": round(batch * len(bulk) / float(bulk.sum()), 1)}
