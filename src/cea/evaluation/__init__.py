"""Evaluation: probing frozen encoders by kNN, and what produced each result."""

from .probe import ProbeResult, parse_layers, probe
from .provenance import provenance, versions

__all__ = ["ProbeResult", "parse_layers", "probe", "provenance", "versions"]
