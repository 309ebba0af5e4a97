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

import dataclasses
from dataclasses import dataclass

from .base import PMLObjective
from .registry import Options, option, register


@dataclass
class TripletOptions(Options):
    margin: float | None = option(None, "margin (default 0.2 mined from labels, 0.5 on triplet rows)")
    mining: str = option("all", "all (batch-all) or hard (batch-hard); labelled texts only", ("all", "hard"))

    def for_data(self, data: str) -> TripletOptions:
        return self if self.margin is not None else dataclasses.replace(self, margin=0.5 if data == "triplets" else 0.2)


class TripletObjective(PMLObjective):
    def __init__(self, model, margin: float = 0.2, mining: str = "all"):
        from pytorch_metric_learning import distances, losses, miners

        TripletOptions(margin, mining)  # checks the values
        distance = distances.CosineSimilarity()
        miner = miners.BatchHardMiner(distance=distance) if mining == "hard" else None
        super().__init__(model, losses.TripletMarginLoss(margin=margin, distance=distance), miner)
        self.margin, self.mining = margin, mining


def explicit_triplet_loss(model, margin: float = 0.5):
    """Triplet margin loss on explicit (anchor, positive, negative) rows, e.g. entity-swap triplets.

    ``max(0, d(a, p) - d(a, n) + margin)`` with cosine distance ``d = 1 - cos`` and margin 0.5 by
    default (as in the entity-swap study, JaeL17/high-level-semantics-embedding-model on GitHub): sentence-transformers' ``TripletLoss``, used as it is.
    """
    from sentence_transformers.sentence_transformer.losses import TripletDistanceMetric, TripletLoss

    return TripletLoss(model, distance_metric=TripletDistanceMetric.COSINE, triplet_margin=margin)


def _build(model, num_labels, o: TripletOptions, seed, data):
    o = o.for_data(data)
    return explicit_triplet_loss(model, o.margin) if data == "triplets" else TripletObjective(model, o.margin, o.mining)


SPEC = register("triplet", ("classes", "triplets"), TripletOptions, build=_build,
                summary="triplet margin loss, mined from labels or on (anchor, positive, negative) rows")
