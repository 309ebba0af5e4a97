"""Judge embeddings of labelled texts as a bundle classifies them (:class:`cea.knn.decision.Classifier`): every judge
(training's dev and final figures, ``cea compare``, ``sweep-layers``, ``probe``, ``analyze``, ``report``) goes through
:func:`knn_evaluate` (embeddings in) or :func:`evaluate_encoder` (texts in, through the embedding store: a training
run keeps its final embeddings there, so the report and ``analyze`` need not encode again).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sklearn.metrics import f1_score

from ..encoders.store import EmbeddingStore
from ..errors import CeaError
from ..knn.decision import Classifier, nearest
from ..knn.unknown import UNKNOWN, count_curve, threshold_at
from .retrieval import retrieval_scores

RARE = 5  # a label with fewer training examples is rare: its F1 is judged apart (scores' rare_f1)


@dataclass
class KNNEvaluation:
    """Scores (fractions) and what produced them: one row per query, neighbours nearest first."""

    accuracy: float
    macro_f1: float
    top_k_accuracy: float
    gold: np.ndarray
    predicted: np.ndarray
    neighbours: np.ndarray  # reference rows (or ids, see knn_evaluate), shape (queries, k)
    cosines: np.ndarray
    k: int
    retrieval: dict = field(default_factory=dict)  # top{k}_accuracy and mrr, already x 100
    linear: dict = field(default_factory=dict)  # linear_accuracy and linear_macro_f1 of a linear head, already x 100
    open: dict = field(default_factory=dict)  # open-set scores of the head with "unknown" (open_set_scores), x 100
    embeddings: np.ndarray | None = None  # the queries' embeddings, kept for maps

    def metrics(self, prefix: str = "knn_") -> dict[str, float]:
        """Accuracy, macro-F1 and top-k accuracy x 100 (2 decimals), then the linear head's and retrieval scores."""
        out = {
            f"{prefix}{name}": round(100 * getattr(self, name), 2)
            for name in ("accuracy", "macro_f1", "top_k_accuracy")
        }
        return {**out, **self.linear, **self.open, **self.retrieval}


def knn_evaluate(
    references,
    reference_labels,
    queries=None,
    query_labels=None,
    k: int = 5,
    reference_ids=None,
    retrieval: bool = False,
    keep_embeddings: bool = False,
    weights: str = "uniform",
    found=None,
) -> KNNEvaluation:
    """Classify ``queries`` by the vote of their ``k`` nearest ``references`` as a bundle's ``knn`` classifier does,
    votes by ``weights``; ``queries=None``: leave-one-out. ``reference_ids`` name the neighbours (default: row numbers);
    ``retrieval`` adds top-1/2/3 accuracy and MRR; ``found``: a prior search (:func:`cea.knn.decision.nearest`)."""
    labels = np.asarray(reference_labels)
    limit = len(labels) - int(queries is None)
    if k > limit:
        raise CeaError(f"k = {k} is larger than the {limit} references available; choose k <= {limit}")
    sims, idx = nearest(references, queries, k) if found is None else found
    sims, idx = sims[:, :k], idx[:, :k]
    spec = Classifier("knn", k=k, weights=weights)
    decision = spec.answer(references, labels, references if queries is None else queries, found=(sims, idx))
    gold = labels if queries is None else np.asarray(query_labels)
    if len(gold) != len(idx):
        raise CeaError(f"{len(idx)} queries but {len(gold)} labels")
    original = dict(zip(labels.astype(str), labels))  # the references' own labels (names, or numbers)
    predicted = np.array([original[x] for x in decision.labels])
    result = KNNEvaluation(
        float(np.mean(predicted == gold)),
        float(f1_score(gold, predicted, average="macro", zero_division=0)),
        float(np.mean((labels[idx] == gold[:, None]).any(1))),
        gold=gold,
        predicted=predicted,
        neighbours=idx if reference_ids is None else np.asarray(reference_ids)[idx],
        cosines=sims,
        k=k,
        embeddings=queries if keep_embeddings else None,
    )
    if retrieval:
        result.retrieval = retrieval_scores(references, reference_labels, queries, gold)
    return result


