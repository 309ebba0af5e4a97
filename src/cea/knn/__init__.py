"""Classifiers on embeddings: cosine kNN over one registry of index kinds, a linear head, and the one specification
of the classifier on top that evaluation, ``cea fit`` and a bundle share (:class:`Classifier`)."""

from .classifier import BACKENDS, KNNClassifier, vote
from .decision import Classifier
from .head import LinearHead, fit_head, fit_label_head
from .index import INDEXES, VectorIndex, build_index
from .search import normalize

__all__ = [
    "BACKENDS",
    "INDEXES",
    "Classifier",
    "KNNClassifier",
    "LinearHead",
    "VectorIndex",
    "build_index",
    "fit_head",
    "fit_label_head",
    "normalize",
    "vote",
]
