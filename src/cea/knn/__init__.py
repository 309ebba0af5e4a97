"""kNN: cosine nearest-neighbour classification with exact chunked search."""

from .classifier import KNNClassifier
from .search import BACKENDS, normalize

__all__ = ["BACKENDS", "KNNClassifier", "normalize"]
