"""One encoder ``cea fit`` may ship, as a named record its stages pass on.

What it holds
    :class:`Candidate`: its ``name`` as ``fit.json`` names it (``frozen``, ``trained``, ``truncated-3``,
    ``static-aligned``, ``trained-int8``), the ``folder`` its bundle loads, the loaded ``encoder``, its ``embeddings``
    of each split, its ``state`` (what ``fit.json``'s ``states`` says it was loaded and encoded from), the
    ``seconds`` its stages took (``encode``, ``choose``), its ``choice`` on dev and test
    (:func:`cea.fitting.choice.choose_classifier`, with the classifier chosen) and what more ``fit.json`` says of it
    (``said``: its backend, its max sequence length, its served speed).

Why a record
    A fit passes a candidate through several stages (probe, training, the faster kinds, the timing, the bundle);
    a named record says at each of them which part is read, where a tuple said it by position.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..knn.decision import Classifier

SPLITS = ("train", "dev", "test")


@dataclasses.dataclass
class Candidate:
    """A candidate encoder of one fit: ``folder`` (what its bundle loads), ``encoder``, ``embeddings`` (``{split:
    (n, d) array}``), ``state`` (``fit.json``'s ``states`` entry), ``seconds`` (``{stage: seconds}``),
    ``choice`` (``dev``, ``described``, ``test``, ``classifier``) and ``said`` (more of it for ``fit.json``)."""

    name: str
    folder: str
    encoder: object
    embeddings: dict[str, np.ndarray]
    state: dict = dataclasses.field(default_factory=dict)
    seconds: dict = dataclasses.field(default_factory=dict)
    choice: dict = dataclasses.field(default_factory=dict)
    said: dict = dataclasses.field(default_factory=dict)

    @property
    def classifier(self) -> Classifier:
        """The classifier chosen for it on dev."""
        return self.choice["classifier"]

    def dev(self, metric: str) -> float:
        """Its dev figure ``metric`` (accuracy, or micro-F1 for label sets) with its chosen classifier."""
        return self.choice["dev"][metric]

    @property
    def served(self) -> dict | None:
        """Its bundle's speed as the service asks it (``cea fit --latency``), once timed."""
        return self.said.get("served")

    def vectors(self) -> np.ndarray:
        """Its embeddings of train, dev and test, stacked in that order (a bundle's references)."""
        return np.vstack([self.embeddings[s] for s in SPLITS])

    def summary(self) -> dict:
        """What ``fit.json``'s ``candidates`` says of it: its choice (the classifier in words) and ``said``."""
        return {**{k: v for k, v in self.choice.items() if k != "classifier"}, **self.said}