def scores(predicted, query_labels, rare=None) -> dict:
    """Accuracy and macro-F1 (x 100, 2 decimals) of ``predicted`` labels; given ``rare`` labels (those of fewer than
    :data:`RARE` training examples, :func:`rare_labels`), ``rare_f1``: the macro-F1 of those among the gold and
    predicted labels (None where there are none)."""
    gold, predicted = np.asarray(query_labels, dtype=str), np.asarray(predicted, dtype=str)
    out = {
        "accuracy": round(100 * float(np.mean(predicted == gold)), 2),
        "macro_f1": round(100 * float(f1_score(gold, predicted, average="macro", zero_division=0)), 2),
    }
    if rare is not None:
        seen = sorted(set(map(str, rare)) & (set(gold) | set(predicted)))
        out["rare_f1"] = (
            round(100 * float(f1_score(gold, predicted, labels=seen, average="macro", zero_division=0)), 2)
            if seen
            else None
        )
    return out


def rare_labels(train_labels) -> list[str]:
    """The labels of fewer than :data:`RARE` examples in ``train_labels``, sorted."""
    names, counts = np.unique(np.asarray(train_labels, dtype=str), return_counts=True)
    return names[counts < RARE].tolist()


def open_set_scores(predicted, gold) -> dict:
    """Scores (x 100) of an open-set classifier whose answers and gold labels may be ``unknown``, as the open-intent
    literature (ADB, Zhang et al. 2021) reports them: ``open_accuracy``, ``open_macro_f1`` (unknown as one more
    class), ``known_accuracy`` (an abstention counts as wrong), ``unknown_recall`` and ``unknown_precision``."""
    predicted, gold = np.asarray(predicted, dtype=str), np.asarray(gold, dtype=str)
    known, flagged = gold != UNKNOWN, predicted == UNKNOWN
    labels = sorted(set(gold) | {UNKNOWN})  # classes that never occur in gold are not averaged

    def share(hits, of):
        return round(100 * float(hits.sum() / of.sum()), 2) if of.any() else 0.0

    return {
        "open_accuracy": round(100 * float(np.mean(predicted == gold)), 2),
        "open_macro_f1": round(
            100 * float(f1_score(gold, predicted, labels=labels, average="macro", zero_division=0)), 2
        ),
        "known_accuracy": share((predicted == gold) & known, known),
        "unknown_recall": share(flagged & ~known, ~known),
        "unknown_precision": share(flagged & ~known, flagged),
    }


def evaluate_encoder(
    model,
    reference_texts,
    reference_labels,
    queries: dict,
    k: int = 5,
    retrieval=("test",),
    reference_ids=None,
    keep_embeddings=("test",),
    batch_size: int | None = None,
    linear: bool = False,
    unknown_rate: float | None = None,
    store: EmbeddingStore | None = None,
) -> dict[str, KNNEvaluation]:
    """Encode the references once and judge every query split: ``queries`` maps a split name to
    ``(texts, labels)``; the splits named in ``retrieval`` also get top-k retrieval scores; ``linear``: each split
    also gets the scores of the bundle's linear head fitted on the references.

    ``unknown_rate`` (with ``linear``; the first split holds known classes only, e.g. dev): the head may answer
    ``unknown`` as a bundle does (:mod:`cea.knn.unknown`), its threshold turning away that share of the first split's
    texts, and every other split gets :func:`open_set_scores` and the threshold. ``store``: what was encoded before
    (:class:`cea.encoders.store.EmbeddingStore`: a training run's, or the user's on disk), read where ``model``'s
    weights encoded the same texts and filled with the rest."""
    store = EmbeddingStore() if store is None else store
    state = store.state(model)
    refs = store.encode(model, reference_texts, batch_size, state)
    reference_labels = np.asarray(reference_labels)
    names = reference_labels.astype(str)
    spec = head = None
    if linear and len(np.unique(names)) > 1:  # the bundle's head; small classes' evidence scaled as a bundle's
        spec = Classifier("linear", k=k, count_curve=count_curve(refs, names) if unknown_rate is not None else ())
        head = spec.fit(refs, names)
    out = {}
    for split, (texts, labels) in queries.items():
        embeddings = store.encode(model, texts, batch_size, state)
        found = nearest(refs, embeddings, k)
        out[split] = knn_evaluate(
            refs,
            reference_labels,
            embeddings,
            np.asarray(labels),
            k,
            reference_ids,
            split in retrieval,
            split in keep_embeddings,
            found=found,
        )
        if spec is None:
            continue
        decision = spec.answer(refs, names, embeddings, head, found)
        out[split].linear = {f"linear_{name}": value for name, value in scores(decision.labels, labels).items()}
        if unknown_rate is None:
            continue
        first = spec.unknown_threshold is None  # the first split: the calibration
        if first:
            spec = spec.replace(unknown_threshold=threshold_at(decision.evidence, unknown_rate))
        out[split].open = {
            **({} if first else open_set_scores(spec.answers(decision), labels)),
            "unknown_threshold": round(spec.unknown_threshold, 6),
        }
    return out
