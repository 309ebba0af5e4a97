"""Cosine regression on scored sentence pairs (truncated-model STS fine-tuning: ELECTRA's
last layers are too specialised for replaced-token detection, and truncating before fine-tuning
improves STS-B, "Are ELECTRA's Sentence Embeddings Beyond Repair?", Findings of EMNLP 2024).

What it expects
    Pairs of texts (two text columns) and a gold similarity already mapped to [0, 1] by the data
    set's declared score range (STS-B: ``score / 5``).

What it returns
    ``mean over pairs of (cos(u, v) - gold) ** 2``: sentence-transformers' ``CosineSimilarityLoss``
    (an MSE), used as it is.

When to use it
    To train similarity embeddings on graded pairs (STS-B, SICK, word-pair similarity files), and in
    ``cea sweep-layers`` to find the depth at which a truncated model is best.

Example
    >>> loss = CosineRegressionObjective(model)
    >>> loss.compute_loss_from_embeddings(torch.stack([u, v]), torch.tensor([0.8]))

Under torchrun
    Not gathered: each pair's term depends on that pair alone, so the mean over a process's pairs,
    averaged over processes by DDP, is the one-process loss (exactly, for equal shares).

Citation
    Reimers and Gurevych, "Sentence-BERT", 2019; "Are ELECTRA's Sentence Embeddings Beyond Repair? The
    Case of Semantic Textual Similarity", Findings of EMNLP 2024, arXiv:2402.13130.
"""

from __future__ import annotations

import torch
from torch import nn

from .registry import Options, register


class CosineRegressionObjective(nn.Module):
    def __init__(self, model):
        from sentence_transformers.sentence_transformer.losses import CosineSimilarityLoss

        super().__init__()
        self.model = model
        self.loss = CosineSimilarityLoss(model)

    def forward(self, sentence_features, labels: torch.Tensor) -> torch.Tensor:
        return self.loss(sentence_features, labels.float())

    def compute_loss_from_embeddings(self, embeddings, labels, features=None) -> torch.Tensor:
        """``embeddings`` of shape (2, B, D): the first and the second text of each pair."""
        return self.loss.compute_loss_from_embeddings(list(embeddings), labels.float())


SPEC = register("cosine-regression", "pairs", Options, summary="MSE of cosine against graded similarity",
                build=lambda model, num_labels, o, seed, data: CosineRegressionObjective(model))
