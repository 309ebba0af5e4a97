"""kNN: cosine nearest-neighbour classification over one registry of index kinds."""

from .classifier import BACKENDS, KNNClassifier, vote
from .index import INDEXES, VectorIndex, build_index
from .search import normalize

__all__ = ["BACKENDS", "INDEXES", "KNNClassifier", "VectorIndex", "build_index", "normalize", "vote"]
