"""Judge embeddings of labelled texts by kNN: the one place that fits :class:`KNNClassifier` on
reference embeddings, classifies queries, and reports metrics with the predictions behind them.

Every judge of a classifier goes through :func:`knn_evaluate` (embeddings in) or
:func:`evaluate_encoder` (texts in, encoded with ``model.encode``): the trainer's dev evaluation, a
run's final dev and test figures, ``cea compare``'s frozen row, ``cea sweep-layers``' frozen curve,
``cea probe``, ``cea analyze`` and ``cea report``. A run writes its test predictions (gold and
predicted label, the neighbours' reference ids and cosines) and test embeddings beside
``results.json`` with :meth:`KNNEvaluation.save`, so the report and ``analyze`` read them instead of
encoding the test split again.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..encoders.embeddings import encode
from ..knn import KNNClassifier
from ..paths import read_json

PREDICTIONS = "predictions.json"
EMBEDDINGS = "test_embeddings.npy"
FORMAT = "cea.predictions/1"


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
        out = {f"{prefix}{name}": round(100 * getattr(self, name), 2)
               for name in ("accuracy", "macro_f1", "top_k_accuracy")}
        return {**out, **self.linear, **self.open, **self.retrieval}

    def save(self, folder: str | Path, split: str = "test") -> None:
        """``predictions.json`` and the query embeddings (``.npy``) in ``folder``, written atomically."""
        from ..paths import write_json, write_npy

        folder = Path(folder)
        write_json(folder / PREDICTIONS, {
            "format": FORMAT, "split": split, "k": self.k, "gold": [str(x) for x in self.gold],
            "predicted": [str(x) for x in self.predicted], "neighbours": self.neighbours.tolist(),
            "cosines": np.round(self.cosines, 6).tolist()})
        if self.embeddings is not None:
            write_npy(folder / EMBEDDINGS, np.asarray(self.embeddings, np.float32))


def knn_evaluate(references, reference_labels, queries=None, query_labels=None, k: int = 5,
                 reference_ids=None, retrieval: bool = False, keep_embeddings: bool = False,
                 weights: str = "uniform") -> KNNEvaluation:
    """Classify ``queries`` by their ``k`` nearest ``references`` (cosine), votes by ``weights`` (uniform or
    distance); ``queries=None``: leave-one-out over the references. ``reference_ids`` name the neighbours
    (default: row numbers); ``retrieval`` adds top-1/2/3 accuracy and MRR (:mod:`cea.evaluation.retrieval`)."""
    knn = KNNClassifier(k, weights=weights).fit(references, reference_labels)
    scores, predicted, dist, idx = knn.evaluate(queries, query_labels, return_neighbours=True)
    gold = np.asarray(reference_labels if queries is None else query_labels)
    ids = idx if reference_ids is None else np.asarray(reference_ids)[idx]
    result = KNNEvaluation(**scores, gold=gold, predicted=predicted, neighbours=ids, cosines=1.0 - dist, k=k,
                           embeddings=queries if keep_embeddings else None)
    if retrieval:
        from .retrieval import retrieval_scores

        result.retrieval = retrieval_scores(references, reference_labels, queries, gold)
    return result


def choose_vote(references, reference_labels, queries, query_labels, ks=(1, 3, 5, 7, 10, 15, 20),
                weights=("uniform", "distance")) -> tuple[dict, list[dict]]:
    """The number of voters ``k`` and the ``weights`` rule of :class:`KNNClassifier` with the best accuracy of
    ``queries`` (a dev split): ``(best, rows)``, each row ``{"k", "weights", "accuracy"}`` (x 100). One search
    for the largest k serves every vote; ties go to the smaller k, then to uniform votes."""
    from ..knn.classifier import vote

    ks = sorted({k for k in ks if k <= len(references)})
    knn = KNNClassifier(ks[-1]).fit(references, reference_labels)
    dist, idx = knn.kneighbors(queries)
    codes = np.unique(np.asarray(reference_labels), return_inverse=True)[1]  # the class number of each reference
    gold, rows = np.asarray(query_labels), []
    for rule in weights:
        for k in ks:
            predicted = knn.classes_[vote(codes[idx[:, :k]], len(knn.classes_), dist[:, :k], rule)[0]]
            rows.append({"k": k, "weights": rule, "accuracy": round(100 * float(np.mean(predicted == gold)), 2)})
    return max(rows, key=lambda r: r["accuracy"]), rows


def linear_scores(head, queries, query_labels) -> dict:
    """Accuracy and macro-F1 (x 100) of a fitted :class:`cea.knn.head.LinearHead` on ``queries``."""
    return _scores(head.predict(queries), query_labels)


def linear_evaluate(references, reference_labels, queries, query_labels, C: float | None = None) -> dict:
    """Accuracy and macro-F1 (x 100) of ``queries`` by a linear head (:mod:`cea.knn.head`, inverse
    regularisation ``C``, default its own) fitted on the ``references``; the fitting seconds beside them."""
    import time

    from ..knn.head import C as DEFAULT_C
    from ..knn.head import fit_head

    t0 = time.perf_counter()
    head = fit_head(references, np.asarray(reference_labels, dtype=str), DEFAULT_C if C is None else C)
    seconds = time.perf_counter() - t0
    return {**linear_scores(head, queries, query_labels), "C": head.C, "fit_seconds": round(seconds, 2)}


def _scores(predicted, query_labels) -> dict:
    from sklearn.metrics import f1_score

    gold = np.asarray(query_labels, dtype=str)
    return {"accuracy": round(100 * float(np.mean(predicted == gold)), 2),
            "macro_f1": round(100 * float(f1_score(gold, predicted, average="macro", zero_division=0)), 2)}


def open_set_scores(predicted, gold) -> dict:
    """Scores (x 100) of an open-set classifier whose answers and gold labels may be ``unknown``
    (:data:`cea.knn.unknown.UNKNOWN`), as the open-intent literature (ADB, Zhang et al. 2021) reports them:
    ``open_accuracy`` over every text, ``open_macro_f1`` over the known classes and unknown as one more class,
    ``known_accuracy`` on texts of known classes (an abstention counts as wrong), ``unknown_recall`` and
    ``unknown_precision``."""
    from sklearn.metrics import f1_score

    from ..knn.unknown import UNKNOWN

    predicted, gold = np.asarray(predicted, dtype=str), np.asarray(gold, dtype=str)
    known, flagged = gold != UNKNOWN, predicted == UNKNOWN
    labels = sorted(set(gold) | {UNKNOWN})  # classes that never occur in gold are not averaged

    def share(hits, of):
        return round(100 * float(hits.sum() / of.sum()), 2) if of.any() else 0.0

    return {"open_accuracy": round(100 * float(np.mean(predicted == gold)), 2),
            "open_macro_f1": round(100 * float(f1_score(gold, predicted, labels=labels, average="macro",
                                                        zero_division=0)), 2),
            "known_accuracy": share((predicted == gold) & known, known),
            "unknown_recall": share(flagged & ~known, ~known), "unknown_precision": share(flagged & ~known, flagged)}


def choose_head(references, reference_labels, queries, query_labels, Cs=(0.1, 1.0, 10.0, 100.0)) -> tuple[dict, list[dict]]:
    """The linear head's ``C`` with the best accuracy of ``queries`` (a dev split): ``(best, rows)``, each row
    ``{"C", "accuracy", "macro_f1", "fit_seconds"}``; ties go to the smaller C (the stronger regularisation)."""
    rows = [linear_evaluate(references, reference_labels, queries, query_labels, c) for c in sorted(Cs)]
    return max(rows, key=lambda r: r["accuracy"]), rows


def choose_mix(references, reference_labels, queries, query_labels, C: float, k: int, weights: str,
               shares=(0.0, 0.25, 0.5, 0.75, 1.0)) -> tuple[dict, list[dict]]:
    """The share ``s`` of the kNN vote (``k``, ``weights``) in class probabilities mixed with a linear head's
    (``C``), ``(1 - s) * head + s * kNN vote shares``, with the best accuracy of ``queries`` (a dev split):
    ``(best, rows)``, each row ``{"knn_share", "accuracy", "macro_f1"}`` (x 100); ties go to the smaller
    share. Share 1 is the kNN vote alone; one share scores that mixture. Each mixture answers as a bundle with that
    classifier answers (:meth:`cea.knn.decision.Classifier.decide`), from one search and one head."""
    from ..knn.decision import Classifier

    reference_labels = np.asarray(reference_labels, dtype=str)
    spec = Classifier("linear", k=k, weights=weights, C=C)
    head = spec.fit(references, reference_labels)
    dist, idx = KNNClassifier(k, weights=weights).fit(references, reference_labels).kneighbors(queries)
    sims, neighbours = 1.0 - dist, reference_labels[idx].astype(object)
    rows = [{"knn_share": s, **_scores(spec.replace(knn_share=s).decide(head, queries, sims, neighbours).labels
                                       .astype(str), query_labels)} for s in sorted(shares)]
    return max(rows, key=lambda r: r["accuracy"]), rows


def evaluate_encoder(model, reference_texts, reference_labels, queries: dict, k: int = 5,
                     retrieval=("test",), reference_ids=None, keep_embeddings=("test",),
                     batch_size: int = 64, linear: bool = False,
                     unknown_rate: float | None = None, encoded: dict | None = None,
                     reuse: dict | None = None) -> dict[str, KNNEvaluation]:
    """Encode the references once and judge every query split: ``queries`` maps a split name to
    ``(texts, labels)``; the splits named in ``retrieval`` also get top-k retrieval scores; ``linear``: each
    split also gets the scores of a linear head (:mod:`cea.knn.head`) fitted on the references.

    ``unknown_rate`` (with ``linear``; the first split holds known classes only, e.g. dev): the head may answer
    ``unknown`` (:mod:`cea.knn.unknown`; small classes' evidence scaled by the references' count curve, as a bundle
    scales it), its threshold turning away that share of the first split's texts, and every other split gets
    :func:`open_set_scores` (its gold labels may be ``unknown``) and the threshold.

    ``encoded`` (a dict) receives what was encoded, so that no caller encodes the same texts with the same weights
    again: ``{"references": (texts' fingerprint, embeddings), split: (fingerprint, embeddings), ...}``; ``reuse``, in
    the same form, holds what ``model`` encoded before with the same weights: used wherever the texts match."""
    from ..encoders.embeddings import text_fingerprint
    from ..knn.head import fit_head
    from ..knn.unknown import abstain, count_curve, count_scale, evidence, threshold_at

    def encoded_now(role, texts):
        fp = text_fingerprint(list(texts))
        ready = (reuse or {}).get(role)
        array = ready[1] if ready is not None and ready[0] == fp else encode(model, texts, batch_size)
        if encoded is not None:
            encoded[role] = (fp, array)
        return array

    refs = encoded_now("references", reference_texts)
    reference_labels = np.asarray(reference_labels)
    head = fit_head(refs, reference_labels.astype(str)) if linear and len(np.unique(reference_labels)) > 1 else None
    out, threshold = {}, None
    if head is not None and unknown_rate is not None:  # small classes' evidence scaled as a bundle's (cea.knn.unknown)
        names = reference_labels.astype(str)
        curve, counts = count_curve(refs, names), Counter(names.tolist())
    for split, (texts, labels) in queries.items():
        embeddings = encoded_now(split, texts)
        out[split] = knn_evaluate(refs, reference_labels, embeddings, np.asarray(labels), k,
                                  reference_ids, split in retrieval, split in keep_embeddings)
        if head is not None:
            out[split].linear = {f"linear_{name}": value for name, value in linear_scores(head, embeddings, labels).items()}
        if head is not None and unknown_rate is not None:
            proba = head.predict_proba(embeddings)
            chosen = head.classes[proba.argmax(1)]
            strength = evidence(proba.max(1), out[split].cosines[:, 0], count_scale(curve, counts, chosen))
            if threshold is None:  # the first split: the calibration
                threshold = threshold_at(strength, unknown_rate)
                out[split].open = {"unknown_threshold": round(threshold, 6)}
                continue
            answers = abstain(chosen, strength, threshold)
            out[split].open = {**open_set_scores(answers, labels), "unknown_threshold": round(threshold, 6)}
    return out


def saved_predictions(model_path: str | Path, dataset, split: str = "test", k: int | None = None) -> dict | None:
    """The predictions and embeddings a training run saved beside its model (``RUN/model`` -> ``RUN``),
    when they answer the same question: this data set (by fingerprint), this split, this k, and the
    whole train split as references (no ``--shots``, ``--imbalance``, ``--limit`` or ``--unknown-classes``). Else None."""
    run = Path(model_path).parent
    if not (run / "results.json").exists():
        return None
    results = json.loads((run / "results.json").read_text())
    config = results.get("config", {})
    if results.get("dataset_fingerprint") != dataset.fingerprint() or any(
            config.get(key) for key in ("shots", "imbalance", "train_limit", "unknown_classes")):
        return None
    if not (run / PREDICTIONS).exists() or not (run / EMBEDDINGS).exists():
        return None
    data = read_json(run / PREDICTIONS, FORMAT, "rerun the training")
    if data["split"] != split or (k is not None and data["k"] != k):
        return None
    return {**data, "embeddings": np.load(run / EMBEDDINGS, allow_pickle=False)}
