"""The service's routes (:mod:`cea.service.app` lists them), in two routers: reading (predictions, the bundle's
state, suggestions) and changes (behind the token).

What it expects
    The bundle and its :class:`cea.service.queues.Queues`; request bodies bounded by
    :func:`cea.service.contract.bodies` (422 beyond). A :class:`cea.errors.CeaError` (bad input, an unknown id, no kept
    traffic) is answered 422, 404 or 409 with its line; each route's ``responses`` name every status it answers
    (:func:`cea.service.contract.answers`).
"""

# no ``from __future__ import annotations`` here: FastAPI reads the routes' request models from the live annotations
import asyncio
import contextlib
import os

import fastapi
from fastapi import APIRouter, Depends, HTTPException
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic_core import to_json

from ..bundle import AddRequest, Bundle, PredictRequest
from ..errors import CeaError
from ..labelling.suggest import from_traffic
from . import contract
from .contract import BODY, answers
from .queues import Queues


@contextlib.contextmanager
def refused(status: int):
    """A CeaError raised inside (bad input, an unknown id) answered with ``status`` and its line."""
    try:
        yield
    except CeaError as exc:
        raise HTTPException(status_code=status, detail=str(exc)) from None


def answer(found: list) -> bytes:
    """``/predict``'s JSON: plain types, written by pydantic's JSON writer (a 64-text answer in 0.11 ms, the json
    module's 0.46)."""
    return to_json({"predictions": [p.as_dict() for p in found]})


class DirectPredict:
    """ASGI middleware: ``POST /predict`` with a JSON body that ``Query`` accepts, answered here from ``queues``
    without FastAPI's routing, dependency solving and exception layers; any other request, and a body that does not
    validate, goes on to the app (its route answers the same, and FastAPI words the 422). Written by hand because
    those layers were a fifth of a static encoder's service time at 16 one-text clients (a py-spy profile of the
    GIL's holder: routing and the route's handler 19 % of 33 % in the app), more than its search."""

    def __init__(self, inner, queues: Queues, Query: type):
        self.inner, self.queues, self.Query = inner, queues, Query

    async def __call__(self, scope, receive, send):
        if (
            scope["type"] != "http"
            or scope["path"] != "/predict"
            or scope["method"] != "POST"
            or dict(scope["headers"]).get(b"content-type") != b"application/json"
        ):
            return await self.inner(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            query = self.Query.model_validate_json(body)
        except ValueError:  # pydantic's ValidationError: the app's route answers with FastAPI's words
            return await self.inner(scope, _replay(body), send)
        try:
            found = await self.queues.predict(PredictRequest(query.texts, query.k, query.threshold))
            status, payload = 200, answer(found.predictions)
        except CeaError as exc:  # as the route's refused(422)
            status, payload = 422, to_json({"detail": str(exc)})
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))],
            }
        )
        await send({"type": "http.response.body", "body": payload})


def _replay(body: bytes):
    """An ASGI ``receive`` that gives ``body`` once more."""
    messages = iter([{"type": "http.request", "body": body, "more_body": False}])

    async def receive():
        return next(messages, {"type": "http.disconnect"})

    return receive


def reading(bundle: Bundle, queues: Queues, Query: type, exposition, trainer=None) -> APIRouter:
    """Predictions and the bundle's state; ``exposition()``: the metrics' Prometheus text as a response;
    ``trainer``: the background fits (:class:`cea.service.fine_tuning.BackgroundFit`; None: none run)."""
    router = APIRouter()

    @router.post("/predict", responses=answers(contract.Predictions, *BODY))
    async def predict(body: Query):  # async: it waits for its batch without holding a thread of the pool
        with refused(422):
            found = await queues.predict(PredictRequest(body.texts, body.k, body.threshold))
        return Response(answer(found.predictions), media_type="application/json")

    @router.get("/examples/{example_id}", responses=answers(contract.Example, 404, 422))
    def get(example_id: int):
        with refused(404):
            return bundle.get(example_id)

    @router.get("/labels", responses=answers(contract.Labels))
    def labels():
        return {"labels": bundle.label_counts}

    @router.get("/unknowns", responses=answers(contract.Unknowns))
    def unknowns():
        return {"unknowns": bundle.store.kept()}

    @router.get("/suggest", responses=answers(contract.Suggestions, 409, 422))
    def suggest(n: int = fastapi.Query(10, ge=1, le=1000, description="how many")):  # a thread of the pool ranks
        with refused(409):
            return {"suggestions": from_traffic(bundle, n).to_dict("records")}

    @router.get("/health", responses=answers(contract.Health))
    def health():
        return {
            "status": "ok",
            "examples": len(bundle),
            "generation": bundle.manifest["generation"],
            "store": bundle.store.kind,
            "pid": os.getpid(),
            "classifier": bundle.classifier.kind,
            "unknown_threshold": bundle.unknown_threshold,
            **({"training": trainer.status()} if trainer is not None else {}),
        }

    @router.get("/metrics", response_class=Response, responses=answers(None, media_type="text/plain"))
    def metrics():
        return exposition()

    return router


def changes(bundle: Bundle, queues: Queues, Examples: type, token: str | None) -> APIRouter:
    """Additions and removals, behind ``token`` where one is set (the document then names the bearer scheme and
    their 401)."""
    bearer = HTTPBearer(auto_error=False, description="the token cea serve was started with")

    async def authorised(given: HTTPAuthorizationCredentials | None = Depends(bearer)):  # async: no thread hop
        if given is None or given.credentials != token:
            raise HTTPException(status_code=401, detail="changes need Authorization: Bearer TOKEN")

    guarded = token is not None
    router = APIRouter(dependencies=[Depends(authorised)] if guarded else [])
    locked = (401,) if guarded else ()

    @router.post("/examples", responses=answers(contract.Added, *BODY, 404, *locked))
    async def add(body: Examples):
        if (body.texts is None) == (body.suggestions is None):
            raise HTTPException(status_code=422, detail="give texts, or suggestions (ids from GET /suggest), not both")
        texts, vectors = body.texts, None
        if body.suggestions is not None:
            with refused(404):
                texts, vectors = await queues.suggested(body.suggestions)
        if len(body.labels) != len(texts):
            raise HTTPException(status_code=422, detail=f"{len(texts)} texts but {len(body.labels)} labels")
        with refused(422):
            ids = await queues.add(AddRequest(texts, body.labels, vectors))
        if body.suggestions is not None:  # labelled: out of the kept traffic
            await asyncio.to_thread(bundle.store.forget, body.suggestions, "traffic")
        return {"ids": ids}

    @router.delete("/examples/{example_id}", responses=answers(contract.Removed, 404, 422, *locked))
    def remove(example_id: int):  # a thread of the pool waits for the write
        with refused(404):
            bundle.remove([example_id])
        return {"removed": example_id}

    return router
