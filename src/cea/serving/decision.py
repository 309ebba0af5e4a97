"""How a bundle answers: its classifier's label and score from the nearest references and the linear head,
the evidence behind the answer, and "unknown" below the bundle's threshold (:mod:`cea.knn.unknown`).

The bundle's answer and the calibration of its threshold go through :func:`decide`, so the threshold is
set on exactly the scores it is later compared with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..knn import fit_head, vote
from ..knn.search import search_torch
from ..knn.unknown import UNKNOWN, evidence, threshold_at

HOLDOUT, MAX_HOLDOUT = 0.2, 5000


@dataclass
class Prediction:
    label: str  # a class, or "unknown" where the evidence fell below the threshold
    score: float  # the classifier's probability (head) or vote share (kNN) of its best class
    neighbours: list[dict]
    evidence: float = 0.0  # score x the nearest reference's cosine: what the threshold is compared with
    closest: str | None = None  # the best class, when the answer is unknown

    def as_dict(self) -> dict:
        out = {"label": self.label, "score": self.score, "evidence": self.evidence}
        return {**out, "closest": self.closest, "neighbours": self.neighbours} if self.closest else \
            {**out, "neighbours": self.neighbours}


def decide(vectors: np.ndarray, sims: np.ndarray, neighbour_labels: np.ndarray, head, classifier: dict,
           weights: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(labels, scores, evidence)`` of unit-length query ``vectors`` from their nearest references (cosines
    ``sims``, labels ``neighbour_labels``, None where a query has fewer), nearest first.

    With a ``head`` (a linear bundle while two labels are live) the answer is the most probable class of the head,
    mixed with the kNN vote's shares by ``classifier["knn_share"]``, and its probability the score; without, the
    majority of the neighbours (``weights``: uniform, or distance votes ``1 / (1 - cos)``; a tie goes to the label
    of the nearest neighbour among the tied, as ``KNNClassifier``'s default) and its share of the votes."""
    present = np.not_equal(neighbour_labels, None)
    classes, codes = np.unique(neighbour_labels[present].astype(str), return_inverse=True)
    labels = np.full(sims.shape, -1)
    labels[present] = codes
    decided, votes = vote(labels, len(classes), 1.0 - sims, weights)
    chosen, scores = classes[decided], votes.max(1) / votes.sum(1)
    if head is not None:  # the vote's classes are live labels, hence columns of the head
        proba = head.mixed_proba(vectors, votes, classes, classifier.get("knn_share", 0.0))
        chosen, scores = head.classes[proba.argmax(1)], proba.max(1)
    return chosen, scores, evidence(scores, sims[:, 0])


def answer(labels, scores, strength, threshold: float | None) -> list[tuple[str, str | None]]:
    """``(label, closest)`` per query: the label, or unknown and the label it would have been."""
    return [(UNKNOWN, str(label)) if threshold is not None and s < threshold else (str(label), None)
            for label, s in zip(labels, strength)]


def calibrate(embeddings: np.ndarray, labels: list[str], rate: float, classifier: dict, k: int, weights: str,
              seed: int = 0) -> float:
    """The threshold that turns away a share ``rate`` of texts of the bundle's classes: a fifth of the references
    (at most 5,000, stratified by label where every label has two) is held out, the classifier fitted on the rest
    as the bundle fits it, and the threshold is the ``rate``-quantile of the held-out texts' evidence. With more
    references at prediction time known texts find closer neighbours, so fewer than ``rate`` are turned away."""
    from sklearn.model_selection import train_test_split

    labels = np.asarray(labels, dtype=str)
    n_out = int(min(max(1, round(HOLDOUT * len(labels))), MAX_HOLDOUT))
    _, counts = np.unique(labels, return_counts=True)
    stratify = labels if counts.min() >= 2 and len(counts) <= n_out else None
    rows_in, rows_out = train_test_split(np.arange(len(labels)), test_size=n_out, random_state=seed, stratify=stratify)
    refs, queries = embeddings[rows_in], embeddings[rows_out]
    head = None
    if classifier.get("kind") == "linear" and len(np.unique(labels[rows_in])) >= 2:
        head = fit_head(refs, labels[rows_in], classifier["C"])
    sims, idx = search_torch(refs, queries, min(k, len(refs)))
    _, _, strength = decide(queries, sims, labels[rows_in][idx].astype(object), head, classifier, weights)
    return threshold_at(strength, rate)
