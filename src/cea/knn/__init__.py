"""Classifiers on embeddings: cosine kNN over one registry of index kinds, and a linear head."""

from ..encoders.embeddings import normalize
from .classifier import BACKENDS, KNNClassifier, vote
from .head import LinearHead, fit_head, fit_label_head
from .index import INDEXES, VectorIndex, build_index

__all__ = ["BACKENDS", "INDEXES", "KNNClassifier", "LinearHead", "VectorIndex", "build_index", "fit_head", "fit_label_head",
           "normalize",
           "vote"]
