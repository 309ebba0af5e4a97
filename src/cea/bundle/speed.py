"""How fast a bundle answers, as the service asks it: what ``cea fit --latency`` chooses by.

What it does
    :func:`answer_speed` times a :class:`cea.bundle.Bundle` in this process: the p99 of answering one-text requests
    as the service answers ``clients`` of them waiting together (one :meth:`~cea.bundle.Bundle.predict_many` of the
    batch its batcher forms: at most ``max_batch`` of them, :data:`cea.defaults.BATCHING`; 16 clients make two
    batches of 8, answered side by side on 2 cores) and the texts/s of ``batch``-text requests (bulk work).
    :func:`served_speed` opens a bundle folder as ``cea serve`` does, each batch on one thread (torch, BLAS and the
    int8 index's ONNX Runtime session, the tokenizer: :func:`cea.service.app.service_threads`), and times it so.

How
    Requests of texts drawn in turn from the texts given, after one warm-up call; the batches are timed for
    ``seconds`` each (at least ``rounds`` of one-text requests, :data:`BULK_ROUNDS` of bulk ones). The HTTP layer
    adds its own time to each request, the same for every encoder (``bench/serve_load.py`` measures the service with
    a trivial encoder as that limit).

What it expects
    An open bundle and at least one text.
"""

from __future__ import annotations

import gc
import itertools
import os
import time
from pathlib import Path

import numpy as np
import threadpoolctl
import torch

from ..defaults import BATCHING
from .bundle import Bundle
from .requests import PredictRequest

CLIENTS = 16  # one-text clients waiting together (the service answers them in batches of max_batch)
BULK = 64  # texts per request for bulk work
BULK_ROUNDS = 3  # at least, of BULK texts: a mean (20 rounds are 22 s of the full MiniLM on yahoo's texts, 2 cores)


def answer_speed(
    bundle,
    texts: list[str],
    clients: int = CLIENTS,
    batch: int = BULK,
    seconds: float = 1.0,
    rounds: int = 20,
    max_batch: int = BATCHING["max_batch"],
) -> dict:
    """``{"p99_ms", "p50_ms"}`` of one-text requests answered in the batches ``clients`` of them make (at most
    ``max_batch``) and ``texts_per_second`` of ``batch``-text requests, by ``bundle`` on ``texts``."""
    cycle, clients = itertools.cycle(texts), min(clients, max_batch)
    bundle.predict_many([PredictRequest([next(cycle)]) for _ in range(clients)])  # warm-up: first-call costs

    def timed(make, size, least):
        times, end = [], time.perf_counter() + seconds
        while len(times) < least or time.perf_counter() < end:
            requests = make([next(cycle) for _ in range(size)])
            start = time.perf_counter()
            bundle.predict_many(requests)
            times.append(time.perf_counter() - start)
        return np.asarray(times)

    together = timed(lambda chunk: [PredictRequest([text]) for text in chunk], clients, rounds)
    bulk = timed(lambda chunk: [PredictRequest(chunk)], batch, BULK_ROUNDS)  # a mean: fewer rounds will do
    return {
        "p99_ms": round(float(np.percentile(together, 99)) * 1e3, 2),
        "p50_ms": round(float(np.median(together)) * 1e3, 2),
        "texts_per_second": round(batch * len(bulk) / float(bulk.sum()), 1),
    }


def served_speed(folder: str | Path, texts: list[str], device: str | None = None, **options) -> dict:
    """:func:`answer_speed` of the bundle in ``folder``, opened and run on one thread a batch as the service runs it
    (on 2 cores, 8 texts of a static encoder took 5 ms at the median on torch's 2 threads, 3 on one). What the calling
    process held before is frozen out of the garbage collector's scans while it is timed (``gc.freeze``): a service
    holds one bundle, ``cea fit --latency`` every candidate (banking77: a static bundle's p99 of 16 one-text requests
    was 3.4 ms with them in memory, 1.83 ms frozen out and no int8 session kept; the two not timed apart)."""
    threads, tokenizer = torch.get_num_threads(), os.environ.get("TOKENIZERS_PARALLELISM")
    torch.set_num_threads(1)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the tokenizer's pool: off in the service, read at each batch
    gc.collect()
    gc.freeze()
    try:
        with threadpoolctl.threadpool_limits(1, user_api="blas"), Bundle.load(folder, device=device) as bundle:
            return answer_speed(bundle, texts, **options)
    finally:
        gc.unfreeze()
        torch.set_num_threads(threads)
        if tokenizer is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = tokenizer
