"""A bundle as an MLflow pyfunc model, from code (``mlflow.pyfunc.log_model(python_model=<this file>)``): MLflow runs
this file to make the model, so nothing is pickled. :func:`cea.sharing.log_bundle` logs it; ``mlflow models serve``
and ``mlflow.pyfunc.load_model`` open it. Imported by MLflow only (it needs the extra ``cea[track]``).
"""

from __future__ import annotations

import mlflow
import pandas as pd


class BundleModel(mlflow.pyfunc.PythonModel):
    """Texts in (a DataFrame with a ``text`` column, or a list), one row per text out: label, score, evidence."""

    def load_context(self, context):
        from cea.bundle import Bundle

        self.bundle = Bundle.load(context.artifacts["bundle"])

    def predict(self, context, model_input, params=None):
        texts = list(model_input["text"] if isinstance(model_input, pd.DataFrame) else model_input)
        found = self.bundle.predict([str(t) for t in texts])
        return pd.DataFrame(
            {
                "label": [p.label for p in found],
                "score": [float(p.score) for p in found],
                "evidence": [float(p.evidence) for p in found],
            }
        )


mlflow.models.set_model(BundleModel())
