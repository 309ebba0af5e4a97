"""How a bundle answers: its classifier's label and score from the nearest references and the linear head,
the evidence behind the answer, and "unknown" below the bundle's threshold (:mod:`cea.knn.unknown`).

The bundle's answer and the calibration of its threshold go through :func:`decide` (or :func:`decide_sets`,
for a bundle whose examples carry several labels each), so the threshold is set on exactly the scores it is
later compared with; :func:`predictions` turns the answers and the neighbours into the records `predict` returns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..knn import fit_head, vote
from ..knn.head import fit_label_head
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
    labels: list[dict] | None = None  # a multi-label bundle's answer: [{"label", "score"}], best first ([]: unknown)

    def as_dict(self) -> dict:
        out = {"label": self.label, "score": self.score, "evidence": self.evidence}
        if self.labels is not None:
            out["labels"] = self.labels
        if self.closest:
            out["closest"] = self.closest
        return {**out, "neighbours": self.neighbours}


def decide(vectors: np.ndarray, sims: np.ndarray, neighbour_labels: np.ndarray, head, classifier: dict,
           weights: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(labels, scores, evidence)`` of unit-length query ``vectors`` from their nearest references (cosines
    ``sims``, labels ``neighbour_labels``, None where a query has fewer), nearest first.

    With a ``head`` (a linear bundle while two labels are live) the answer is the most probable class of the head,
    mixed with the kNN vote's shares by ``classifier["knn_share"]``, and its probability the score; without, the
    majority of the neighbours (``weights``: uniform, or distance votes ``1 / (1 - cos)``; a tie goes to the label
    of the nearest neighbour among the tied, as ``KNNClassifier``'s default) and its share of the votes.

    A head fitted before a label was added does not know it: a query whose nearest neighbour carries such a label
    is answered by the distance-weighted vote of its neighbours (a copy of an added example's text: its label), the
    others by the head."""
    present = np.not_equal(neighbour_labels, None)
    classes, codes = np.unique(neighbour_labels[present].astype(str), return_inverse=True)
    labels = np.full(sims.shape, -1)
    labels[present] = codes
    decided, votes = vote(labels, len(classes), 1.0 - sims, weights)
    chosen, scores = classes[decided].astype(object), votes.max(1) / votes.sum(1)
    if head is not None:
        known = np.isin(classes, head.classes)  # the vote's classes are live labels; those since the head are not
        proba = head.mixed_proba(vectors, votes[:, known], classes[known], classifier.get("knn_share", 0.0))
        chosen, scores = head.classes[proba.argmax(1)].astype(object), proba.max(1)
        new = np.flatnonzero(~known[np.maximum(labels[:, 0], 0)] & (labels[:, 0] >= 0))
        if len(new):
            decided, votes = vote(labels[new], len(classes), 1.0 - sims[new], "distance")
            chosen[new], scores[new] = classes[decided], votes.max(1) / votes.sum(1)
    return chosen, scores, evidence(scores, sims[:, 0])


def decide_sets(vectors: np.ndarray, sims: np.ndarray, neighbour_sets: np.ndarray, head, label_threshold: float):
    """A multi-label bundle's answer: ``(answers, scores, evidence)``, each answer ``[(label, score)]``, best first:
    the labels whose score reaches ``label_threshold``, the best one where none does (:mod:`cea.evaluation.multilabel`'s
    rule, the rule its threshold was chosen by); a label's score is the probability of the ``head`` (a logistic
    regression per label) or, without one, its share of the neighbours (label sets, None where a query has fewer);
    the answer's score is its best label's."""
    from ..evaluation.multilabel import decide as decide_labels
    from ..evaluation.multilabel import label_shares

    classes, shares = (head.classes, head.predict_proba(vectors)) if head is not None else label_shares(neighbour_sets)
    column = {c: i for i, c in enumerate(classes)}
    answers = [sorted(((label, float(shares[i, column[label]])) for label in chosen), key=lambda kv: (-kv[1], kv[0]))
               for i, chosen in enumerate(decide_labels(shares, classes, label_threshold))]
    scores = shares.max(1)
    return answers, scores, evidence(scores, sims[:, 0])


def answer(labels, scores, strength, threshold: float | None) -> list[tuple[str, str | None]]:
    """``(label, closest)`` per query: the label, or unknown and the label it would have been."""
    return [(UNKNOWN, str(label)) if threshold is not None and s < threshold else (str(label), None)
            for label, s in zip(labels, strength)]


