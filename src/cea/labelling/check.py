"""Which labels are probably wrong (:func:`check_labels`), and a cleaned copy of the data (:func:`fixed`).

What it finds
    Texts whose label the classifier a bundle ships (:class:`cea.knn.decision.Classifier`, its logistic regression,
    regularised more: ``C`` :data:`CHECK_C`, as the bundle's confident probabilities hide a flipped label among its
    likes) does not believe when it has not seen them: each fold of the data is asked by the classifier fitted on the
    others (out-of-fold probabilities), its probabilities mixed with the vote of each text's nearest other texts by
    ``knn_share`` as the bundle mixes them (:meth:`cea.knn.decision.Classifier.probabilities`); cleanlab's
    ``find_label_issues`` (confident learning, pruned by the noise rate) flags the texts on those probabilities.
    Besides: texts that are the same (once lower-cased and spaces squeezed) or nearly the same (cosine at least
    ``near``) but labelled differently, and the pairs of classes confused most.

What it returns
    A :class:`LabelCheck`: ``issues`` (a frame: row, text, label, suggested, score, neighbours, reason; the
    likeliest first), ``conflicts`` (duplicate pairs with different labels) and ``confused`` (gold, predicted, count).

Why written here
    cleanlab ranks and filters probabilities, but takes them from the caller: the folds, the classifier, the mix with
    the neighbours' vote and the duplicate pairs whose labels disagree (cleanlab's Datalab reports near duplicates,
    not their labels) are the bundle's own and are written here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.model_selection import StratifiedKFold

from ..errors import CeaError, OptionError
from ..knn.classifier import vote
from ..knn.decision import Classifier, nearest

FIXES = ("drop", "relabel")
K = 10  # the neighbours whose labels vote
KNN_SHARE = 0.25  # their vote's share in the probabilities: docs/records/label_issues.jsonl
CHECK_C = 3.0  # the checking classifier's C (the bundle's: 10): docs/records/label_issues.jsonl
NEAR = 0.98  # a cosine at least this: a near duplicate


@dataclass
class LabelCheck:
    issues: pd.DataFrame
    conflicts: pd.DataFrame
    confused: list[tuple[str, str, int]]


def out_of_fold(
    embeddings: np.ndarray,
    labels: np.ndarray,
    folds: int = 5,
    seed: int = 0,
    classifier: Classifier | None = None,
    found=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(head, mixed, classes)``: each text's class probabilities by ``classifier``'s head (the bundle's default)
    fitted on the other ``folds`` - 1 folds (stratified, drawn with ``seed``), and the same mixed with the vote of
    each text's neighbours ``found`` (cosines, rows: :func:`cea.knn.decision.nearest`) as the classifier mixes them
    (None: not mixed); a class missing from a fold's training part gets probability 0 there."""
    classes, counts = np.unique(labels, return_counts=True)
    classifier = classifier or Classifier()
    probs, mixed = np.zeros((len(labels), len(classes))), np.zeros((len(labels), len(classes)))
    splits = StratifiedKFold(folds, shuffle=True, random_state=seed)
    for train, held in splits.split(embeddings, labels if counts.min() >= folds else np.zeros(len(labels))):
        head = classifier.fit(embeddings[train], labels[train])
        columns = np.ix_(held, np.searchsorted(classes, head.classes))
        probs[columns] = head.predict_proba(embeddings[held])
        if found is not None:
            sims, rows = found
            mixed[columns] = classifier.probabilities(
                head, embeddings[held], sims[held], labels[rows[held]].astype(object)
            )
    return probs, (probs if found is None else mixed), classes


def neighbour_votes(
    embeddings: np.ndarray, codes: np.ndarray, n_classes: int, k: int = K, rows: np.ndarray | None = None
) -> np.ndarray:
    """Each text's share of its ``k`` nearest other texts (``rows``; None: found here) in each class (rows sum to 1)."""
    rows = nearest(embeddings, None, k)[1] if rows is None else rows
    return vote(codes[rows], n_classes)[1] / rows.shape[1]


