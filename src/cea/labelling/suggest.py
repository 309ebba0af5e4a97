"""Which unlabelled texts to label next (:func:`suggest`): those the bundle is least sure of, spread over the space.

What it ranks
    Each text by what the bundle's classifier knows of it: one minus the margin between its two most probable
    classes (the head's probabilities, or the vote's shares where the bundle votes), plus :data:`DISAGREE` where the
    head and the vote of its nearest examples name different classes (0: measured, it ranked worse; the reason still
    says so), plus :data:`UNKNOWN_BONUS` where the bundle answers ``unknown``; the sum times the text's density to
    the power :data:`DENSITY`: its mean cosine to its :data:`DENSE_K` nearest other candidates (information density:
    a text alone at the edge of the space, an outlier or a mislabel-to-be, teaches less than one amid many like it
    that its label also settles). That is the cold start's ranking: past :data:`COLD` examples a class (on average)
    the margin alone ranks (density and centres, below, rank worse there: they keep finding easy texts).

How a batch is spread
    The ``n`` best-ranked are not taken as they come: the :data:`POOL` x ``n`` best are grouped by k-means into ``n``
    groups in the embedding space and each group gives the text nearest its centre (the one that stands for the
    group; past the cold start, or once the bundle is sure of the candidates, their mean margin at least
    :data:`SURE`: its best-ranked), so that no two suggestions come from one tight group (near duplicates would each
    teach the classifier the same thing).

What it returns
    A frame, the most useful first: row, text, prediction, runner_up, score, reason, group (the k-means group each
    stands for, numbered in that order). :func:`from_traffic` ranks the texts a service kept (``cea serve
    --keep-traffic N``) by their stored embeddings, ``id`` first: the id that ``POST /examples`` takes to label one.

Why written here
    small-text's query strategies (breaking ties, entropy, embedding k-means) take a classifier of their own; this
    ranks with the bundle's own decision, its neighbours and its unknown threshold, which they do not know of.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
from sklearn.cluster import KMeans

from ..data.labels import UNKNOWN
from ..errors import CeaError, OptionError
from ..knn.decision import nearest

DISAGREE = 0.0  # added where the head and the nearest examples' vote disagree: docs/records/active_learning.jsonl
UNKNOWN_BONUS = 0.5  # added where the bundle answers unknown
DENSITY = 0.5  # the power of the density that weighs the score: docs/records/active_learning.jsonl
DENSE_K = 10  # the candidates whose mean cosine is a text's density
COLD = 16  # up to this many examples a class (on average): the cold start (measured: active_learning.jsonl)
SURE = 0.6  # candidates' mean margin from which each group gives its least sure text (active_learning.jsonl)
POOL = 10  # k-means spreads the best POOL x n over n groups (measured: docs/records/active_learning.jsonl)
MOST_UNSURE = 1 + DISAGREE + UNKNOWN_BONUS  # the highest rank before density (unsure())


def suggest(bundle, texts: list[str], n: int, seed: int = 0, vectors: np.ndarray | None = None) -> pd.DataFrame:
    """The ``n`` texts of ``texts`` whose labels would help ``bundle`` most (see the module); ``vectors``: their
    embeddings where already encoded."""
    if n < 1:
        raise OptionError("n", f"must be at least 1, got {n}")
    if not texts:
        raise CeaError("no texts to choose from; pass a file of unlabelled texts")
    if bundle.multi_label:
        raise CeaError("suggestions need a bundle of one label a text; label sets are not ranked yet")
    vectors = bundle.embed(list(texts)) if vectors is None else vectors
    answers = bundle.predict_encoded(list(texts), vectors)
    top, margin, disagree, unknown = doubt(bundle.head(), vectors, answers)
    counts = bundle.label_counts
    cold = sum(counts.values()) <= COLD * len(counts)
    score, density = weighted(unsure(margin, disagree, unknown), vectors, POOL * n, DENSITY if cold else 0.0)
    chosen = spread(vectors, score, n, seed, centre=cold and margin.mean() < SURE)
    reasons = [
        ", ".join(
            [f"margin {margin[i]:.2f} between {top[i, 0]!s} and {top[i, 1]!s}"]
            + (["the nearest examples vote otherwise"] if disagree[i] else [])
            + (["answered unknown"] if unknown[i] else [])
            + [f"density {density[i]:.2f}"]
        )
        for i in chosen
    ]
    return pd.DataFrame(
        {
            "row": chosen,
            "text": [texts[i] for i in chosen],
            "prediction": [answers[i].label for i in chosen],
            "runner_up": top[chosen, 1],
            "score": np.round(score[chosen], 4),
            "reason": reasons,
            "group": np.arange(1, len(chosen) + 1),
        }
    )


def doubt(head, vectors: np.ndarray, answers: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What the classifier knows of each text: ``(top, margin, disagree, unknown)``, its two most probable classes
    (head: the bundle's linear head, or None where it votes), the margin between their probabilities (or vote
    shares), whether the head and the nearest examples' vote name different classes, and whether the bundle
    answered ``unknown`` (``answers``: the bundle's predictions of the texts whose embeddings are ``vectors``)."""
    votes = [Counter(nb["label"] for nb in a.neighbours).most_common(2) + [("", 0)] for a in answers]  # top two
    if head is not None:
        proba = head.predict_proba(vectors)
        order = np.argsort(-proba, axis=1)[:, :2]
        top = head.classes[order].astype(str)
        margin = proba[np.arange(len(proba)), order[:, 0]] - proba[np.arange(len(proba)), order[:, 1]]
    else:
        top = np.array([[v[0][0], v[1][0]] for v in votes], dtype=object)
        margin = np.array([(v[0][1] - v[1][1]) / max(len(a.neighbours), 1) for v, a in zip(votes, answers)])
    disagree = np.array([head is not None and v[0][0] != t for v, t in zip(votes, top[:, 0])])
    unknown = np.array([a.label == UNKNOWN for a in answers])
    return top, margin, disagree, unknown


