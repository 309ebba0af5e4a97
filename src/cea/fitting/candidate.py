"""One encoder ``cea fit`` may ship, as a named record its stages pass on, with the records of its choice and speed.

What it holds
    :class:`Candidate`: its ``name`` as ``fit.json`` names it (``frozen``, ``trained``, ``truncated-3``,
    ``static-aligned``, ``trained-int8``), the ``folder`` its bundle loads, the loaded ``encoder``, its ``embeddings``
    of each split, its ``state`` (what ``fit.json``'s ``states`` says it was loaded and encoded from), the
    ``seconds`` its stages took (``encode``, ``choose``), its :class:`Choice` on dev and test
    (:func:`cea.fitting.choice.choose_classifier`, with the classifier chosen), the ``backend`` and
    ``max_seq_length`` of an export (int8) and, once timed, how fast its bundle is served (:class:`Served`).

Why a record
    A fit passes a candidate through several stages (probe, training, the faster kinds, the timing, the bundle);
    a named record says at each of them which part is read, where a tuple said it by position.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..knn.decision import Classifier

SPLITS = ("train", "dev", "test")


@dataclasses.dataclass(frozen=True)
class Choice:
    """A candidate's classifier chosen on dev: what the search measured (``dev``: the chosen classifier's figures
    there), that classifier in words (``described``), its ``test`` figures and the ``classifier`` itself."""

    dev: dict
    described: str
    test: dict
    classifier: Classifier

    def summary(self) -> dict:
        """What ``fit.json`` keeps of it: every part but the classifier (``described`` says it in words)."""
        return {"dev": self.dev, "described": self.described, "test": self.test}


@dataclasses.dataclass(frozen=True)
class Served:
    """A candidate's bundle timed as the service asks it (:func:`cea.bundle.speed.served_speed`): the ``p99_ms`` and
    ``p50_ms`` of one-text requests from 16 clients, the ``texts_per_second`` of bulk requests, and whether it is on
    the ``frontier`` (:func:`cea.fitting.candidates.frontier`: no other candidate both faster and better on dev)."""

    p99_ms: float
    p50_ms: float
    texts_per_second: float
    frontier: bool = False

    def summary(self) -> dict:
        """``fit.json``'s ``served``: the figures, and ``frontier`` where it is on it."""
        return {
            "p99_ms": self.p99_ms,
            "p50_ms": self.p50_ms,
            "texts_per_second": self.texts_per_second,
            **({"frontier": True} if self.frontier else {}),
        }


@dataclasses.dataclass
class Candidate:
    """A candidate encoder of one fit: ``folder`` (what its bundle loads), ``encoder``, ``embeddings`` (``{split:
    (n, d) array}``), ``state`` (``fit.json``'s ``states`` entry), ``seconds`` (``{stage: seconds}``), ``choice``
    (once chosen), ``backend`` and ``max_seq_length`` (an export's: its bundle's backend, the length it was cut at;
    None: the bundle's own choice) and ``served`` (once timed)."""

    name: str
    folder: str
    encoder: object
    embeddings: dict[str, np.ndarray]
    state: dict = dataclasses.field(default_factory=dict)
    seconds: dict = dataclasses.field(default_factory=dict)
    choice: Choice | None = None
    backend: str | None = None
    max_seq_length: int | None = None
    served: Served | None = None

    @property
    def classifier(self) -> Classifier:
        """The classifier chosen for it on dev."""
        return self.choice.classifier

    def dev(self, metric: str) -> float:
        """Its dev figure ``metric`` (accuracy, or micro-F1 for label sets) with its chosen classifier."""
        return self.choice.dev[metric]

    def vectors(self) -> np.ndarray:
        """Its embeddings of train, dev and test, stacked in that order (a bundle's references)."""
        return np.vstack([self.embeddings[s] for s in SPLITS])

    def summary(self) -> dict:
        """What ``fit.json``'s ``candidates`` says of it: its choice (the classifier in words), an export's backend
        and length, and its speed where timed."""
        export = {"backend": self.backend, "max_seq_length": self.max_seq_length} if self.backend else {}
        return {**self.choice.summary(), **export, **({"served": self.served.summary()} if self.served else {})}
