"""The bundle: an encoder, its reference examples (in a folder or PostgreSQL), their index and a classifier, that
predicts and takes new examples and classes without retraining; what ``cea predict``, Ray actors, MLflow's pyfunc and
the service all read."""

from . import postgres, references  # noqa: F401 (each store kind registers itself in references.STORES)
from .bundle import Bundle, Prediction
from .requests import AddRequest, PredictRequest

__all__ = ["AddRequest", "Bundle", "PredictRequest", "Prediction"]