def check_labels(
    texts,
    labels,
    embeddings: np.ndarray,
    folds: int = 5,
    knn_share: float = KNN_SHARE,
    k: int = K,
    near: float = NEAR,
    seed: int = 0,
    C: float = CHECK_C,
) -> LabelCheck:
    """The :class:`LabelCheck` of ``texts`` with ``labels`` and their ``embeddings`` (see the module)."""
    from cleanlab.filter import find_label_issues

    labels = np.asarray(labels, dtype=str)
    if len(labels) != len(embeddings) or len(labels) != len(texts):
        raise CeaError(f"{len(texts)} texts, {len(labels)} labels and {len(embeddings)} embeddings; give one of each")
    if len(set(labels)) < 2:
        raise CeaError("the data have a single label; checking labels needs at least two")
    if folds < 2:
        raise OptionError("folds", f"must be at least 2, got {folds}")
    if not 0 <= knn_share <= 1:
        raise OptionError("knn_share", f"must be between 0 and 1, got {knn_share}")
    found = nearest(embeddings, None, k)
    probs, mixed, classes = out_of_fold(
        embeddings, labels, folds, seed, Classifier(C=C, k=k, knn_share=knn_share), found
    )
    given = np.searchsorted(classes, labels)
    votes = neighbour_votes(embeddings, given, len(classes), k, found[1])
    best = mixed.argmax(1)
    # n_jobs=1: with more, cleanlab forks a pool, and a child forked from a process whose threads hold locks (fit's
    # torch, Ray's client, the service's batcher) can wait on one of them for ever
    rows = np.flatnonzero(find_label_issues(given, mixed, filter_by="prune_by_noise_rate", n_jobs=1))
    issues = pd.DataFrame(
        {
            "row": rows,
            "text": np.asarray(texts, dtype=object)[rows],
            "label": labels[rows],
            "suggested": classes[best[rows]],
            "score": np.round(1 - mixed[rows, given[rows]], 4),
            "neighbours": np.round(1 - votes[rows, given[rows]], 2),
            "reason": [
                f"the classifier gives '{labels[i]}' {mixed[i, given[i]]:.2f}, '{classes[best[i]]}' "
                f"{mixed[i, best[i]]:.2f}; {1 - votes[i, given[i]]:.0%} of the {k} nearest are labelled otherwise"
                for i in rows
            ],
        }
    ).sort_values("score", ascending=False, kind="stable")
    confusion = pd.crosstab(labels, classes[probs.argmax(1)])
    pairs = [(g, p, int(n)) for (g, p), n in confusion.stack().items() if g != p and n > 0]
    return LabelCheck(
        issues.reset_index(drop=True),
        conflicting_duplicates(texts, labels, embeddings, near),
        sorted(pairs, key=lambda x: -x[2])[:10],
    )


def conflicting_duplicates(texts, labels: np.ndarray, embeddings: np.ndarray, near: float = NEAR) -> pd.DataFrame:
    """Pairs of texts labelled differently that read the same once lower-cased with spaces squeezed, or whose
    embeddings' cosine is at least ``near`` (among each text's 5 nearest)."""
    keys = [re.sub(r"\s+", " ", str(t)).strip().lower() for t in texts]
    sims, rows = nearest(embeddings, None, 5)
    pairs = {}
    for a in range(len(texts)):
        for sim, b in zip(sims[a], rows[a]):
            if a < b and labels[a] != labels[b] and (sim >= near or keys[a] == keys[b]):
                pairs[(a, int(b))] = float(sim)
    first = {}
    for a, key in enumerate(keys):  # exact duplicates beyond the 5 nearest
        b = first.setdefault(key, a)
        if b != a and labels[a] != labels[b]:
            pairs.setdefault((b, a), 1.0)
    found = [(a, b, texts[a], texts[b], labels[a], labels[b], round(s, 4)) for (a, b), s in sorted(pairs.items())]
    return pd.DataFrame(found, columns=["row_a", "row_b", "text_a", "text_b", "label_a", "label_b", "cosine"])


def fixed(frame: pd.DataFrame, check: LabelCheck, fix: str, label_column: str = "label") -> pd.DataFrame:
    """A copy of ``frame`` (the rows checked) with the flagged rows dropped (``fix="drop"``) or given their
    suggested label (``"relabel"``)."""
    if fix not in FIXES:
        raise OptionError("fix", f"must be drop or relabel, got {fix!r}")
    out = frame.reset_index(drop=True).copy()
    if fix == "drop":
        return out.drop(index=check.issues["row"]).reset_index(drop=True)
    out.loc[check.issues["row"].to_numpy(), label_column] = check.issues["suggested"].to_numpy()
    return out