def predictions(chosen, scores, strength, threshold: float | None, sims: np.ndarray, rows: np.ndarray, ids, texts,
                labels, label_sets: list | None = None) -> list[Prediction]:
    """One :class:`Prediction` per text: the chosen label (``unknown`` below ``threshold``), its score and evidence,
    and the neighbours found (``rows`` into the references' ``ids``, ``texts`` and ``labels``; -1: none).
    ``label_sets``: a multi-label bundle's ranked (label, share) pairs per text, as :func:`decide_sets` returns."""
    out = []
    for i, (label, closest) in enumerate(answer(chosen, scores, strength, threshold)):
        keep = [(s_, r) for s_, r in zip(sims[i].tolist(), rows[i].tolist()) if r >= 0]
        ranked = None
        if label_sets is not None:
            ranked = [] if closest else [{"label": name, "score": round(float(share), 6)}
                                         for name, share in label_sets[i]]
        out.append(Prediction(label, round(float(scores[i]), 6),
                              [{"id": int(ids[r]), "text": texts[r], "cosine": round(s_, 6),
                                "label": list(labels[r]) if label_sets is not None else labels[r]} for s_, r in keep],
                              round(float(strength[i]), 6), closest, ranked))
    return out


def _objects(values) -> np.ndarray:
    """A 1-d object array of ``values`` (tuples stay elements; ``np.array`` would stack tuples of one length)."""
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def _held_out(labels: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows kept and rows held out: a fifth of the references, at most 5,000, stratified by label where every
    label has two (single-label references)."""
    from sklearn.model_selection import train_test_split

    n_out = int(min(max(1, round(HOLDOUT * len(labels))), MAX_HOLDOUT))
    stratify = None
    if labels.dtype != object:
        _, counts = np.unique(labels, return_counts=True)
        stratify = labels if counts.min() >= 2 and len(counts) <= n_out else None
    return train_test_split(np.arange(len(labels)), test_size=n_out, random_state=seed, stratify=stratify)


def calibrate(embeddings: np.ndarray, labels: list, rate: float, classifier: dict, k: int, weights: str,
              seed: int = 0) -> float:
    """The threshold that turns away a share ``rate`` of texts of the bundle's classes: a fifth of the references
    is held out (:func:`_held_out`), the classifier fitted on the rest as the bundle fits it, and the threshold is
    the ``rate``-quantile of the held-out texts' evidence. With more references at prediction time known texts find
    closer neighbours, so fewer than ``rate`` are turned away. ``labels``: names, or label sets (tuples)."""
    multi = any(isinstance(label, tuple) for label in labels)
    labels = _objects(labels) if multi else np.asarray(labels, dtype=str)
    rows_in, rows_out = _held_out(labels, seed)
    refs, queries = embeddings[rows_in], embeddings[rows_out]
    sims, idx = search_torch(refs, queries, min(k, len(refs)))
    if multi:
        head = fit_label_head(refs, labels[rows_in], classifier["C"]) if classifier.get("kind") == "linear" else None
        _, _, strength = decide_sets(queries, sims, labels[rows_in][idx], head, classifier["label_threshold"])
        return threshold_at(strength, rate)
    head = None
    if classifier.get("kind") == "linear" and len(np.unique(labels[rows_in])) >= 2:
        head = fit_head(refs, labels[rows_in], classifier["C"])
    _, _, strength = decide(queries, sims, labels[rows_in][idx].astype(object), head, classifier, weights)
    return threshold_at(strength, rate)


def held_out_accuracy(embeddings: np.ndarray, labels: list[str], classifier: dict, k: int, weights: str,
                      seed: int = 0) -> tuple[float, int]:
    """Accuracy (percent) of single-label references' held-out fifth (:func:`_held_out`), classified as the bundle
    classifies from the rest, and how many were held out: how :func:`cea.serving.create.choose_backend` compares two
    encodings of the same references."""
    labels = np.asarray(labels, dtype=str)
    rows_in, rows_out = _held_out(labels, seed)
    sims, idx = search_torch(embeddings[rows_in], embeddings[rows_out], min(k, len(rows_in)))
    head = None
    if classifier.get("kind") == "linear" and len(np.unique(labels[rows_in])) >= 2:
        head = fit_head(embeddings[rows_in], labels[rows_in], classifier["C"])
    chosen, _, _ = decide(embeddings[rows_out], sims, labels[rows_in][idx].astype(object), head, classifier, weights)
    return 100.0 * float(np.mean(chosen.astype(str) == labels[rows_out])), len(rows_out)


def label_threshold(embeddings: np.ndarray, label_sets: list[tuple], k: int, classifier: dict, seed: int = 0) -> float:
    """A multi-label bundle's threshold on its head's probabilities (``classifier`` linear) or on the neighbours'
    shares (knn): the one with the best micro-F1 of held-out references (:func:`cea.evaluation.multilabel.
    multilabel_evaluate`, the held-out fifth as its dev split)."""
    from ..evaluation.multilabel import multilabel_evaluate

    sets = _objects(label_sets)
    rows_in, rows_out = _held_out(sets, seed)
    linear = classifier.get("kind") == "linear"
    result = multilabel_evaluate(embeddings[rows_in], list(sets[rows_in]),
                                 {"dev": (embeddings[rows_out], list(sets[rows_out]))}, k=k, linear=linear,
                                 C=classifier.get("C"))
    return (result.linear if linear else result).threshold