def unsure(margin: np.ndarray, disagree: np.ndarray, unknown: np.ndarray) -> np.ndarray:
    """Each text's rank before density: one minus its margin, plus :data:`DISAGREE` and :data:`UNKNOWN_BONUS` where
    they hold (the higher, the sooner to label; at most :data:`MOST_UNSURE`)."""
    return (1 - margin) + DISAGREE * disagree + UNKNOWN_BONUS * unknown


def weighted(
    score: np.ndarray, vectors: np.ndarray, need: int, power: float = DENSITY
) -> tuple[np.ndarray, np.ndarray]:
    """``(score x density ** power, density)`` where they decide the ``need`` best; elsewhere -inf and NaN.

    A density is at most 1, so a weighted score is at most its unweighted one: the densities of the best by the
    unweighted score are enough once the ``need``-th best weighted score reaches the next unweighted one (4 x
    ``need`` first, doubled until then), exact at a fraction of the all-pairs search over a large pile."""
    if len(score) < 2:
        return score.astype(float), np.ones(len(score))
    order = np.argsort(-score, kind="stable")
    out, density = np.full(len(score), -np.inf), np.full(len(score), np.nan)
    m = min(len(score), 4 * need)
    while True:
        rows = order[:m]
        sims = nearest(vectors, vectors[rows], DENSE_K + 1)[0][:, 1:]  # the first: the text itself
        density[rows] = sims.mean(1).clip(1e-3)
        out[rows] = score[rows] * density[rows] ** power
        if m == len(score) or np.sort(out[rows])[-min(need, m)] >= score[order[m]]:
            return out, density
        m = min(len(score), 2 * m)


def spread(vectors: np.ndarray, score: np.ndarray, n: int, seed: int = 0, centre: bool = True) -> np.ndarray:
    """Rows of the ``n`` texts chosen: the one nearest the centre (``centre``; else the best-ranked) of each of ``n``
    k-means groups of the :data:`POOL` x ``n`` best, best first (all of them where there are no more than ``n``)."""
    ranked = np.argsort(-score, kind="stable")
    if len(ranked) <= n:
        return ranked
    pool = ranked[: POOL * n]
    means = KMeans(n, n_init=1, random_state=seed).fit(vectors[pool])
    away = ((vectors[pool] - means.cluster_centers_[means.labels_]) ** 2).sum(1)
    firsts = [
        pool[np.flatnonzero(means.labels_ == g)[away[means.labels_ == g].argmin() if centre else 0]]
        for g in np.unique(means.labels_)
    ]
    firsts += [i for i in ranked if i not in set(firsts)][: n - len(firsts)]  # duplicates made fewer groups
    return np.array(sorted(firsts, key=lambda i: -score[i]))


def from_traffic(bundle, n: int, seed: int = 0) -> pd.DataFrame:
    """:func:`suggest` over the texts ``bundle``'s service kept (their embeddings as stored), less those the bundle
    holds already (labelled since, by ``POST /examples`` or ``Bundle.add``); ``id``: the kept text's."""
    kept = bundle.store.kept("traffic")
    if not kept:
        raise CeaError(
            "the bundle keeps no traffic to suggest from; serve it with --keep-traffic N and let it "
            "answer some predictions, or pass --texts FILE"
        )
    known = set(bundle.texts)
    kept = [item for item in kept if item["text"] not in known]
    if not kept:
        raise CeaError("every kept text is labelled already; wait for more traffic or pass --texts FILE")
    out = suggest(bundle, [item["text"] for item in kept], n, seed, np.stack([item["embedding"] for item in kept]))
    return out.drop(columns="row").assign(id=[kept[r]["id"] for r in out["row"]])[["id", *out.columns[1:]]]
