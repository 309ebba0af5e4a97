"""A linear head on embeddings: scikit-learn's logistic regression, kept as plain arrays.

scikit-learn fits the head; this module keeps what a bundle needs around it and scikit-learn does not give: weights
that load without pickle (``head.npz``), probabilities from them alone, and a refit after examples were added or
removed that starts from the previous weights, many times faster (docs/decisions.md#head-refit); a new class's row
starts as the unit mean of its examples scaled to the old rows' mean norm (from a zero row lbfgs stops before it has
moved). ``C = 10`` was chosen on dev; a class with fewer examples than the median class weighs as if it had the median
count (:func:`class_weights`), so that a class added with a handful of examples gets predicted (docs/decisions.md#head).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data.labels import label_set
from ..errors import CeaError
from .search import normalize

C = 10.0
MAX_ITER = 3000
CLASS_WEIGHTS = ("median", None)  # a small class weighs as the median class (module docstring); None: each text as 1
FILE = "head.npz"


@dataclass
class LinearHead:
    """Class names, weights ``coef`` (classes x dim; one row for two classes, as scikit-learn) and ``intercept``;
    ``n_iter``: the lbfgs iterations of its fit (0 when loaded); ``converged``: False where that fit hit its bound.
    ``multi_label``: one logistic regression per label (:func:`fit_label_head`), each label's probability its own."""

    classes: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    C: float = C
    n_iter: int = 0
    multi_label: bool = False
    converged: bool = True
    _columns: dict | None = field(default=None, init=False, repr=False, compare=False)  # class name -> column
    _weights: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)  # coef.T in float64

    def decision(self, X: np.ndarray) -> np.ndarray:
        if self._weights is None:  # once: a service's batch of 8 spent a tenth of its decision converting them
            self._weights = np.ascontiguousarray(self.coef.T, dtype=np.float64)
        return normalize(np.asarray(X, np.float32)).astype(np.float64) @ self._weights + self.intercept

    def columns(self, names) -> np.ndarray:
        """The column of each class in ``names`` (-1: a class the head does not know), by a dictionary made once:
        ``np.isin`` and ``np.searchsorted`` on string arrays cost tens of microseconds a call."""
        if self._columns is None:
            self._columns = {str(name): i for i, name in enumerate(self.classes.tolist())}
        return np.fromiter((self._columns.get(str(name), -1) for name in names), np.int64, len(names))

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Class probabilities, columns in ``classes``' order (scikit-learn's formula; multi-label: each its own)."""
        z = self.decision(X)
        if self.multi_label:
            return 1.0 / (1.0 + np.exp(-z))
        if z.shape[1] == 1:  # two classes: one logit, the second class's
            p = 1.0 / (1.0 + np.exp(-z[:, 0]))
            return np.stack([1.0 - p, p], axis=1)
        e = np.exp(z - z.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.classes[self.predict_proba(X).argmax(1)]

    def mixed_proba(self, X: np.ndarray, votes: np.ndarray, vote_classes, knn_share: float) -> np.ndarray:
        """``(1 - knn_share) * head + knn_share * kNN vote shares``: ``votes`` (queries x ``vote_classes``, labels
        the head knows) are each query's vote weights, normalised here; columns in the order of ``classes``."""
        proba = self.predict_proba(X)
        if knn_share:
            columns = self.columns(vote_classes)
            proba = (1 - knn_share) * proba
            total = votes.sum(1, keepdims=True)  # 0 where every neighbour's label is new to the head
            proba[:, columns] += knn_share * np.divide(votes, total, out=np.zeros_like(votes), where=total > 0)
        return proba

    def save(self, folder: str | Path) -> Path:
        """``folder/head.npz``, fsync'd."""
        path = Path(folder) / FILE
        with open(path, "wb") as fh:
            np.savez(
                fh,
                classes=np.asarray(self.classes, dtype=str),
                coef=self.coef,
                intercept=self.intercept,
                C=np.float64(self.C),
                multi_label=np.bool_(self.multi_label),
            )
            fh.flush()
            os.fsync(fh.fileno())
        return path

    @classmethod
    def beside(cls, encoder: str | Path) -> LinearHead | None:
        """The head a training run saved beside its ``encoder`` folder (``head.npz``; softmax's), None where none is."""
        return cls.load(encoder) if (Path(str(encoder)) / FILE).exists() else None

    @classmethod
    def load(cls, folder: str | Path) -> LinearHead:
        with np.load(Path(folder) / FILE, allow_pickle=False) as data:
            return cls(
                data["classes"],
                data["coef"],
                data["intercept"],
                float(data["C"]),
                multi_label="multi_label" in data.files and bool(data["multi_label"]),
            )


def class_weights(y, rule: str | None = "median") -> dict[str, float] | None:
    """Each class's weight in the head's loss (scikit-learn's ``class_weight``): with ``rule`` ``median`` a class
    with fewer texts than the median class weighs ``median / count``, the others 1; None: every text weighs 1."""
    if rule is None:
        return None
    if rule not in CLASS_WEIGHTS:
        raise CeaError(f"class_weight must be median or None, got {rule!r}")
    names, counts = np.unique(np.asarray(y, dtype=str), return_counts=True)
    median = float(np.median(counts))
    return {str(name): max(1.0, median / count) for name, count in zip(names, counts)}


