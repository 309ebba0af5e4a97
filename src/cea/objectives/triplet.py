"""Triplet margin loss on cosine similarity, mined from labels or on given rows (:class:`TripletObjective`)."""

from __future__ import annotations

from pytorch_metric_learning import distances, losses, miners
from sentence_transformers.sentence_transformer.losses import TripletDistanceMetric, TripletLoss

from .base import PMLObjective
from .catalog import TripletOptions


def build(model, num_labels, o: TripletOptions, seed, data):
    o = o.for_data(data)
    if data != "triplets":
        return TripletObjective(model, o.margin, o.mining)
    return TripletLoss(model, distance_metric=TripletDistanceMetric.COSINE, triplet_margin=o.margin)


class TripletObjective(PMLObjective):
    """Triplet margin loss on cosine similarity: mined from labels (batch-all or batch-hard), or on given rows.

    What it expects
        Single texts with integer class labels, batches holding two examples of a label and another label (the
        P x K sampler); or rows of three texts, e.g. entity-swap triplets.

    What it returns
        ``mean over mined triplets of max(0, cos(a, n) - cos(a, p) + margin)`` (pytorch-metric-learning's
        ``TripletMarginLoss``, over the triplets not already satisfied); ``mining="all"``: every valid triplet,
        ``"hard"``: the hardest positive and negative per anchor. On rows: sentence-transformers' ``TripletLoss``
        (``max(0, d(a, p) - d(a, n) + margin)``, ``d = 1 - cos``).

    When to use it
        When a margin between classes matters more than tight clusters; on entity-swap rows (margin 0.5, as that
        study: JaeL17/high-level-semantics-embedding-model on GitHub).

    Options
        ``margin``: the cosine margin (0.2; ``cea train --margin``, whose default is 0.2 on labelled texts and 0.5 on
        triplet rows); ``mining``: ``all`` (batch-all) or ``hard`` (batch-hard), labelled texts only (``--mining``).

    Example
        >>> loss = TripletObjective(model, margin=0.2, mining="hard")

    Citation
        Hermans et al., "In Defense of the Triplet Loss for Person Re-Identification", 2017; Musgrave et al.,
        "PyTorch Metric Learning", 2020.
    """

    def __init__(self, model, margin: float = 0.2, mining: str = "all"):
        TripletOptions(margin, mining)  # checks the values
        distance = distances.CosineSimilarity()
        miner = miners.BatchHardMiner(distance=distance) if mining == "hard" else None
        super().__init__(model, losses.TripletMarginLoss(margin=margin, distance=distance), miner)
