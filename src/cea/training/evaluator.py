"""kNN accuracy and macro-F1 as a sentence-transformers evaluator (run on dev every epoch)."""

from __future__ import annotations

import numpy as np
from sentence_transformers.sentence_transformer.evaluation import SentenceEvaluator

from ..knn import KNNClassifier


class KNNEvaluator(SentenceEvaluator):
    """Encode references and queries with the current model; classify queries by kNN."""

    def __init__(self, ref_texts, ref_labels, query_texts, query_labels, k: int = 5, name: str = "dev",
                 batch_size: int = 64, head=None):
        super().__init__()
        self.ref_texts, self.ref_labels = list(ref_texts), np.asarray(ref_labels)
        self.query_texts, self.query_labels = list(query_texts), np.asarray(query_labels)
        self.k, self.name, self.batch_size, self.head = k, name, batch_size, head
        self.primary_metric = "knn_accuracy"
        self.history: list[dict] = []

    def __call__(self, model, output_path=None, epoch: int = -1, steps: int = -1) -> dict[str, float]:
        refs = model.encode(self.ref_texts, batch_size=self.batch_size, convert_to_numpy=True)
        queries = model.encode(self.query_texts, batch_size=self.batch_size, convert_to_numpy=True)
        scores = KNNClassifier(self.k).fit(refs, self.ref_labels).evaluate(queries, self.query_labels)
        metrics = {"knn_accuracy": scores["accuracy"], "knn_macro_f1": scores["macro_f1"],
                   "knn_top_k_accuracy": scores["top_k_accuracy"]}
        if self.head is not None:
            import torch

            pred = self.head(torch.from_numpy(queries)).cpu().numpy()
            metrics["head_accuracy"] = float(np.mean(pred == self.query_labels))
        metrics = self.prefix_name_to_metrics(metrics, self.name)
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        self.history.append({"epoch": epoch, "steps": steps, **metrics})
        return metrics
