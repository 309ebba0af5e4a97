"""Judge embeddings of texts with several labels each as a multi-label bundle classifies them
(:class:`cea.knn.decision.Classifier`: kNN votes per label and a logistic regression per label, each with a
threshold chosen on dev), with micro- and macro-F1, subset accuracy and F1 per label. scikit-learn's
``KNeighborsClassifier`` votes multi-label targets only by majority (0.5), hence these few functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sklearn.metrics import f1_score

from ..knn.decision import Classifier, nearest
from ..knn.head import C as DEFAULT_C
from ..knn.labelsets import binarize, micro_f1
from ..paths import write_json

FILE, FORMAT = "label_sets.json", "cea.label-sets/1"


def multilabel_scores(predicted, gold) -> dict:
    """Micro-F1 (over every label predicted or gold), macro-F1 (the mean F1 of the labels in gold) and subset
    accuracy, x 100, of predicted against gold label sets; ``per_label_f1``: the F1 of every label in gold."""
    in_gold = sorted({label for labels in gold for label in labels})
    classes = sorted(set(in_gold) | {label for labels in predicted for label in labels})
    y_true, y_pred = binarize(gold, classes), binarize(predicted, classes)
    per_label = dict(zip(classes, f1_score(y_true, y_pred, average=None, zero_division=0)))
    return {
        "micro_f1": micro_f1(predicted, gold),
        "macro_f1": round(100 * float(np.mean([per_label[c] for c in in_gold])), 2),
        "subset_accuracy": round(100 * float(np.mean([set(p) == set(g) for p, g in zip(predicted, gold)])), 2),
        "per_label_f1": {c: round(100 * float(per_label[c]), 2) for c in in_gold},
    }


@dataclass
class MultiLabelEvaluation:
    threshold: float
    scores: dict  # split -> multilabel_scores
    predicted: dict = field(default_factory=dict)  # split -> label sets
    gold: dict = field(default_factory=dict)  # split -> label sets
    linear: MultiLabelEvaluation | None = None  # the same judged by a logistic regression per label

    def metrics(self) -> dict[str, dict]:
        """Per split: micro-F1, macro-F1, subset accuracy (x 100) and the threshold of the kNN vote and (where judged)
        the linear head."""
        out = {}
        for split, s in self.scores.items():
            out[split] = {**{f"knn_{k}": v for k, v in s.items() if k != "per_label_f1"}, "threshold": self.threshold}
            if self.linear is not None:
                out[split] |= {f"linear_{k}": v for k, v in self.linear.scores[split].items() if k != "per_label_f1"}
                out[split]["linear_threshold"] = self.linear.threshold
        return out

    def save(self, folder, split: str = "test") -> None:
        """``label_sets.json`` in ``folder``: the threshold, each label's F1, gold and predicted label sets (of the
        linear head where judged, else the kNN vote)."""
        judged = self.linear or self
        write_json(
            Path(folder) / FILE,
            {
                "format": FORMAT,
                "split": split,
                "classifier": "linear" if self.linear else "knn",
                "threshold": judged.threshold,
                "per_label_f1": judged.scores[split]["per_label_f1"],
                "gold": [list(g) for g in judged.gold[split]],
                "predicted": [list(p) for p in judged.predicted[split]],
            },
        )


def multilabel_evaluate(
    references,
    reference_sets,
    queries: dict,
    k: int = 5,
    threshold: float | None = None,
    dev: str = "dev",
    linear: bool = False,
    C: float | None = None,
) -> MultiLabelEvaluation:
    """Judge every split of ``queries`` (``{split: (embeddings, label sets)}``) by the kNN vote of the ``references``
    (``threshold`` None: chosen on ``dev``, best micro-F1, ties to the lower) and, with ``linear``, by a logistic
    regression per label (inverse regularisation ``C``), its threshold chosen on ``dev`` the same way."""
    sets, gold = list(reference_sets), {s: list(q[1]) for s, q in queries.items()}
    found = {s: nearest(references, x, k) for s, (x, _) in queries.items()}

    def judged(spec: Classifier) -> MultiLabelEvaluation:
        head = spec.fit(references, sets)
        if spec.label_threshold is None:
            spec = spec.label_threshold_on(references, sets, queries[dev][0], gold[dev], head, found[dev])
        predicted = {s: spec.answer(references, sets, x, head, found[s]).label_sets for s, (x, _) in queries.items()}
        return MultiLabelEvaluation(
            float(spec.label_threshold), {s: multilabel_scores(predicted[s], gold[s]) for s in queries}, predicted, gold
        )

    result = judged(Classifier("knn", k=k, multi_label=True, label_threshold=threshold))
    if linear:
        result.linear = judged(Classifier("linear", k=k, C=DEFAULT_C if C is None else C, multi_label=True))
    return result
