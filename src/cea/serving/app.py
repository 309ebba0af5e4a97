"""``cea serve BUNDLE``: the bundle over HTTP (FastAPI, served by uvicorn).

    POST   /predict          {"texts": [...], "k": 5, "threshold": 0.4}
                             -> {"predictions": [{label, score, evidence, (labels,) (closest,) neighbours}]}
    POST   /examples         {"texts": [...], "labels": [...]} -> {"ids": [...]}  (durable when answered; a multi-label
                                                               bundle takes a list of labels per text)
    GET    /examples/{id}                                     -> {"id", "label", "text"}
    DELETE /examples/{id}                                     -> {"removed": id}
    GET    /labels                                            -> {"labels": {label: count}}
    GET    /unknowns                                          -> {"unknowns": [{id, text, closest, evidence, at}]}
                                                                 (texts answered unknown, kept where the service was
                                                                 started with keep_unknowns; cea discover BUNDLE
                                                                 groups them)
    GET    /health                                            -> {"status": "ok", "examples": n, "classifier": ...,
                                                                  "unknown_threshold": t or null}
    GET    /metrics                                           -> Prometheus text: requests by route and status,
                                                                 latency histograms per route, batch sizes, queue
                                                                 wait, head refit seconds and a change's wait for it

A multi-label bundle's prediction also has ``labels``, ``[{"label", "score"}]``, best first. A prediction's label is
``unknown`` (and ``closest`` its best class) where its evidence falls below the request's ``threshold``, or the
bundle's when the request names none (0: never).

Concurrent predictions, and the texts of additions, are encoded in batches and concurrent additions written as one
record (:mod:`cea.serving.queues`); the head is refitted after changes off the request path
(:mod:`cea.serving.refit`). The routes are :mod:`cea.serving.routes`; the limits and metrics around them
:mod:`cea.serving.metrics`. Changes need ``Authorization: Bearer TOKEN`` when a token is set (``cea serve`` requires
one for any address but loopback). Requests are bounded: at most ``max_texts`` texts of at most ``max_chars``
characters each, and a body of at most ``max_body`` bytes (413 beyond it, 422 for a malformed body).

When to use it
    ``cea serve BUNDLE`` runs it; :func:`create_app` makes the app of a bundle opened in this process (tests, an
    app of one's own), :func:`from_environment` that of each of ``cea serve --workers N``'s processes.
"""

from __future__ import annotations

import asyncio
import json
import os
from contextlib import asynccontextmanager

import threadpoolctl
import torch
from fastapi import FastAPI

from . import routes
from .bundle import Bundle
from .metrics import LimitsAndMetrics, Metrics
from .queues import Queues

LIMITS = {"max_texts": 256, "max_chars": 2000, "max_body": 2_000_000}
# texts per encoder call; seconds a batch waits to fill. With one batch per core, 8 served 1.6x the texts/s of 64 on
# 2 cores at 16 clients (two batches of 8 run side by side where one of 16 would leave a core idle: the figures
# page, docs/benchmarks.md, the service under one-text clients)
BATCHING = {"max_batch": 8, "max_wait": 0.005}
SETTINGS = "CEA_SERVE_SETTINGS"  # what each of cea serve --workers N's processes opens (JSON)


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system has one (``taskset``, a container's
    cpuset), else every core."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def service_threads(workers: int = 1) -> int:
    """Threads of one service process (of ``workers`` behind one address); returns its batch workers, one per core
    it may use. Each batch runs single-threaded (torch, ONNX Runtime and NumPy's BLAS): on two cores, two batches
    side by side served more than one batch on two threads, and OpenBLAS threads spinning beside torch's OpenMP
    threads took the cores from the encoder (the figures page, docs/benchmarks.md, the service under one-text
    clients)."""
    torch.set_num_threads(1)
    threadpoolctl.threadpool_limits(1, user_api="blas")
    return max(1, usable_cores() // workers)


def from_environment():
    """The app of one worker process of ``cea serve --workers N`` (uvicorn's factory): the bundle named in
    :data:`SETTINGS`, opened here; its store keeps it in step with the other workers."""
    settings = json.loads(os.environ[SETTINGS])
    batchers = service_threads(settings["workers"])  # the workers share the cores
    bundle = Bundle.load(settings["bundle"], verify=False, device=settings["device"], precision=settings["precision"])
    return create_app(bundle, token=settings["token"], max_batch=settings["max_batch"],
                      max_wait=settings["max_wait"], batchers=batchers, keep_unknowns=settings["keep_unknowns"])


def create_app(bundle: Bundle, token: str | None = None, max_texts: int = LIMITS["max_texts"],
               max_chars: int = LIMITS["max_chars"], max_body: int = LIMITS["max_body"],
               max_batch: int = BATCHING["max_batch"], max_wait: float = BATCHING["max_wait"], batchers: int = 1,
               keep_unknowns: int = 0, commit_wait: float = 0.0) -> FastAPI:
    """The FastAPI app of ``bundle``; ``max_batch`` and ``max_wait``: when a batch of concurrent predictions closes
    (texts, seconds); ``batchers``: batches answered side by side (:func:`service_threads` says how many);
    ``keep_unknowns``: keep the latest this many texts answered unknown in the bundle's store (0: none), written off
    the request path; ``commit_wait``: seconds a group commit of additions waits for more after its first (0: it
    takes what queued during the last commit's fsync, which answered additions 5-9 ms sooner at the median than
    5 ms of waiting, at the same throughput: the figures page)."""
    metrics = Metrics(bundle)
    bundle.on_refit = metrics.refitted
    queues = Queues(bundle, max_batch=max_batch, max_wait=max_wait, workers=batchers, max_texts=max_texts,
                    commit_wait=commit_wait, keep_unknowns=keep_unknowns, on_batch=metrics.batch_done)

    @asynccontextmanager
    async def lifespan(app):
        yield
        await asyncio.get_running_loop().run_in_executor(None, queues.close)

    app = FastAPI(title="cea kNN classifier", version="1", lifespan=lifespan)
    app.add_middleware(LimitsAndMetrics, metrics=metrics, max_body=max_body)
    query, examples = routes.bodies(max_texts, max_chars)
    app.include_router(routes.predictions(queues, query))
    app.include_router(routes.changes(bundle, queues, examples, token))
    app.include_router(routes.state(bundle, metrics))
    return app
