"""The trainer's dev evaluation: one sentence-transformers evaluator around a judge ``model -> metrics``.

The judge is :mod:`cea.evaluation.classification`'s kNN for labelled texts, Spearman for scored
pairs, triplet accuracy for triplets (see :mod:`cea.training.tasks`).
"""

from __future__ import annotations

from sentence_transformers.sentence_transformer.evaluation import SentenceEvaluator


class DevEvaluator(SentenceEvaluator):
    """A sentence-transformers evaluator from a function ``model -> metrics (x 100)``.

    Like sentence-transformers' own evaluators it reports fractions (so the trainer logs
    ``eval_dev_knn_accuracy`` = 0.91); ``history`` keeps every call for ``--select best``.
    """

    def __init__(self, fn, name: str = "dev", primary: str | None = None):
        super().__init__()
        self.fn, self.name, self.history = fn, name, []
        self.primary_metric = primary

    def __call__(self, model, output_path=None, epoch: int = -1, steps: int = -1) -> dict[str, float]:
        metrics = self.prefix_name_to_metrics({k: v / 100 for k, v in self.fn(model).items()}, self.name)
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        self.history.append({"epoch": epoch, "steps": steps, **metrics})
        return metrics
