"""The service's batchers in front of one bundle: a request waits for its own batch only, never for a refit of the
head, another's change being written or the keeping of texts.

``encode`` answers concurrent predictions, and encodes the texts of additions, in one encoder call a batch (an addition
of one text alone would cost a pass of its own, about twice a batched text's); ``commit`` writes concurrent additions as
one record, one fsync for all (a group commit); ``keep`` keeps the texts answered unknown, and the latest predicted
texts with their embeddings, in the bundle's store after they are answered (:class:`cea.service.batching.Batcher` each).

How
    An ``encode`` batch holds requests of two kinds, :class:`cea.bundle.PredictRequest` and
    :class:`cea.bundle.AddRequest`: its texts encoded at once, each kind is answered from its own rows by its own
    callback, a prediction with a :class:`Predicted` and an addition with itself, its ``vectors`` and ``version``
    filled in (ready for ``commit``).

What it expects
    A :class:`cea.bundle.Bundle`; ``on_batch(texts, waits)``: told of each encoder batch (for metrics).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

import numpy as np

from ..bundle import AddRequest, Bundle, Prediction, PredictRequest
from ..data.labels import UNKNOWN
from ..errors import CeaError
from .batching import Batcher


@dataclass(frozen=True)
class Predicted:
    """A prediction request's answer: its ``predictions`` and its texts' embeddings (``vectors``)."""

    predictions: list[Prediction]
    vectors: np.ndarray


def split(vectors: np.ndarray, requests: list) -> list[np.ndarray]:
    """``vectors`` (the rows of the ``requests``' texts, in order) cut into each request's own rows."""
    starts = np.cumsum([0] + [len(request.texts) for request in requests])
    return [vectors[a:b] for a, b in zip(starts[:-1], starts[1:])]


class Queues:
    """The batchers of :func:`cea.service.app.create_app`'s options of the same names (``workers``: its ``batchers``);
    additions committed together up to ``max_texts`` texts."""

    def __init__(
        self,
        bundle: Bundle,
        max_batch: int,
        max_wait: float,
        workers: int,
        max_texts: int,
        commit_wait: float,
        keep_unknowns: int,
        keep_traffic: int = 0,
        on_batch=None,
    ):
        self.bundle, self.limits = bundle, {"unknowns": keep_unknowns, "traffic": keep_traffic}
        # each kind of request an encode batch holds, and the callback that answers those of a batch from their rows
        self.answers = {PredictRequest: self._predicted, AddRequest: self._encoded}
        self.encode = Batcher(
            self._encode,
            max_batch=max_batch,
            max_wait=max_wait,
            workers=workers,
            size=lambda request: len(request.texts),
            on_batch=on_batch,
        )
        self.commit = Batcher(
            bundle.add_many, max_batch=max_texts, max_wait=commit_wait, size=lambda request: len(request.texts)
        )
        self.keep = Batcher(self._keep, max_batch=max_texts, max_wait=0.05, size=lambda item: len(item[1]))

    async def predict(self, request: PredictRequest) -> Predicted:
        """The predictions of ``request``'s texts and their embeddings, from a batch with others'; they, and those
        answered unknown, are kept (not waited for) where the service keeps them."""
        found = await self.encode.submit_async(request)
        if self.limits["unknowns"]:
            turned_away = [
                {"text": text, "closest": p.closest, "evidence": round(float(p.evidence), 4)}
                for text, p in zip(request.texts, found.predictions)
                if p.label == UNKNOWN
            ]
            if turned_away:
                self.keep.submit(("unknowns", turned_away))
        if self.limits["traffic"]:
            self.keep.submit(
                (
                    "traffic",
                    [
                        {"text": text, "prediction": p.label, "embedding": vector}
                        for text, p, vector in zip(request.texts, found.predictions, found.vectors)
                    ],
                )
            )
        return found

    async def encoded(self, request: AddRequest) -> AddRequest:
        """``request`` with its texts' embeddings and the :attr:`cea.bundle.Bundle.encoder_version` that made them,
        encoded in a prediction batch."""
        return await self.encode.submit_async(request)

    async def add(self, request: AddRequest) -> list[int]:
        """Add labelled examples: their texts encoded in a prediction batch (unless the request brings their
        embeddings: the kept traffic's, by the encoder in place, as a renewal forgets the kept traffic), then committed
        with other additions; their ids, once durable."""
        if request.vectors is None:
            request = await self.encoded(request)
        return await self.commit.submit_async(request)

    async def suggested(self, ids: list[str]) -> tuple[list[str], np.ndarray]:
        """The texts and kept embeddings of the kept traffic's ``ids`` (suggestions: ``GET /suggest``); a CeaError
        names those not kept."""
        kept = {item["id"]: item for item in await asyncio.to_thread(self.bundle.store.kept, "traffic")}
        missing = [i for i in ids if i not in kept]
        if missing:
            raise CeaError(f"no kept text of id(s) {', '.join(missing[:5])}; GET /suggest for the current ones")
        return [kept[i]["text"] for i in ids], np.stack([kept[i]["embedding"] for i in ids])

    def close(self) -> None:
        """Answer what is queued, then stop."""
        for batcher in (self.encode, self.commit, self.keep):
            batcher.close()

    def _encode(self, requests: list) -> list:
        """One encode of a batch's texts; each kind of request then answered from its own rows by its callback
        (:attr:`answers`), given the :attr:`cea.bundle.Bundle.encoder_version` read before encoding
        (:meth:`cea.bundle.Bundle.current`)."""
        version = self.bundle.encoder_version
        vectors = split(self.bundle.embed([text for request in requests for text in request.texts]), requests)
        kinds = {}
        for i, request in enumerate(requests):
            kinds.setdefault(type(request), []).append(i)
        out = [None] * len(requests)
        for kind, at in kinds.items():
            answered = self.answers[kind]([requests[i] for i in at], np.concatenate([vectors[i] for i in at]), version)
            for i, answer in zip(at, answered):
                out[i] = answer
        return out

    def _predicted(self, requests: list[PredictRequest], vectors: np.ndarray, version: int) -> list[Predicted]:
        """The predictions of a batch's ``requests`` and each one's embeddings (``vectors``: their texts' rows)."""
        found = self.bundle.predict_many(requests, vectors=vectors, version=version)
        return [Predicted(predictions, rows) for predictions, rows in zip(found, split(vectors, requests))]

    def _encoded(self, requests: list[AddRequest], vectors: np.ndarray, version: int) -> list[AddRequest]:
        """Each addition of a batch with its texts' embeddings (``vectors``: their rows) and the encoder's
        ``version``."""
        return [
            replace(request, vectors=rows, version=version) for request, rows in zip(requests, split(vectors, requests))
        ]

    def _keep(self, batches: list[tuple[str, list[dict]]]) -> list[None]:
        """Keep each pile's items of ``batches`` (``(pile, items)``) in one write."""
        for pile, limit in self.limits.items():
            items = [item for name, part in batches if name == pile for item in part]
            if items:
                self.bundle.store.keep(items, limit, pile)
        return [None] * len(batches)
