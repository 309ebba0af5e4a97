"""Normalized softmax: classification on the unit sphere (:class:`NormalizedSoftmaxObjective`)."""

from __future__ import annotations

import torch
from pytorch_metric_learning import losses
from torch import nn

from .base import PMLObjective


class NormalizedSoftmaxObjective(PMLObjective):
    """Normalized softmax: classification on the unit sphere, which makes a good retrieval embedding.

    What it expects
        Single texts with integer class labels.

    What it returns
        Cross-entropy of ``x . w_c / T``, ``x`` the embedding through a LayerNorm without affine parameters and
        unit-normalised, ``w_c`` the unit class weights (pytorch-metric-learning's ``NormalizedSoftmaxLoss``).

    When to use it
        For classification's speed and stability with a cosine kNN on the result (as good as metric learning: Citation).

    Options
        ``num_labels``: the number of classes; ``temperature``: the softmax temperature (0.05; ``--temperature``).

    Example
        >>> loss = NormalizedSoftmaxObjective(model, num_labels=77)

    Citation
        Zhai and Wu, "Classification is a Strong Baseline for Deep Metric Learning", BMVC 2019.
    """

    def __init__(self, model, num_labels: int, temperature: float = 0.05):
        dim = model.get_embedding_dimension()
        super().__init__(model, losses.NormalizedSoftmaxLoss(num_labels, dim, temperature=temperature))
        self.norm = nn.LayerNorm(dim, elementwise_affine=False)

    def compute_loss_from_embeddings(self, embeddings, labels, features=None) -> torch.Tensor:
        return super().compute_loss_from_embeddings(self.norm(embeddings), labels, features)
