"""A bundle in MLflow (:func:`log_bundle`): a pyfunc model that predicts a DataFrame of texts, for the MLflow
registry and ``mlflow models serve``.

How
    The model is logged from code (:mod:`cea.serving.pyfunc`, MLflow's "models from code"): no pickle is written or
    read. The bundle folder travels as the model's artifact, less what a service kept of its traffic and its lock
    files (:data:`cea.serving.store.LEFT_BEHIND`).

What it expects
    MLflow (the extra ``cea[track]``) and its tracking URI (``MLFLOW_TRACKING_URI``); a bundle written by ``cea
    bundle`` or ``cea fit`` with a folder store.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from .errors import CeaError
from .serving import Bundle
from .serving.store import LEFT_BEHIND


def log_bundle(bundle_dir: str | Path, name: str = "bundle", registered_model_name: str | None = None):
    """Log the bundle in ``bundle_dir`` as an MLflow pyfunc model in the active run (one is started where none is);
    ``registered_model_name`` also registers it. Returns MLflow's ``ModelInfo`` (``model_uri`` loads it)."""
    try:
        import mlflow
    except ImportError:
        raise CeaError("logging a bundle to MLflow needs mlflow: pip install 'cea[track]'") from None
    bundle_dir = Path(bundle_dir)
    Bundle.load(bundle_dir).close()  # a bundle, whole and verified, before anything is logged
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / bundle_dir.name
        shutil.copytree(bundle_dir, copy, ignore=shutil.ignore_patterns(*LEFT_BEHIND))
        return mlflow.pyfunc.log_model(name=name, python_model=str(Path(__file__).parent / "serving" / "pyfunc.py"),
                                       artifacts={"bundle": str(copy)}, registered_model_name=registered_model_name,
                                       input_example=pd.DataFrame({"text": ["a text to classify"]}),
                                       pip_requirements=["cea"])
