"""The service's Prometheus metrics, and the body limit and request counts around every request.

:class:`Metrics` keeps one registry per app (several apps in one process do not collide): requests by route and
status, latency per route, texts per encoder batch and each request's wait for its batch, the head's refit seconds
and each change's wait for the head that counts it, and the examples held. :class:`LimitsAndMetrics` refuses a body
over ``max_body`` bytes (413) and counts every request, as a plain ASGI middleware: starlette's ``@app.middleware``
wraps every request in streams and a task group, a cost that showed at hundreds of requests a second.

When to use it
    :func:`cea.serving.app.create_app` puts both in front of its routes; ``GET /metrics`` answers
    :meth:`Metrics.exposition`.
"""

from __future__ import annotations

import time

from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Metrics:
    """The metrics of one app serving ``bundle``."""

    def __init__(self, bundle):
        self.registry = registry = CollectorRegistry()
        self.requests = Counter("cea_requests", "HTTP requests by route and status", ["route", "status"],
                                registry=registry)
        self.seconds = Counter("cea_request_seconds", "Seconds spent answering, by route", ["route"], registry=registry)
        self.latency = Histogram("cea_request_latency_seconds", "Seconds from request to response, by route",
                                 ["route"], buckets=LATENCY_BUCKETS, registry=registry)
        self.batch_texts = Histogram("cea_batch_texts", "Texts per encoder call (predictions and added examples)",
                                     buckets=SIZE_BUCKETS, registry=registry)
        self.queue_wait = Histogram("cea_queue_wait_seconds", "Seconds a request waited for its encoder batch",
                                    buckets=LATENCY_BUCKETS, registry=registry)
        self.refit = Histogram("cea_refit_seconds", "Seconds of each refit of the linear head",
                               buckets=LATENCY_BUCKETS, registry=registry)
        self.refit_lag = Histogram("cea_change_to_head_seconds", "Seconds from a change to the refitted head that "
                                   "counts it", buckets=LATENCY_BUCKETS + (20, 40, 80), registry=registry)
        Gauge("cea_examples", "Examples in the bundle", registry=registry).set_function(lambda: len(bundle))

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

    def answered(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route=route, status=str(status)).inc()
        self.seconds.labels(route=route).inc(seconds)
        self.latency.labels(route=route).observe(seconds)

    def exposition(self) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


class LimitsAndMetrics:
    """ASGI middleware: a body over ``max_body`` bytes answered 413, every request counted in ``metrics``."""

    def __init__(self, inner, metrics: Metrics, max_body: int):
        self.inner, self.metrics, self.max_body = inner, metrics, max_body

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.inner(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and int(length) > self.max_body:
            return await JSONResponse({"detail": f"request body over {self.max_body} bytes"},
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
            self.metrics.answered(f'{scope["method"]} {route.path if route is not None else scope["path"]}',
                                  status[0], time.perf_counter() - started)
