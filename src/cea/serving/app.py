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

A multi-label bundle's prediction also has ``labels``, ``[{"label", "score"}]``, best first. A prediction's label is
``unknown`` (and ``closest`` its best class) where its evidence falls below the request's
``threshold``, or the bundle's when the request names none (0: never).
    GET    /metrics                                           -> Prometheus text: requests by route and status,
                                                                 latency histograms per route, batch sizes, queue
                                                                 wait, head refit seconds and a change's wait for it

Concurrent predictions are batched (:class:`cea.serving.batching.Batcher`): a batch closes at ``max_batch`` texts or
``max_wait`` seconds after its first request, and is encoded, searched and decided in one call; the head is refitted
after changes off the request path (:class:`cea.serving.Bundle`). The texts of additions are encoded in the
prediction batches (an addition of one text alone would cost a pass of its own, about twice a batched text's), and
concurrent additions are written together: one log record and one fsync for all of them.

Changes need ``Authorization: Bearer TOKEN`` when a token is set (``cea serve`` requires one for any address but
loopback). Requests are bounded: at most ``max_texts`` texts of at most ``max_chars`` characters each, and a body of at
most ``max_body`` bytes (413 beyond it, 422 for a malformed body).
"""

# no ``from __future__ import annotations`` here: FastAPI reads the request models defined inside
# create_app from the live annotations
import asyncio
import json
import os
import time

import numpy as np

from ..data.labels import UNKNOWN
from ..errors import CeaError
from .batching import Batcher
from .bundle import Bundle

LIMITS = {"max_texts": 256, "max_chars": 2000, "max_body": 2_000_000}
# texts per encoder call; seconds a batch waits to fill. With one batch per core, 8 served 1.6x the texts/s of 64 on
# 2 cores at 16 clients (two batches of 8 run side by side where one of 16 would leave a core idle: the figures
# page, docs/benchmarks.md, the service under one-text clients)
BATCHING = {"max_batch": 8, "max_wait": 0.005}
SETTINGS = "CEA_SERVE_SETTINGS"  # what each of cea serve --workers N's processes opens (JSON)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


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
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1, user_api="blas")
    return max(1, usable_cores() // workers)


def from_environment():
    """The app of one worker process of ``cea serve --workers N`` (uvicorn's factory): the bundle named in
    :data:`SETTINGS`, opened here; its store keeps it in step with the other workers."""
    settings = json.loads(os.environ[SETTINGS])
    batchers = service_threads(settings["workers"])  # the workers share the cores
    bundle = Bundle.load(settings["bundle"], verify=False, device=settings["device"], precision=settings["precision"])
    return create_app(bundle, token=settings["token"], max_batch=settings["max_batch"],
                      max_wait=settings["max_wait"], batchers=batchers, keep_unknowns=settings["keep_unknowns"])


def create_app(bundle: Bundle, token: "str | None" = None, max_texts: int = LIMITS["max_texts"],
               max_chars: int = LIMITS["max_chars"], max_body: int = LIMITS["max_body"],
               max_batch: int = BATCHING["max_batch"], max_wait: float = BATCHING["max_wait"], batchers: int = 1,
               keep_unknowns: int = 0, commit_wait: float = 0.0):
    """The FastAPI app of ``bundle``; ``max_batch`` and ``max_wait``: when a batch of concurrent predictions closes
    (texts, seconds); ``batchers``: batches answered side by side (:func:`service_threads` says how many);
    ``keep_unknowns``: keep the latest this many texts answered unknown in the bundle's store (0: none), written off
    the request path; ``commit_wait``: seconds a group commit of additions waits for more after its first (0: it
    takes what queued during the last commit's fsync, which answered additions 5-9 ms sooner at the median than
    5 ms of waiting, at the same throughput: the figures page)."""
    from contextlib import asynccontextmanager

    from fastapi import Depends, FastAPI, Header, HTTPException
    from fastapi.responses import JSONResponse, Response
    from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram,
                                   generate_latest)
    from pydantic import BaseModel, Field, field_validator

    class Texts(BaseModel):
        texts: list[str] = Field(min_length=1, max_length=max_texts)
        k: int | None = Field(default=None, ge=1, le=100)

        @field_validator("texts")
        @classmethod
        def bounded(cls, texts):
            for i, text in enumerate(texts):
                if not text.strip():
                    raise ValueError(f"text {i} is empty")
                if len(text) > max_chars:
                    raise ValueError(f"text {i} has {len(text)} characters; the limit is {max_chars}")
            return texts

    class Query(Texts):
        threshold: float | None = Field(default=None, ge=0)

    class Examples(Texts):
        labels: list[str | list[str]] = Field(min_length=1, max_length=max_texts)  # lists: a multi-label bundle

    registry = CollectorRegistry()  # one per app: several apps in one process do not collide
    requests = Counter("cea_requests", "HTTP requests by route and status", ["route", "status"], registry=registry)
    seconds = Counter("cea_request_seconds", "Seconds spent answering, by route", ["route"], registry=registry)
    latency = Histogram("cea_request_latency_seconds", "Seconds from request to response, by route", ["route"],
                        buckets=LATENCY_BUCKETS, registry=registry)
    batch_texts = Histogram("cea_batch_texts", "Texts per encoder call (predictions and added examples)",
                            buckets=SIZE_BUCKETS, registry=registry)
    queue_wait = Histogram("cea_queue_wait_seconds", "Seconds a request waited for its encoder batch",
                           buckets=LATENCY_BUCKETS, registry=registry)
    refit = Histogram("cea_refit_seconds", "Seconds of each refit of the linear head", buckets=LATENCY_BUCKETS,
                      registry=registry)
    refit_lag = Histogram("cea_change_to_head_seconds", "Seconds from a change to the refitted head that counts it",
                          buckets=LATENCY_BUCKETS + (20, 40, 80), registry=registry)
    Gauge("cea_examples", "Examples in the bundle", registry=registry).set_function(lambda: len(bundle))

    def batch_done(texts: int, waits: list[float]) -> None:
        batch_texts.observe(texts)
        for wait in waits:
            queue_wait.observe(wait)

    def refitted(fit_seconds: float, lags: list[float]) -> None:
        refit.observe(fit_seconds)
        for lag in lags:
            refit_lag.observe(lag)

    def encode_and_predict(items: list[tuple]) -> list:
        """One encode of a batch's texts: a prediction ``(texts, k, threshold)`` gets its predictions, an
        addition's ``(texts,)`` its embeddings."""
        vectors = bundle.embed([text for item in items for text in item[0]])
        starts = np.cumsum([0] + [len(item[0]) for item in items])
        asked = [i for i, item in enumerate(items) if len(item) == 3]
        out = [vectors[a:b] for a, b in zip(starts[:-1], starts[1:])]
        if asked:
            rows = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in asked])
            for i, found in zip(asked, bundle.predict_many([items[i] for i in asked], vectors=vectors[rows])):
                out[i] = found
        return out

    bundle.on_refit = refitted
    # concurrent predictions, and the texts of additions, encoded together
    batcher = Batcher(encode_and_predict, max_batch=max_batch, max_wait=max_wait, workers=batchers,
                      size=lambda item: len(item[0]), on_batch=batch_done)
    # concurrent additions: one record and one fsync for all of them (a group commit)
    changes = Batcher(bundle.add_many, max_batch=max_texts, max_wait=commit_wait, size=lambda item: len(item[0]))

    def keep(batches: list[list[dict]]) -> list[None]:
        bundle.store.keep_unknowns([item for items in batches for item in items], keep_unknowns)
        return [None] * len(batches)

    keeper = Batcher(keep, max_batch=max_texts, max_wait=0.05, size=len)  # answered before they are kept

    @asynccontextmanager
    async def lifespan(app):
        yield
        for each in (batcher, changes, keeper):
            await asyncio.get_running_loop().run_in_executor(None, each.close)

    app = FastAPI(title="cea kNN classifier", version="1", lifespan=lifespan)

    class LimitsAndMetrics:
        """The body limit and the request metrics, as a plain ASGI middleware: starlette's ``@app.middleware``
        wraps every request in streams and a task group, a cost that showed at hundreds of requests a second."""

        def __init__(self, inner):
            self.inner = inner

        async def __call__(self, scope, receive, send):
            if scope["type"] != "http":
                return await self.inner(scope, receive, send)
            length = dict(scope["headers"]).get(b"content-length")
            if length is not None and int(length) > max_body:
                return await JSONResponse({"detail": f"request body over {max_body} bytes"},
                                          status_code=413)(scope, receive, send)
            started, status = time.perf_counter(), [500]

            async def sending(message):
                if message["type"] == "http.response.start":
                    status[0] = message["status"]
                await send(message)

            try:
                await self.inner(scope, receive, sending)
            finally:
                route = scope.get("route")
                key = f'{scope["method"]} {route.path if route is not None else scope["path"]}'
                took = time.perf_counter() - started
                requests.labels(route=key, status=str(status[0])).inc()
                seconds.labels(route=key).inc(took)
                latency.labels(route=key).observe(took)

    app.add_middleware(LimitsAndMetrics)

    async def authorised(authorization: str | None = Header(default=None)):  # async: no hop to the thread pool
        if token is not None and authorization != f"Bearer {token}":
            raise HTTPException(status_code=401, detail="changes need Authorization: Bearer TOKEN")

    def answer(status: int, method, *args):
        """``method(*args)``, its CeaError (bad input, unknown id) answered with ``status``."""
        try:
            return method(*args)
        except CeaError as exc:
            raise HTTPException(status_code=status, detail=str(exc)) from None

    @app.post("/predict")
    async def predict(body: Query):  # async: it waits for its batch without holding a thread of the pool
        try:
            found = await asyncio.wrap_future(batcher.submit((body.texts, body.k, body.threshold)))
        except CeaError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None
        if keep_unknowns:
            turned_away = [{"text": text, "closest": p.closest, "evidence": round(float(p.evidence), 4)}
                           for text, p in zip(body.texts, found) if p.label == UNKNOWN]
            if turned_away:
                keeper.submit(turned_away)  # not waited for
        return JSONResponse({"predictions": [p.as_dict() for p in found]})  # plain types: no encoder pass needed

    @app.post("/examples", dependencies=[Depends(authorised)])
    async def add(body: Examples):
        if len(body.labels) != len(body.texts):
            raise HTTPException(status_code=422, detail=f"{len(body.texts)} texts but {len(body.labels)} labels")
        try:
            vectors = await asyncio.wrap_future(batcher.submit((body.texts,)))  # in a prediction batch
            return {"ids": await asyncio.wrap_future(changes.submit((body.texts, body.labels, vectors)))}
        except CeaError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None

    @app.delete("/examples/{example_id}", dependencies=[Depends(authorised)])
    def remove(example_id: int):
        answer(404, bundle.remove, [example_id])
        return {"removed": example_id}

    @app.get("/examples/{example_id}")
    def get(example_id: int):
        return answer(404, bundle.get, example_id)

    @app.get("/labels")
    def labels():
        return {"labels": bundle.label_counts}

    @app.get("/unknowns")
    def unknowns():
        return {"unknowns": bundle.store.unknowns()}

    @app.get("/health")
    def health():
        return {"status": "ok", "examples": len(bundle), "generation": bundle.manifest["generation"],
                "store": bundle.store.kind, "pid": os.getpid(),
                "classifier": bundle.classifier.kind,
                "unknown_threshold": bundle.unknown_threshold}

    @app.get("/metrics")
    def metrics():
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app
