"""Serving: kNN classifier bundles that predict, grow with new examples, and serve over HTTP."""

from .bundle import Bundle, Prediction

__all__ = ["Bundle", "Prediction"]
