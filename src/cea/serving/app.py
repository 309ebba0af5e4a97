"""``cea serve BUNDLE``: the bundle over HTTP (FastAPI, served by uvicorn).

    POST   /predict          {"texts": [...], "k": 5, "threshold": 0.4}
                             -> {"predictions": [{label, score, evidence, (labels,) (closest,) neighbours}]}
    POST   /examples         {"texts": [...], "labels": [...]} -> {"ids": [...]}  (durable when answered; a multi-label
                                                               bundle takes a list of labels per text)
    GET    /examples/{id}                                     -> {"id", "label", "text"}
    DELETE /examples/{id}                                     -> {"removed": id}
    GET    /labels                                            -> {"labels": {label: count}}
    GET    /health                                            -> {"status": "ok", "examples": n, "classifier": ...,
                                                                  "unknown_threshold": t or null}

A multi-label bundle's prediction also has ``labels``, ``[{"label", "score"}]``, best first. A prediction's label is
``unknown`` (and ``closest`` its best class) where its evidence falls below the request's
``threshold``, or the bundle's when the request names none (0: never).
    GET    /metrics                                           -> request counts and latencies (Prometheus text)

Changes need ``Authorization: Bearer TOKEN`` when a token is set (``cea serve`` requires one for any address but
loopback). Requests are bounded: at most ``max_texts`` texts of at most ``max_chars`` characters each, and a body of at
most ``max_body`` bytes (413 beyond it, 422 for a malformed body).
"""

# no ``from __future__ import annotations`` here: FastAPI reads the request models defined inside
# create_app from the live annotations
import json
import os
import time

from ..errors import CeaError
from .bundle import Bundle

LIMITS = {"max_texts": 256, "max_chars": 2000, "max_body": 2_000_000}
SETTINGS = "CEA_SERVE_SETTINGS"  # what each of cea serve --workers N's processes opens (JSON)


def from_environment():
    """The app of one worker process of ``cea serve --workers N`` (uvicorn's factory): the bundle named in
    :data:`SETTINGS`, opened here; its store keeps it in step with the other workers."""
    import torch

    settings = json.loads(os.environ[SETTINGS])
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // settings["workers"]))  # the workers share the cores
    bundle = Bundle.load(settings["bundle"], verify=False, device=settings["device"], precision=settings["precision"])
    return create_app(bundle, token=settings["token"])


def create_app(bundle: Bundle, token: "str | None" = None, max_texts: int = LIMITS["max_texts"],
               max_chars: int = LIMITS["max_chars"], max_body: int = LIMITS["max_body"]):
    from fastapi import Depends, FastAPI, Header, HTTPException, Request
    from fastapi.responses import JSONResponse, Response
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest
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

    app = FastAPI(title="cea kNN classifier", version="1")
    registry = CollectorRegistry()  # one per app: several apps in one process do not collide
    requests = Counter("cea_requests", "HTTP requests by route and status", ["route", "status"], registry=registry)
    seconds = Counter("cea_request_seconds", "Seconds spent answering, by route", ["route"], registry=registry)
    Gauge("cea_examples", "Examples in the bundle", registry=registry).set_function(lambda: len(bundle))

    @app.middleware("http")
    async def limits_and_metrics(request: Request, call_next):
        length = request.headers.get("content-length")
        if length is not None and int(length) > max_body:
            return JSONResponse({"detail": f"request body over {max_body} bytes"}, status_code=413)
        started = time.perf_counter()
        response = await call_next(request)
        key = f'{request.method} {request.scope.get("route").path if request.scope.get("route") else request.url.path}'
        requests.labels(route=key, status=str(response.status_code)).inc()
        seconds.labels(route=key).inc(time.perf_counter() - started)
        return response

    def authorised(authorization: str | None = Header(default=None)):
        if token is not None and authorization != f"Bearer {token}":
            raise HTTPException(status_code=401, detail="changes need Authorization: Bearer TOKEN")

    def answer(status: int, method, *args):
        """``method(*args)``, its CeaError (bad input, unknown id) answered with ``status``."""
        try:
            return method(*args)
        except CeaError as exc:
            raise HTTPException(status_code=status, detail=str(exc)) from None

    @app.post("/predict")
    def predict(body: Query):
        return {"predictions": [p.as_dict() for p in answer(422, bundle.predict, body.texts, body.k, body.threshold)]}

    @app.post("/examples", dependencies=[Depends(authorised)])
    def add(body: Examples):
        if len(body.labels) != len(body.texts):
            raise HTTPException(status_code=422, detail=f"{len(body.texts)} texts but {len(body.labels)} labels")
        return {"ids": answer(422, bundle.add, body.texts, body.labels)}

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

    @app.get("/health")
    def health():
        return {"status": "ok", "examples": len(bundle), "generation": bundle.manifest["generation"],
                "store": bundle.store.kind, "pid": os.getpid(),
                "classifier": bundle.manifest.get("classifier", {"kind": "knn"})["kind"],
                "unknown_threshold": bundle.unknown_threshold}

    @app.get("/metrics")
    def metrics():
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app
