"""Label sets (texts with several labels): the one rule of choosing a text's labels from their scores, and how a
choice is judged, for :class:`cea.knn.decision.Classifier`, the judges of :mod:`cea.evaluation` and the bundle.

What it does
    :func:`label_shares` scores each label by the share of a text's neighbours carrying it; :func:`choose_labels`
    keeps every label at the threshold (the best where none is); :func:`choose_label_threshold` picks the threshold of
    :data:`THRESHOLDS` with the best :func:`micro_f1`; :func:`binarize` turns label sets into a 0/1 matrix.
"""

from __future__ import annotations

import numpy as np

# a label set's threshold: the one of these with the best micro-F1 of held-out (or dev) texts, ties to the lower
THRESHOLDS = tuple(np.round(np.arange(0.1, 0.95, 0.05), 2))


def label_shares(neighbour_sets) -> tuple[np.ndarray, np.ndarray]:
    """``(classes, shares)``: the share of each query's neighbours (rows of label sets, nearest first, None: none)
    carrying each label (queries x sorted classes)."""
    rows = [[labels for labels in row if labels is not None] for row in neighbour_sets]  # the present neighbours
    classes = np.array(sorted({label for row in rows for labels in row for label in labels}))
    column = {c: i for i, c in enumerate(classes)}
    counts = [
        np.bincount([column[label] for labels in row for label in labels], minlength=len(classes)) for row in rows
    ]
    return classes, np.reshape(counts, (len(rows), len(classes))) / np.maximum([len(row) for row in rows], 1)[:, None]


def choose_labels(scores: np.ndarray, classes, threshold: float) -> list[tuple[str, ...]]:
    """Every label whose score reaches ``threshold``; the best label where none does (every text has one)."""
    chosen = scores >= threshold
    chosen[np.arange(len(scores)), scores.argmax(1)] = True
    return [tuple(np.asarray(classes)[row]) for row in chosen]


def binarize(label_sets, classes) -> np.ndarray:
    """Label sets (iterables of names) as a 0/1 matrix, columns in the order of ``classes``; names outside
    ``classes`` are left out (scikit-learn's ``MultiLabelBinarizer`` does the same with a warning each time)."""
    column = {c: i for i, c in enumerate(classes)}
    out = np.zeros((len(label_sets), len(classes)), np.int8)
    for row, labels in enumerate(label_sets):
        out[row, [column[label] for label in labels if label in column]] = 1
    return out


def micro_f1(predicted, gold) -> float:
    """Micro-F1 x 100 (2 decimals) of predicted against gold label sets, over every label in either."""
    from sklearn.metrics import f1_score

    classes = sorted({label for labels in [*gold, *predicted] for label in labels})
    return round(
        100 * float(f1_score(binarize(gold, classes), binarize(predicted, classes), average="micro", zero_division=0)),
        2,
    )


def choose_label_threshold(scores: np.ndarray, classes, gold) -> float:
    """The threshold of :data:`THRESHOLDS` whose :func:`choose_labels` best match ``gold`` (micro-F1; ties: lower)."""
    return float(max(THRESHOLDS, key=lambda t: (micro_f1(choose_labels(scores, classes, t), gold), -t)))
