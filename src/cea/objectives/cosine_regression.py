"""Cosine regression on scored sentence pairs, STS fine-tuning (:class:`CosineRegressionObjective`)."""

from __future__ import annotations

from .base import LibraryObjective


class CosineRegressionObjective(LibraryObjective):
    """Cosine regression on scored sentence pairs (STS fine-tuning, also of truncated models; see Citation).

    What it expects
        Pairs of texts (two text columns) and a gold similarity mapped to [0, 1] by the declared score range (STS-B:
        ``score / 5``).

    What it returns
        ``mean over pairs of (cos(u, v) - gold) ** 2``: sentence-transformers' ``CosineSimilarityLoss`` (MSE) as is.

    When to use it
        To train on graded pairs (STS-B, SICK, word-pair files), and in ``cea sweep-layers`` to find the best depth.

    Options
        None besides the model.

    Example
        >>> loss = CosineRegressionObjective(model)
        >>> loss.compute_loss_from_embeddings(torch.stack([u, v]), torch.tensor([0.8]))

    Under torchrun
        Not gathered: each pair's term is its own, so DDP's average of the processes' means is the one-process loss.

    Citation
        Reimers and Gurevych, "Sentence-BERT", 2019; "Are ELECTRA's Sentence Embeddings Beyond Repair? The
        Case of Semantic Textual Similarity", Findings of EMNLP 2024, arXiv:2402.13130.
    """

    def __init__(self, model):
        from sentence_transformers.sentence_transformer.losses import CosineSimilarityLoss

        super().__init__(model, CosineSimilarityLoss(model))  # it takes the labels as floats itself
