"""cea: class-driven embedding alignment.

Label-aware sentence embeddings: probe frozen encoders by kNN, fine-tune them so that texts of the
same class sit together, and classify by nearest neighbours::

    from cea import Bundle, Classifier, KNNClassifier, TrainConfig, fit, load_dataset, probe, train

The names load on first use (PEP 562), so ``import cea`` and the CLI start without torch.
"""

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Bundle": "cea.bundle",
    "Classifier": "cea.knn",
    "KNNClassifier": "cea.knn",
    "TrainConfig": "cea.training",
    "fit": "cea.fitting",
    "load_dataset": "cea.data",
    "load_encoder": "cea.encoders",
    "probe": "cea.evaluation",
    "train": "cea.training",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'cea' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__():
    return sorted([*globals(), *_EXPORTS])
