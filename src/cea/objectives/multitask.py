"""Multitask: a main objective plus a flipped auxiliary one (:class:`MultitaskObjective`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import EmbeddingObjective


def flipped_aux_loss(embeddings: torch.Tensor, labels: torch.Tensor, aux: torch.Tensor) -> torch.Tensor:
    cos = F.normalize(embeddings, dim=-1) @ F.normalize(embeddings, dim=-1).T
    n = len(embeddings)
    upper = torch.triu(torch.ones(n, n, dtype=torch.bool, device=embeddings.device), 1)
    chosen = upper & (aux[:, None] == aux[None, :]) & (labels[:, None] != labels[None, :])
    return (cos[chosen] ** 2).mean() if chosen.any() else embeddings.sum() * 0


class MultitaskObjective(EmbeddingObjective):
    """Multitask: a main objective plus a flipped auxiliary one that pushes same-aux-label pairs apart.

    What it expects
        Labels of shape (B, 2): the class label and an auxiliary label (e.g. the publisher).

    What it returns
        ``main(embeddings, class labels) + weight * mean over in-batch pairs with the same auxiliary label of
        cos(e_a, e_b)^2`` (CEA with target 0 on those pairs; pairs sharing the class are left to the main objective).

    When to use it
        When a nuisance attribute (source, publisher, author) should not shape the space.

    Options
        ``main``: the objective on the class labels (an :class:`cea.objectives.base.EmbeddingObjective`); ``weight``:
        the auxiliary term's (1.0; ``TrainConfig(aux_weight=...)``); ``cea train --aux-label-column COLUMN`` adds it.

    Example
        >>> loss = MultitaskObjective(CEALoss(model, num_labels=3), weight=1.0)

    Citation
        CEA study (flairNLP/flair, branch embedding-alignment), "Multitask + flipped labels" on a political-bias set.
    """

    def __init__(self, main: EmbeddingObjective, weight: float = 1.0):
        super().__init__(main.model)
        self.main, self.weight = main, weight
        self.needs_features = main.needs_features

    def compute_loss_from_embeddings(self, embeddings, labels, features=None) -> torch.Tensor:
        labels = labels.view(len(embeddings), 2).long()
        main = self.main.compute_loss_from_embeddings(embeddings, labels[:, :1], features)
        return main + self.weight * flipped_aux_loss(embeddings, labels[:, 0], labels[:, 1])
