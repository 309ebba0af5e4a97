""" "None of these": when a classifier on embeddings should answer ``unknown`` instead of its best class.

The evidence for a prediction is the classifier's probability of its class times the cosine of the nearest reference:
a text far from every reference, or between classes, gets little. Below a threshold the answer is ``unknown``; the
threshold is the ``rate``-quantile of the evidence of held-out texts of the known classes, so no example of an
unknown class is needed. The product and :data:`RATE` (:data:`cea.defaults.UNKNOWN_RATE`) were chosen on open-intent
splits (docs/decisions.md#unknown). scikit-learn and FAISS score but do not abstain, hence this module. A class with
fewer examples than the median class has its nearest example farther for that alone, so its evidence is divided by
:func:`count_curve`'s ratio for its count where a threshold is calibrated.
"""

from __future__ import annotations

import numpy as np

from ..data.labels import UNKNOWN
from ..defaults import UNKNOWN_RATE as RATE
from ..errors import CeaError

# the count curve: CURVE_CLASSES classes at or above the median count, CURVE_DRAWS subsets of each size, counts from
# CURVE_CAP up counted as the median class (their nearest cosine barely moves; it bounds the curve's cost)
CURVE_CLASSES, CURVE_DRAWS, CURVE_CAP = 10, 3, 500


def evidence(confidence, nearest_cosine, scale=None) -> np.ndarray:
    """The evidence for each prediction: its probability (or vote share) times the nearest reference's cosine
    (negative cosines count as 0), divided by ``scale`` where given (:func:`count_scale`)."""
    strength = np.asarray(confidence, np.float64) * np.clip(np.asarray(nearest_cosine, np.float64), 0.0, None)
    return strength if scale is None else strength / np.asarray(scale, np.float64)


def count_curve(embeddings, labels, seed: int = 0) -> tuple[tuple[int, float], ...]:
    """``((n, r), ...)``: for counts ``n`` (about sqrt(2) apart) below the median class's count ``m`` (at most
    :data:`CURVE_CAP`), the median over classes of at least ``m`` examples of their median cosine to the nearest
    other example among ``n`` drawn, over the same among ``m``, made non-decreasing; last ``(m, 1.0)``. Empty where
    no class has fewer than ``m`` examples. ``embeddings``: unit length, one label each."""
    from sklearn.isotonic import isotonic_regression

    labels = np.asarray(labels, dtype=str)
    names, counts = np.unique(labels, return_counts=True)
    m = int(min(np.median(counts), CURVE_CAP)) if len(names) > 1 else 0
    sizes = sorted({int(round(2 ** (i / 2))) for i in range(2, 18)} & set(range(2, m)))
    if not sizes or counts.min() >= m:
        return ()
    rng = np.random.default_rng(seed)
    big = names[counts >= m]
    ratios = {n: [] for n in sizes}
    for name in rng.choice(big, min(len(big), CURVE_CLASSES), replace=False):
        rows = embeddings[labels == name]
        full = np.mean([_nearest(rows, m, rng) for _ in range(CURVE_DRAWS)])
        for n in sizes:
            ratios[n].append(np.mean([_nearest(rows, n, rng) for _ in range(CURVE_DRAWS)]) / max(full, 1e-6))
    # more examples cannot put the nearest one farther: the medians made non-decreasing (least squares)
    smooth = np.clip(isotonic_regression([np.median(ratios[n]) for n in sizes]), 0.05, 1.0)
    return tuple((n, round(float(r), 4)) for n, r in zip(sizes, smooth)) + ((m, 1.0),)


def _nearest(rows: np.ndarray, n: int, rng) -> float:
    """The median cosine of ``n`` rows drawn from ``rows`` to their nearest other drawn row."""
    drawn = rows[rng.choice(len(rows), n, replace=False)] if n < len(rows) else rows
    sims = drawn @ drawn.T
    np.fill_diagonal(sims, -np.inf)
    return float(np.median(sims.max(1)))


def count_scale(curve, counts, answers) -> np.ndarray | None:
    """Each answer's ratio on the ``curve`` (:func:`count_curve`) at its class's count in ``counts`` (a mapping),
    interpolated in log count: 1 from the curve's last count on, or for a class without one; None for an empty curve."""
    if not curve:
        return None
    sizes, ratios = np.log([n for n, _ in curve]), np.array([r for _, r in curve])
    n = np.array([counts.get(answer, 0) for answer in answers], np.float64)
    return np.where(n > 0, np.interp(np.log(np.maximum(n, 1.0)), sizes, ratios), 1.0)


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
