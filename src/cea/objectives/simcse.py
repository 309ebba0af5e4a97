"""Unsupervised SimCSE: two dropout views of each sentence, InfoNCE over the batch (:class:`SimCSEObjective`)."""

from __future__ import annotations

from .base import LibraryObjective
from .catalog import SimCSEOptions


class SimCSEObjective(LibraryObjective):
    """Unsupervised SimCSE: two dropout views of each sentence, InfoNCE over the batch.

    What it expects
        Unlabelled sentences, fed twice (two identical text columns); dropout makes the two embeddings differ.

    What it returns
        ``cross_entropy(cos(z1_i, z2_j) / temperature, target i)``: each view must find its own twin among the
        batch's sentences (sentence-transformers' ``MultipleNegativesRankingLoss``, ``scale = 1 / temperature``).

    When to use it
        To adapt an encoder to a domain's sentences without labels; the baseline of miCSE.

    Options
        ``temperature``: the softmax temperature (0.05; ``cea train --temperature``).

    Example
        >>> loss = SimCSEObjective(model, temperature=0.05)

    Under torchrun
        Gathered: each process scores its sentences against the global batch, as one process would.

    Citation
        Gao, Yao and Chen, "SimCSE: Simple Contrastive Learning of Sentence Embeddings", 2021.
    """

    def __init__(self, model, temperature: float = 0.05):
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

        SimCSEOptions(temperature)  # checks the value
        loss = MultipleNegativesRankingLoss(model, scale=1.0 / temperature, gather_across_devices=True)
        super().__init__(model, loss)
