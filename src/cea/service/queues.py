"""The service's batchers in front of one bundle: a request waits for its own batch only, never for a refit of the
head, another's change being written or the keeping of texts.

``encode`` answers concurrent predictions, and encodes the texts of additions, in one encoder call a batch (an addition
of one text alone would cost a pass of its own, about twice a batched text's); ``commit`` writes concurrent additions as
one record, one fsync for all (a group commit); ``keep`` keeps the texts answered unknown, and the latest predicted
texts with their embeddings, in the bundle's store after they are answered (:class:`cea.service.batching.Batcher` each).

What it expects
    A :class:`cea.bundle.Bundle`; ``on_batch(texts, waits)``: told of each encoder batch (for metrics).
"""

from __future__ import annotations

import asyncio

import numpy as np

from ..bundle import Bundle, Prediction
from ..data.labels import UNKNOWN
from ..errors import CeaError
from .batching import Batcher


class Queues:
    """The batchers of :func:`cea.service.app.create_app`'s options of the same names (``workers``: its ``batchers``);
    additions committed together up to ``max_texts`` texts."""

    def __init__(self, bundle: Bundle, max_batch: int, max_wait: float, workers: int, max_texts: int,
                 commit_wait: float, keep_unknowns: int, keep_traffic: int = 0, on_batch=None):
        self.bundle, self.limits = bundle, {"unknowns": keep_unknowns, "traffic": keep_traffic}
        self.encode = Batcher(self._encode, max_batch=max_batch, max_wait=max_wait, workers=workers,
                              size=lambda item: len(item[0]), on_batch=on_batch)
        self.commit = Batcher(bundle.add_many, max_batch=max_texts, max_wait=commit_wait,
                              size=lambda item: len(item[0]))
        self.keep = Batcher(self._keep, max_batch=max_texts, max_wait=0.05, size=lambda item: len(item[1]))

    async def predict(self, texts: list[str], k: int | None, threshold: float | None, embeddings: bool = False
                      ) -> list[Prediction] | tuple[list[Prediction], np.ndarray]:
        """The predictions of ``texts``, from a batch with others' (and their embeddings, where ``embeddings``);
        they, and those answered unknown, are kept (not waited for) where the service keeps them."""
        found, vectors = await self.encode.submit_async((texts, k, threshold))
        if self.limits["unknowns"]:
            turned_away = [{"text": text, "closest": p.closest, "evidence": round(float(p.evidence), 4)}
                           for text, p in zip(texts, found) if p.label == UNKNOWN]
            if turned_away:
                self.keep.submit(("unknowns", turned_away))
        if self.limits["traffic"]:
            self.keep.submit(("traffic", [{"text": text, "prediction": p.label, "embedding": vector}
                                          for text, p, vector in zip(texts, found, vectors)]))
        return (found, vectors) if embeddings else found

    async def add(self, texts: list[str], labels: list, vectors: np.ndarray | None = None) -> list[int]:
        """Add labelled examples: their texts encoded in a prediction batch (unless ``vectors`` are their embeddings),
        then committed with other additions; their ids, once durable."""
        version = None  # the kept traffic's vectors: the encoder in place (a renewal forgets the kept traffic)
        if vectors is None:
            vectors, version = await self.encode.submit_async((texts,))
        return await self.commit.submit_async((texts, labels, vectors, version))

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

    def _encode(self, items: list[tuple]) -> list:
        """One encode of a batch's texts: a prediction ``(texts, k, threshold)`` gets its predictions and
        embeddings, an addition's ``(texts,)`` its embeddings and the :attr:`cea.bundle.Bundle.encoder_version` that
        made them."""
        version = self.bundle.encoder_version  # read before encoding (cea.bundle.Bundle.current)
        vectors = self.bundle.embed([text for item in items for text in item[0]])
        starts = np.cumsum([0] + [len(item[0]) for item in items])
        asked = [i for i, item in enumerate(items) if len(item) == 3]
        out = [vectors[a:b] for a, b in zip(starts[:-1], starts[1:])]
        if asked:
            rows = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in asked])
            for i, found in zip(asked, self.bundle.predict_many([items[i] for i in asked], vectors=vectors[rows],
                                                                version=version)):
                out[i] = found, out[i]
        return [(part, version) if len(item) == 1 else part for item, part in zip(items, out)]

    def _keep(self, batches: list[tuple[str, list[dict]]]) -> list[None]:
        """Keep each pile's items of ``batches`` (``(pile, items)``) in one write."""
        for pile, limit in self.limits.items():
            items = [item for name, part in batches if name == pile for item in part]
            if items:
                self.bundle.store.keep(items, limit, pile)
        return [None] * len(batches)
