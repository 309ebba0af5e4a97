"""Supervised contrastive loss, SupCon (:class:`SupConObjective`)."""

from __future__ import annotations

from .base import PMLObjective


class SupConObjective(PMLObjective):
    """Supervised contrastive loss (SupCon).

    What it expects
        Single texts with integer class labels, batches with several examples per label; texts with several labels
        (multi-hot rows) are positives of each other when they share one.

    What it returns
        For each anchor, ``-mean over its positives p of log(exp(cos(a,p)/T) / sum over all others exp(cos(a,k)/T))``,
        averaged over anchors (pytorch-metric-learning's ``SupConLoss``).

    When to use it
        A strong label-aware contrastive peer of CEA: all the batch's positives and negatives, with a temperature.

    Options
        ``temperature``: the softmax temperature (0.1; ``cea train --temperature``); ``multi_label``: multi-hot labels.

    Example
        >>> loss = SupConObjective(model, temperature=0.1)

    Citation
        Khosla et al., "Supervised Contrastive Learning", NeurIPS 2020.
    """

    def __init__(self, model, temperature: float = 0.1, multi_label: bool = False):
        from pytorch_metric_learning import losses

        super().__init__(model, losses.SupConLoss(temperature=temperature), multi_label=multi_label)
