"""The service's routes, in three routers: predictions, changes (behind the token) and the bundle's state.

Request bodies are bounded (:func:`bodies`): at most ``max_texts`` texts of at most ``max_chars`` characters, none
empty (422 otherwise). A :class:`cea.errors.CeaError` (bad input, an unknown id) is answered 422 or 404 with its
line; anything else is a 500.

What it expects
    The bundle and its :class:`cea.serving.queues.Queues`; :func:`cea.serving.app.create_app` includes the routers
    and describes the routes.
"""

# no ``from __future__ import annotations`` here: FastAPI reads the request models of the routes from the live
# annotations
import os

from fastapi import APIRouter, Depends, Header, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator

from ..errors import CeaError
from .bundle import Bundle
from .metrics import Metrics
from .queues import Queues


def bodies(max_texts: int, max_chars: int) -> tuple[type, type]:
    """The request models of ``/predict`` and of ``POST /examples``, bounded."""

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

    return Query, Examples


async def answer(status: int, awaited):
    """What the coroutine ``awaited`` gives, its CeaError answered with ``status``."""
    try:
        return await awaited
    except CeaError as exc:
        raise HTTPException(status_code=status, detail=str(exc)) from None


def lookup(status: int, method, *args):
    """``method(*args)``, its CeaError answered with ``status``."""
    try:
        return method(*args)
    except CeaError as exc:
        raise HTTPException(status_code=status, detail=str(exc)) from None


def predictions(queues: Queues, Query: type) -> APIRouter:
    router = APIRouter()

    @router.post("/predict")
    async def predict(body: Query):  # async: it waits for its batch without holding a thread of the pool
        found = await answer(422, queues.predict(body.texts, body.k, body.threshold))
        return JSONResponse({"predictions": [p.as_dict() for p in found]})  # plain types: no encoder pass needed

    return router


def changes(bundle: Bundle, queues: Queues, Examples: type, token: str | None) -> APIRouter:
    async def authorised(authorization: str | None = Header(default=None)):  # async: no hop to the thread pool
        if token is not None and authorization != f"Bearer {token}":
            raise HTTPException(status_code=401, detail="changes need Authorization: Bearer TOKEN")

    router = APIRouter(dependencies=[Depends(authorised)])

    @router.post("/examples")
    async def add(body: Examples):
        if len(body.labels) != len(body.texts):
            raise HTTPException(status_code=422, detail=f"{len(body.texts)} texts but {len(body.labels)} labels")
        return {"ids": await answer(422, queues.add(body.texts, body.labels))}

    @router.delete("/examples/{example_id}")
    def remove(example_id: int):  # a thread of the pool waits for the write
        lookup(404, bundle.remove, [example_id])
        return {"removed": example_id}

    return router


def state(bundle: Bundle, metrics: Metrics) -> APIRouter:
    router = APIRouter()

    @router.get("/examples/{example_id}")
    def get(example_id: int):
        return lookup(404, bundle.get, example_id)

    @router.get("/labels")
    def labels():
        return {"labels": bundle.label_counts}

    @router.get("/unknowns")
    def unknowns():
        return {"unknowns": bundle.store.unknowns()}

    @router.get("/health")
    def health():
        return {"status": "ok", "examples": len(bundle), "generation": bundle.manifest["generation"],
                "store": bundle.store.kind, "pid": os.getpid(), "classifier": bundle.classifier.kind,
                "unknown_threshold": bundle.unknown_threshold}

    @router.get("/metrics")
    def exposition():
        return metrics.exposition()

    return router
