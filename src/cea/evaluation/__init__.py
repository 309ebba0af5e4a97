"""Evaluation: the kNN judge of embeddings and encoders, probing frozen encoders, and what produced each result."""

from .classification import KNNEvaluation, evaluate_encoder, knn_evaluate
from .probe import ProbeResult, parse_layers, probe
from .provenance import provenance, versions

__all__ = [
    "KNNEvaluation",
    "ProbeResult",
    "evaluate_encoder",
    "knn_evaluate",
    "parse_layers",
    "probe",
    "provenance",
    "versions",
]
