"""A k-nearest-neighbour classifier on cosine similarity, in the manner of scikit-learn.

scikit-learn's ``KNeighborsClassifier(metric="cosine", algorithm="brute")`` computes the same votes, but is several
times slower on large reference sets and cannot break ties towards the nearest neighbour or report top-k accuracy
from the same search; hence this class.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from ..errors import CeaError
from .index import build_index
from .search import exact_kernel, normalize

BACKENDS = {"auto": None, "torch": "exact", "faiss": "flat", "int8": "int8"}  # backend -> index kind


class NotFitted(CeaError, NotFittedError):
    """Predicting before ``fit``: a CeaError for cea, a NotFittedError for scikit-learn."""


def _validated(estimator, X, y=None, reset: bool = True):
    """scikit-learn's input checks (2-d, finite, dense, not empty, the fitted features, class labels) as CeaErrors."""
    try:
        args = (X,) if y is None and not reset else (X, y)  # predict: X only; fit: y is required
        out = validate_data(estimator, *args, reset=reset, dtype=[np.float32, np.float64])
        if y is not None:
            check_classification_targets(out[1])
    except ValueError as exc:
        raise CeaError(" ".join(line.strip() for line in str(exc).splitlines() if line.strip())) from None
    return out


def vote(
    labels: np.ndarray,
    n_classes: int,
    dist: np.ndarray | None = None,
    weights: str = "uniform",
    tie_break: str = "nearest",
) -> tuple[np.ndarray, np.ndarray]:
    """The kNN vote of :class:`KNNClassifier` and the bundle: the winning class of each row of ``labels`` (the
    neighbours' class numbers, nearest first, -1: none) and every class's votes; ``dist``: cosine
    distances, for ``weights="distance"``."""
    present = labels >= 0
    if weights == "uniform":
        w = present.astype(np.float64)
    else:
        with np.errstate(divide="ignore"):
            w = 1.0 / np.maximum(dist.astype(np.float64), 0.0)
        inf = np.isinf(w)
        rows = inf.any(1)
        w[rows] = inf[rows]
        w[~present] = 0.0
    labels = np.where(present, labels, 0)
    query = np.arange(len(labels))[:, None]
    scores = np.zeros((len(labels), n_classes))
    np.add.at(scores, (query, labels), w)
    if tie_break == "smallest":
        return scores.argmax(1), scores
    tied = (scores >= scores.max(1, keepdims=True) - 1e-9)[query, labels] & present  # within 1e-9 of the best
    return labels[query[:, 0], tied.argmax(1)], scores


