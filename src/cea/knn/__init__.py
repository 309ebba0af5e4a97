"""kNN: cosine nearest-neighbour classification over one registry of index kinds."""

from .classifier import BACKENDS, KNNClassifier
from .index import INDEXES, VectorIndex, build_index
from .search import normalize
from .vote import vote

__all__ = ["BACKENDS", "INDEXES", "KNNClassifier", "VectorIndex", "build_index", "normalize", "vote"]
