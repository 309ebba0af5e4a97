"""The kNN vote, shared by :class:`cea.knn.KNNClassifier` and :meth:`cea.serving.Bundle.predict`."""

from __future__ import annotations

import numpy as np

from ..errors import CeaError


def check(weights: str, tie_break: str) -> None:
    if weights not in ("uniform", "distance"):
        raise CeaError(f"unknown weights {weights!r}; use 'uniform' or 'distance'")
    if tie_break not in ("nearest", "smallest"):
        raise CeaError(f"unknown tie_break {tie_break!r}; use 'nearest' or 'smallest'")


def vote(labels: np.ndarray, n_classes: int, dist: np.ndarray | None = None, weights: str = "uniform",
         tie_break: str = "nearest") -> tuple[np.ndarray, np.ndarray]:
    """The winning class of each row of neighbours, and the votes of every class.

    ``labels``: (queries, k) class numbers of the neighbours, nearest first, -1 where there is none.
    ``weights``: one vote each, or ``1 / dist`` (``dist`` = cosine distance; a neighbour at distance
    0 takes the whole vote). ``tie_break``: among labels with equal votes, the one of the nearest
    neighbour, or the smallest class number (scikit-learn's rule).
    """
    check(weights, tie_break)
    present = labels >= 0
    if weights == "uniform":
        w = present.astype(np.float64)
    else:
        with np.errstate(divide="ignore"):
            w = 1.0 / np.maximum(dist.astype(np.float64), 0.0)
        inf = np.isinf(w)
        rows = inf.any(1)
        w[rows] = inf[rows]
        w[~present] = 0.0
    labels = np.where(present, labels, 0)
    query = np.arange(len(labels))[:, None]
    scores = np.zeros((len(labels), n_classes))
    np.add.at(scores, (query, labels), w)
    if tie_break == "smallest":
        return scores.argmax(1), scores
    tied = np.isclose(scores, scores.max(1, keepdims=True), rtol=0, atol=1e-9)[query, labels] & present
    return labels[query[:, 0], tied.argmax(1)], scores
