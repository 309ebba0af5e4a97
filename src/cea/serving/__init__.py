"""Serving: kNN classifier bundles that predict, grow with new examples, and serve over HTTP."""

from . import postgres, store  # noqa: F401 (each store kind registers itself in store.STORES)
from .bundle import Bundle, Prediction

__all__ = ["Bundle", "Prediction"]