class KNNClassifier(ClassifierMixin, BaseEstimator):
    """Classify by the labels of the ``n_neighbors`` most cosine-similar references; a scikit-learn estimator
    (``get_params``, ``set_params``, ``clone``, pipelines, ``cross_val_score``, ``GridSearchCV``).

    Parameters
    ----------
    n_neighbors : int
        k, the number of neighbours that vote.
    weights : {"uniform", "distance"}
        One vote each, or ``1 / (1 - cos)`` (a neighbour at distance 0 takes the whole vote).
    tie_break : {"nearest", "smallest"}
        Among labels with equal votes, the nearest neighbour's, or the smallest label (scikit-learn's rule).
    backend : {"auto", "torch", "faiss", "int8"}
        Exact search by the index kind ``exact`` (torch), ``flat`` (faiss) or ``int8`` (:mod:`cea.knn.index`);
        auto: the fastest on this CPU (:func:`cea.knn.search.exact_kernel`): int8 from ``INT8_MIN_REFS`` references
        where the CPU has VNNI, else faiss.

    Example
    -------
    >>> import numpy as np
    >>> references = np.array([[1.0, 0.0], [0.9, 0.2], [0.8, 0.3], [0.0, 1.0], [0.2, 0.9], [0.3, 0.8]])
    >>> knn = KNNClassifier(n_neighbors=3).fit(references, ["card", "card", "card", "cash", "cash", "cash"])
    >>> knn.predict(np.array([[0.7, 0.1], [0.1, 0.7]])).tolist()
    ['card', 'cash']
    >>> knn.evaluate(np.array([[0.7, 0.1], [0.1, 0.7]]), ["card", "card"])  # one search: accuracy, macro-F1, top-k
    {'accuracy': 0.5, 'macro_f1': 0.3333333333333333, 'top_k_accuracy': 0.5}
    >>> knn.predict().tolist()  # leave-one-out: each reference classified by the others
    ['card', 'card', 'card', 'cash', 'cash', 'cash']
    """

    def __init__(
        self, n_neighbors: int = 5, weights: str = "uniform", tie_break: str = "nearest", backend: str = "auto"
    ):
        self.n_neighbors, self.weights, self.tie_break, self.backend = n_neighbors, weights, tie_break, backend

    def fit(self, X, y):
        for name, allowed in (
            ("weights", ("uniform", "distance")),
            ("tie_break", ("nearest", "smallest")),
            ("backend", tuple(BACKENDS)),
        ):
            if getattr(self, name) not in allowed:
                raise CeaError(f"unknown {name} {getattr(self, name)!r}; use one of {', '.join(allowed)}")
        if self.n_neighbors < 1:
            raise CeaError(f"n_neighbors must be at least 1, got {self.n_neighbors}")
        if isinstance(X, np.ndarray) and isinstance(y, (np.ndarray, list)) and len(X) != len(y):
            raise CeaError(f"{len(X)} embeddings but {len(y)} labels")
        X, y = _validated(self, X, y)
        X = normalize(X)
        self.classes_, self._y = np.unique(y, return_inverse=True)
        self.backend_ = self.backend if self.backend != "auto" else exact_kernel(len(X))
        self._index = build_index(X, BACKENDS[self.backend_])[0]
        self._X = self._index.vectors  # X itself, not a copy
        return self

    @property
    def n_fallback_(self) -> int:
        """Queries the int8 backend could not certify and searched again in fp32."""
        return getattr(self._index, "n_fallback", 0)

    def kneighbors(self, X=None, n_neighbors: int | None = None, return_distance: bool = True):
        """Cosine distances (1 - cos) and rows of the nearest references, nearest first; ``X=None``: leave-one-out."""
        if not hasattr(self, "_X"):
            raise NotFitted("this KNNClassifier is not fitted yet; call fit(X, y) first")
        if X is not None:
            X = _validated(self, X, reset=False)
        k, loo = n_neighbors or self.n_neighbors, X is None
        limit = len(self._X) - int(loo)
        if k > limit:
            raise CeaError(f"k = {k} is larger than the {limit} references available; choose k <= {limit}")
        sims, idx = self._index.search(self._X if loo else normalize(X), k, exclude_self=loo)
        return (1.0 - sims, idx) if return_distance else idx

    def _vote(self, dist: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return vote(self._y[idx], len(self.classes_), dist, self.weights, self.tie_break)

    def predict_proba(self, X=None) -> np.ndarray:
        scores = self._vote(*self.kneighbors(X))[1]
        return scores / scores.sum(1, keepdims=True)

    def predict(self, X=None) -> np.ndarray:
        decided, _ = self._vote(*self.kneighbors(X))
        return self.classes_[decided]

    def score(self, X, y) -> float:
        """Accuracy on (X, y); ``X=None`` scores leave-one-out on the references."""
        y = self.classes_[self._y] if X is None else np.asarray(y)
        return float(np.mean(self.predict(X) == y))

    def evaluate(self, X, y, return_neighbours: bool = False):
        """Accuracy, macro-F1 and top-k accuracy from one search (``return_neighbours``: also predictions, distances
        and rows)."""
        from sklearn.metrics import f1_score

        dist, idx = self.kneighbors(X)
        y = self.classes_[self._y] if X is None else np.asarray(y)
        if len(y) != len(idx):
            raise CeaError(f"{len(idx)} queries but {len(y)} labels")
        pred = self.classes_[self._vote(dist, idx)[0]]
        scores = {
            "accuracy": float(np.mean(pred == y)),
            "macro_f1": float(f1_score(y, pred, average="macro", zero_division=0)),
            "top_k_accuracy": float(np.mean((self.classes_[self._y[idx]] == y[:, None]).any(1))),
        }
        return (scores, pred, dist, idx) if return_neighbours else scores
