"""Triplet margin loss with batch-all or batch-hard mining, on cosine similarity.

What it expects
    Single texts with integer class labels; every batch needs at least two examples of some label
    and another label (use the P x K sampler).

What it returns
    ``mean over mined triplets of max(0, cos(a, n) - cos(a, p) + margin)`` (pytorch-metric-learning's
    ``TripletMarginLoss`` with ``CosineSimilarity``; averaged over the triplets that are not already
    satisfied). ``mining="all"`` uses every valid triplet in the batch, ``"hard"`` the hardest positive
    and negative per anchor (``BatchHardMiner``).

When to use it
    When a margin between classes matters more than tight clusters; the peer of CEA in seeds 003 and
    004 (margin 0.2 there for classes, 0.5 for entity-swap triplets).

Example
    >>> loss = TripletObjective(model, margin=0.2, mining="hard")

Citation
    Hermans et al., "In Defense of the Triplet Loss for Person Re-Identification", 2017;
    Musgrave et al., "PyTorch Metric Learning", 2020.
"""

from __future__ import annotations

from ..errors import CeaError
from .base import PMLObjective


class TripletObjective(PMLObjective):
    def __init__(self, model, margin: float = 0.2, mining: str = "all"):
        from pytorch_metric_learning import distances, losses, miners

        if mining not in ("all", "hard"):
            raise CeaError(f"unknown --mining {mining!r}; use all (batch-all) or hard (batch-hard)")
        distance = distances.CosineSimilarity()
        miner = miners.BatchHardMiner(distance=distance) if mining == "hard" else None
        super().__init__(model, losses.TripletMarginLoss(margin=margin, distance=distance), miner)
        self.margin, self.mining = margin, mining



def explicit_triplet_loss(model, margin: float = 0.5):
    """Triplet margin loss on explicit (anchor, positive, negative) rows, e.g. entity-swap triplets.

    ``max(0, d(a, p) - d(a, n) + margin)`` with cosine distance ``d = 1 - cos`` and margin 0.5 by
    default (seed 004): sentence-transformers' ``TripletLoss``, used as it is.
    """
    from sentence_transformers.sentence_transformer.losses import TripletDistanceMetric, TripletLoss

    return TripletLoss(model, distance_metric=TripletDistanceMetric.COSINE, triplet_margin=margin)