def fit_head(
    X: np.ndarray,
    y,
    C: float = C,
    previous: LinearHead | None = None,
    steps: int | None = None,
    class_weight: str | None = None,
) -> LinearHead:
    """Fit a logistic regression with inverse regularisation ``C`` on embeddings ``X`` (scaled to unit length, here
    and in prediction) and labels ``y`` (strings). ``previous``: a multi-class head fitted before, whose rows start
    lbfgs (a new class's row from its examples; otherwise ignored), at most ``steps`` iterations (a head with
    ``n_iter == steps`` may not have converged: a refit goes on); from scratch lbfgs runs up to ``MAX_ITER``.
    ``class_weight``: None (each text weighs 1) or ``median`` (:func:`class_weights`)."""
    if C <= 0:
        raise CeaError(f"C must be positive, got {C}")
    y = np.asarray(y, dtype=str)
    classes = np.unique(y)
    if len(classes) < 2:
        raise CeaError(f"a linear head needs at least two classes; the references hold {len(classes)}")
    X = normalize(np.asarray(X, np.float32))
    start = _warm_start(previous, X, y, classes)
    max_iter = MAX_ITER if start is None or steps is None else steps
    weights = class_weights(y, class_weight)  # by row of classes: scikit-learn 1.9 misses names like "38" in a dict
    model = _regression(
        X, np.searchsorted(classes, y), C, max_iter, start, weights and {i: weights[c] for i, c in enumerate(classes)}
    )
    n_iter = int(model.n_iter_.max())
    return LinearHead(
        classes,
        model.coef_.astype(np.float32),
        model.intercept_.astype(np.float32),
        float(C),
        n_iter,
        converged=n_iter < max_iter,
    )


def _regression(X: np.ndarray, y: np.ndarray, C: float, max_iter: int, start=None, class_weight=None):
    """scikit-learn's logistic regression fitted on ``X`` and ``y``, lbfgs from ``start`` (``(coef, intercept)``)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=C, max_iter=max_iter, warm_start=start is not None, class_weight=class_weight)
    if start is not None:
        model.coef_, model.intercept_ = (np.asarray(a, np.float64) for a in start)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # MAX_ITER bounds a refit's time; close is good enough
        return model.fit(X, y)


def _warm_start(previous: LinearHead | None, X: np.ndarray, y: np.ndarray, classes: np.ndarray):
    """``(coef, intercept)`` to start lbfgs from: ``previous``'s rows for the classes it knows, a prototype row for each
    new one (the module's docstring); None where there is no multi-class head sharing a class with these."""
    if previous is None or previous.multi_label or len(previous.classes) < 3 or len(classes) < 3:
        return None  # a two-class head has one row for both classes: nothing per class to start from
    old = previous.columns(classes)  # -1: a new class
    kept = old[old >= 0]
    if not len(kept):
        return None
    norm = float(np.linalg.norm(previous.coef[kept], axis=1).mean())
    coef = np.zeros((len(classes), X.shape[1]))
    intercept = np.full(len(classes), float(previous.intercept[kept].min()))
    coef[old >= 0], intercept[old >= 0] = previous.coef[kept], previous.intercept[kept]
    for row in np.flatnonzero(old < 0):
        centre = X[y == classes[row]].mean(0)
        coef[row] = norm * centre / max(float(np.linalg.norm(centre)), 1e-12)
    return coef, intercept


def fit_label_head(X: np.ndarray, label_sets, C: float = C, previous: LinearHead | None = None) -> LinearHead:
    """One logistic regression per label on embeddings ``X`` and label sets, inverse regularisation ``C``. Written
    out because scikit-learn's ``OneVsRestClassifier`` clones its estimator for every fit: here each label's regression
    starts from ``previous``'s weights, so a refit is short. A label on every example (or none) gets a constant head."""
    if C <= 0:
        raise CeaError(f"C must be positive, got {C}")
    sets = [set(label_set(labels)) for labels in label_sets]
    classes = np.array(sorted(set().union(*sets)))
    X = normalize(np.asarray(X, np.float32))
    before = {} if previous is None else {c: i for i, c in enumerate(np.asarray(previous.classes, dtype=str))}
    coef, intercept, n_iter = np.zeros((len(classes), X.shape[1]), np.float32), np.zeros(len(classes), np.float32), 0
    for row, label in enumerate(classes):
        y = np.array([label in s for s in sets])
        if y.all() or not y.any():  # one class only: logistic regression cannot fit it
            intercept[row] = 20.0 if y.all() else -20.0
            continue
        at = before.get(label)
        model = _regression(X, y, C, MAX_ITER, None if at is None else (previous.coef[[at]], previous.intercept[[at]]))
        coef[row], intercept[row], n_iter = model.coef_[0], model.intercept_[0], max(n_iter, int(model.n_iter_.max()))
    return LinearHead(classes, coef, intercept, float(C), n_iter, multi_label=True)
