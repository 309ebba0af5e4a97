"""Classification fine-tuning: a linear head with cross-entropy on the pooled embedding.

What it expects
    Single texts with integer class labels.

What it returns
    Cross-entropy of ``head(embedding)`` against the label. The head's accuracy is reported beside
    kNN accuracy on the same embedding (``predict_head``).

When to use it
    The baseline every study compares with (seeds 000, 003). sentence-transformers' ``SoftmaxLoss``
    classifies *pairs* (u, v, |u - v|); single-text classification is written here.

Example
    >>> loss = SoftmaxObjective(model, num_labels=6)

Citation
    Devlin et al., "BERT", NAACL 2019 (fine-tuning with a classification head).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import EmbeddingObjective
from .registry import register


@register("softmax", "classes", "linear head with cross-entropy")
class SoftmaxObjective(EmbeddingObjective):
    def __init__(self, model, num_labels: int):
        super().__init__(model)
        self.head = nn.Linear(model.get_embedding_dimension(), num_labels)

    def compute_loss_from_embeddings(self, embeddings, labels, features=None) -> torch.Tensor:
        labels = labels.view(len(embeddings), -1)[:, 0].long()
        return F.cross_entropy(self.head(embeddings), labels)

    @torch.no_grad()
    def predict_head(self, embeddings: torch.Tensor) -> torch.Tensor:
        return self.head(embeddings.to(self.head.weight.device)).argmax(-1)
