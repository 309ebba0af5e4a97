"""``cea serve BUNDLE``: the bundle over HTTP (FastAPI, served by uvicorn).

    POST   /predict        {"texts": [...], "k": 5, "threshold": 0.4} -> {"predictions": [{label, score, evidence,
                           (labels,) (closest,) neighbours}]}
    POST   /examples       {"texts": [...], "labels": [...]} -> {"ids": [...]} (durable when answered; a multi-label
                           bundle takes a list of labels per text)
    GET    /examples/{id}  -> {"id", "label", "text"}
    DELETE /examples/{id}  -> {"removed": id}
    GET    /labels         -> {"labels": {label: count}}
    GET    /unknowns       -> {"unknowns": [{id, text, closest, evidence, at}]} (texts answered unknown, kept where
                           the service was started with keep_unknowns; cea discover BUNDLE groups them)
    GET    /suggest?n=N    -> {"suggestions": [{id, text, prediction, runner_up, score, reason, group}]}: the kept
                           traffic (keep_traffic) worth labelling first; POST /examples
                           {"suggestions": [id], "labels": [..]} labels them (cea.labelling.suggest)
    GET    /health         -> {"status": "ok", "examples": n, "classifier": ..., "unknown_threshold": t or null,
                           "training": the background fit's state and the last fit's figures, where it runs fits}
    GET    /metrics        -> Prometheus text: requests by route and status, latency per route, batch sizes, queue
                           wait, head refit seconds and a change's wait for it, background fits by outcome
    /label-studio/...      Label Studio's ML backend protocol: health, setup, predict, webhook
                           (:mod:`cea.service.ml_backend`); with ``fine_tune``, Label Studio's START_TRAINING
                           and its annotations, as they double, start ``cea fit`` in the background, swapped in
                           where better (:mod:`cea.service.fine_tuning`)

A multi-label bundle's prediction also has ``labels``, ``[{"label", "score"}]``, best first. A prediction's label is
``unknown`` (and ``closest`` its best class) where its evidence falls below the request's ``threshold``, or the
bundle's when the request names none (0: never).

:func:`create_app` puts the routes (:mod:`cea.service.routes`) behind the service's batchers
(:mod:`cea.service.queues`) and, around every request, a body limit and Prometheus metrics (:class:`LimitsAndMetrics`,
:class:`Metrics`: one registry per app). Changes need ``Authorization: Bearer TOKEN`` when a token is set (``cea
serve`` requires one for any address but loopback). Requests are bounded: at most ``max_texts`` texts of at most
``max_chars`` characters each, and a body of at most ``max_body`` bytes (413 beyond it, 422 for a malformed body).

When to use it
    ``cea serve BUNDLE`` runs it; :func:`create_app` makes the app of a bundle opened in this process (tests, an
    app of one's own), :func:`from_environment` that of each of ``cea serve --workers N``'s processes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from contextlib import asynccontextmanager

import threadpoolctl
import torch
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from ..bundle import Bundle
from ..defaults import BATCHING
from ..encoders.build import is_static
from . import contract, ml_backend, routes
from .fine_tuning import BackgroundFit
from .queues import Queues

LIMITS = {"max_texts": 256, "max_chars": 2000, "max_body": 2_000_000}
GPU_BATCHING = {"max_batch": 128, "batchers": 2}  # one stream: larger batches, one gathered while one runs
# a static encoder's bundle on the CPU: one process per core, and a batch takes what has queued without waiting for
# more. Its batches cost little, so the service's own Python work per request (HTTP, batching, the decision) is most
# of the work, and one process runs it on one core at a time (the GIL): on 2 cores, 16 one-text clients of a banking77
# bundle got 886-942 texts/s from one process and 2,170 from two at c7827f9 (bench/serve_load.py; docs/tables.md)
STATIC_SERVING = {"max_wait": 0.0}
SETTINGS = "CEA_SERVE_SETTINGS"  # what each of cea serve --workers N's processes opens (JSON)
FIT_BUCKETS = (30, 60, 120, 300, 600, 900, 1800, 3600)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system has one (``taskset``, a container's
    cpuset), else every core."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def service_threads(workers: int = 1) -> int:
    """The batch workers of one service process (of ``workers`` behind one address): one per core it may use, each
    batch single-threaded (torch, ONNX Runtime, BLAS, the tokenizer): on two cores, two batches side by side served
    more than one on two threads, and OpenBLAS threads spinning beside torch's took the cores from the encoder (the
    figures page). The tokenizer's own thread pool made a batch of 4 texts cost 0.46 ms to encode instead of 0.28
    (a static encoder, one thread)."""
    torch.set_num_threads(1)
    threadpoolctl.threadpool_limits(1, user_api="blas")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # read at each batch the tokenizer runs
    return max(1, usable_cores() // workers)


def serving_defaults(bundle: Bundle) -> tuple[int, float]:
    """``(workers, max_wait)`` that ``cea serve`` runs ``bundle`` with unless told: a static encoder on the CPU gets
    :data:`STATIC_SERVING` (a process per core, no wait), any other encoder one process and :data:`BATCHING`'s
    wait (a transformer's batches are most of the work and release the GIL; two processes on 2 cores served less)."""
    if is_static(bundle.encoder) and not on_gpu(bundle):
        return usable_cores(), STATIC_SERVING["max_wait"]
    return 1, BATCHING["max_wait"]


def on_gpu(bundle: Bundle) -> bool:
    """Whether ``bundle``'s encoder runs on a CUDA device."""
    return str(getattr(bundle.encoder, "device", "cpu")).startswith("cuda")


def batching(bundle: Bundle, workers: int = 1, max_batch: int | None = None) -> tuple[int, int]:
    """``(max_batch, batchers)`` of one service process of ``workers``: on the CPU ``max_batch`` (None:
    :data:`BATCHING`'s) and :func:`service_threads`; with the encoder on a GPU :data:`GPU_BATCHING`'s, as one
    stream serves a few large batches better than a batch per core."""
    batchers = service_threads(workers)
    if on_gpu(bundle):
        return max_batch or GPU_BATCHING["max_batch"], GPU_BATCHING["batchers"]
    return max_batch or BATCHING["max_batch"], batchers


def from_environment():
    """The app of one worker process of ``cea serve --workers N`` (uvicorn's factory): the bundle named in
    :data:`SETTINGS`, opened here; its store keeps it in step with the other workers."""
    settings = json.loads(os.environ[SETTINGS])
    service_threads(settings["workers"])  # before loading: an ONNX encoder takes its threads from torch's
    bundle = Bundle.load(settings["bundle"], verify=False, device=settings["device"], precision=settings["precision"])
    max_batch, batchers = batching(bundle, settings["workers"], settings["max_batch"])  # the workers share the cores
    logged()
    return create_app(
        bundle,
        token=settings["token"],
        max_batch=max_batch,
        max_wait=settings["max_wait"],
        batchers=batchers,
        keep_unknowns=settings["keep_unknowns"],
        keep_traffic=settings["keep_traffic"],
        fine_tune=settings.get("fine_tune"),
    )


def logged() -> logging.Logger:
    """The service's log (``cea.serve``): its lines, from INFO up, on stderr as ``cea serve: ...``."""
    log = logging.getLogger("cea.serve")
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("cea serve: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


def create_app(
    bundle: Bundle,
    token: str | None = None,
    max_texts: int = LIMITS["max_texts"],
    max_chars: int = LIMITS["max_chars"],
    max_body: int = LIMITS["max_body"],
    max_batch: int = BATCHING["max_batch"],
    max_wait: float = BATCHING["max_wait"],
    batchers: int = 1,
    keep_unknowns: int = 0,
    keep_traffic: int = 0,
    commit_wait: float = 0.0,
    fine_tune: dict | None = None,
) -> FastAPI:
    """The FastAPI app of ``bundle``; ``max_batch`` and ``max_wait``: when a batch of concurrent predictions closes
    (texts, seconds); ``batchers``: batches answered side by side (:func:`service_threads` says how many);
    ``keep_unknowns``: keep the latest this many texts answered unknown in the bundle's store (0: none), written off the
    request path; ``keep_traffic``: keep the latest this many predicted texts and their embeddings there, for
    ``GET /suggest`` (0: none); ``commit_wait``: seconds a group commit of additions waits for more after its first (0:
    it takes what queued during the last commit's fsync, which answered additions 5-9 ms sooner at the median than 5 ms
    of waiting, at the same throughput: the figures page); ``fine_tune``: fit in the background
    (:class:`cea.service.fine_tuning.BackgroundFit`'s options ``budget``, ``work``, ``first``; None: never)."""
    metrics = Metrics(bundle)
    bundle.on_refit = metrics.refitted
    trainer = None
    if fine_tune is not None:
        trainer = BackgroundFit(bundle, **{"on_end": metrics.fitted, **fine_tune})
        metrics.training.set_function(lambda: trainer.state != "idle")
    queues = Queues(
        bundle,
        max_batch=max_batch,
        max_wait=max_wait,
        workers=batchers,
        max_texts=max_texts,
        commit_wait=commit_wait,
        keep_unknowns=keep_unknowns,
        keep_traffic=keep_traffic,
        on_batch=metrics.batch_done,
    )

    @asynccontextmanager
    async def lifespan(app):
        yield
        if trainer is not None:
            trainer.stop()
        await asyncio.get_running_loop().run_in_executor(None, queues.close)

    app = FastAPI(
        title="cea kNN classifier",
        version="1",
        lifespan=lifespan,
        exception_handlers={RequestValidationError: contract.refused_body, 405: contract.not_allowed},
    )
    query, examples = contract.bodies(max_texts, max_chars, bundle.multi_label)
    app.add_middleware(routes.DirectPredict, queues=queues, Query=query)  # inside the limits and metrics
    app.add_middleware(LimitsAndMetrics, metrics=metrics, max_body=max_body)
    app.include_router(routes.reading(bundle, queues, query, metrics.exposition, trainer))
    app.include_router(routes.changes(bundle, queues, examples, token))
    app.include_router(ml_backend.router(bundle, queues, token, max_chars, trainer))
    app.state.trainer = trainer
    return app


class Metrics:
    """The metrics of one app serving ``bundle``."""

    def __init__(self, bundle):
        self.registry = registry = CollectorRegistry()
        self.requests = Counter(
            "cea_requests", "HTTP requests by route and status", ["route", "status"], registry=registry
        )
        self.seconds = Counter("cea_request_seconds", "Seconds spent answering, by route", ["route"], registry=registry)
        self.latency = Histogram(
            "cea_request_latency_seconds",
            "Seconds from request to response, by route",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.batch_texts = Histogram(
            "cea_batch_texts",
            "Texts per encoder call (predictions and added examples)",
            buckets=SIZE_BUCKETS,
            registry=registry,
        )
        self.queue_wait = Histogram(
            "cea_queue_wait_seconds",
            "Seconds a request waited for its encoder batch",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.refit = Histogram(
            "cea_refit_seconds", "Seconds of each refit of the linear head", buckets=LATENCY_BUCKETS, registry=registry
        )
        self.refit_lag = Histogram(
            "cea_change_to_head_seconds",
            "Seconds from a change to the refitted head that counts it",
            buckets=LATENCY_BUCKETS + (20, 40, 80),
            registry=registry,
        )
        Gauge("cea_examples", "Examples in the bundle", registry=registry).set_function(lambda: len(bundle))
        self.fits = Counter(
            "cea_fits",
            "Background fits by outcome: swapped, kept (the live bundle judged as good) or failed",
            ["outcome"],
            registry=registry,
        )
        self.fit_seconds = Histogram(
            "cea_fit_seconds",
            "Seconds of each background fit, from its start to its swap",
            buckets=FIT_BUCKETS,
            registry=registry,
        )
        self.training = Gauge("cea_training", "1 while a background fit runs", registry=registry)

    def batch_done(self, texts: int, waits: list[float]) -> None:
        """A batch of ``texts`` was encoded; ``waits``: each of its requests' seconds in the queue."""
        self.batch_texts.observe(texts)
        for wait in waits:
            self.queue_wait.observe(wait)

    def refitted(self, seconds: float, lags: list[float]) -> None:
        """A head was installed after ``seconds`` of fitting; ``lags``: seconds since each change it counts."""
        self.refit.observe(seconds)
        for lag in lags:
            self.refit_lag.observe(lag)

    def fitted(self, last: dict) -> None:
        """A background fit ended (:meth:`cea.service.fine_tuning.BackgroundFit.status`'s ``last``): counted, and said
        in the service's log."""
        self.fits.labels(outcome=last["outcome"]).inc()
        self.fit_seconds.observe(last["seconds"])
        said = f"background fit {last['outcome']} after {last['seconds']:.0f} s"
        if "live_accuracy" in last:
            said += (
                f" (held-back annotations right: fitted {last['fitted_accuracy']:.2f}%, live "
                f"{last['live_accuracy']:.2f}%)"
            )
        said += f": generation {last['generation']} serves" if last["swapped"] else f": {last['why']}"
        logging.getLogger("cea.serve").info(said)

    def exposition(self) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


class LimitsAndMetrics:
    """ASGI middleware: a body over ``max_body`` bytes answered 413, every request counted in ``metrics``."""

    def __init__(self, inner, metrics: Metrics, max_body: int):
        self.inner, self.metrics, self.max_body = inner, metrics, max_body
        self._series = {}  # (route, status) -> its three series: labels() takes a lock and builds a key each call

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.inner(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and int(length) > self.max_body:
            return await JSONResponse({"detail": f"request body over {self.max_body} bytes"}, status_code=413)(
                scope, receive, send
            )
        started, status = time.perf_counter(), [500]

        async def sending(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.inner(scope, receive, sending)
        finally:
            route, took = scope.get("route"), time.perf_counter() - started
            key = (f"{scope['method']} {route.path if route is not None else scope['path']}", str(status[0]))
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = (
                    self.metrics.requests.labels(route=key[0], status=key[1]),
                    self.metrics.seconds.labels(route=key[0]),
                    self.metrics.latency.labels(route=key[0]),
                )
            series[0].inc()
            series[1].inc(took)
            series[2].observe(took)
