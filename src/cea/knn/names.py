"""Answers from the label names alone, before any annotation: the nearest name, with names and queries centred on the
mean of the texts asked about (:class:`Asked`) and normalised again.

Every text of a domain shares one direction that says nothing of its class, and it outweighs the names' few words:
taking the mean of unlabelled texts of the domain out of both sides lets the names' own words decide. Measured with
all-MiniLM-L6-v2 (``bench/zero_names.py``, docs/records/zero_names.jsonl): above the plain nearest name on five of
five labelled sets (banking77 62.76 against 62.37, clinc150 69.29 against 68.40), where a linear head on the names
is below it on four. Centring on the names' own mean loses: the texts asked about must set the centre.

What it expects
    Unit-length name embeddings and their labels; unit-length queries; a centre (:attr:`Asked.centre`).

Returns
    :func:`nearest_names`: per query its ``k`` nearest names in the centred space (cosines, rows), the label of the
    nearest and its probability (a softmax over each label's nearest name).

When to use it
    A bundle whose every example is a label name (:data:`cea.bundle.examples.NAMED`) answers this way
    (:meth:`cea.bundle.Bundle.predict_many`); ``bench/zero_names.py`` measures it the same way.

Why written here
    No peer library centres a zero-shot classifier on the traffic it serves; the rest is a matrix product.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .search import normalize

# texts asked about before their mean centres the names (fewer: the plain nearest name answers): the mean of 512 gains
# on five of five sets; that of 256 lost on yahoo (46.40 against 46.45), that of 16 on stackoverflow and yahoo
# (bench/zero_names.py --pools 16,256,512,2000)
MIN_ASKED = 512
# the scale of the cosines in the softmax that gives an answer's probability: sentence-transformers'
# MultipleNegativesRankingLoss's, with which all-MiniLM-L6-v2 and its kin were trained
SCALE = 20.0


class Asked:
    """The running mean of every query vector asked about (kept by the caller under its own lock). Each process
    serving a bundle keeps its own: the centres of two replicas differ by the texts each was asked about."""

    def __init__(self):
        self.total, self.count = None, 0

    def add(self, vectors: np.ndarray) -> None:
        """Count ``vectors`` (one per text asked about) in the mean."""
        if not len(vectors):
            return
        summed = np.asarray(vectors, np.float64).sum(0)
        self.total = summed if self.total is None else self.total + summed
        self.count += len(vectors)

    @property
    def centre(self) -> np.ndarray | None:
        """The mean of the vectors asked about, or None while fewer than :data:`MIN_ASKED` have been."""
        if self.count < MIN_ASKED:
            return None
        return (self.total / self.count).astype(np.float32)


class Nearest(NamedTuple):
    """:func:`nearest_names`'s answer, one row per query."""

    chosen: np.ndarray  # the label of the nearest name
    scores: np.ndarray  # its probability
    cosines: np.ndarray  # the k nearest names' centred cosines, nearest first
    rows: np.ndarray  # and their rows


def nearest_names(names: np.ndarray, labels, queries: np.ndarray, centre: np.ndarray | None, k: int = 1) -> Nearest:
    """``(chosen, scores, cosines, rows)`` (:class:`Nearest`): per query the label of the nearest name after both are
    centred on ``centre`` (None: not centred), its probability (a softmax of :data:`SCALE` times the cosines, over
    each label's nearest name), and the ``k`` nearest names' centred cosines and rows, nearest first. ``names`` and
    ``queries``: unit length; ``labels``: one per name."""
    labels = np.asarray(labels, dtype=str)
    if centre is not None:
        names, queries = normalize(names - centre), normalize(queries - centre)
    cosines = queries @ names.T
    k = min(k, len(names))
    rows = np.argsort(-cosines, axis=1, kind="stable")[:, :k]
    classes, codes = np.unique(labels, return_inverse=True)
    best = np.full((len(queries), len(classes)), -np.inf)
    for code in range(len(classes)):  # each label's nearest name
        best[:, code] = cosines[:, codes == code].max(1)
    logits = SCALE * (best - best.max(1, keepdims=True))
    proba = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    chosen = labels[rows[:, 0]]
    return Nearest(chosen.astype(object), proba.max(1), np.take_along_axis(cosines, rows, 1), rows)
