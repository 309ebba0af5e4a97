"""Unsupervised SimCSE: two dropout views of each sentence, InfoNCE over the batch (the base that miCSE,
arXiv:2211.04928, regularises).

What it expects
    Unlabelled sentences; the trainer feeds each sentence twice (two identical text columns), and
    the model's dropout makes the two embeddings differ.

What it returns
    ``cross_entropy(cos(z1_i, z2_j) / temperature, target i)``: each view must find its own twin
    among the batch's other sentences. This is sentence-transformers' ``MultipleNegativesRankingLoss``
    with ``scale = 1 / temperature`` (0.05 -> 20), which is exactly SimCSE when both columns hold the
    same text.

When to use it
    To adapt an encoder to a domain's sentences without labels; the baseline of miCSE.

Example
    >>> loss = SimCSEObjective(model, temperature=0.05)

Under torchrun
    Gathered: every process scores its sentences against the twins of the global batch
    (``gather_across_devices`` of sentence-transformers' loss), as one process would.

Citation
    Gao, Yao and Chen, "SimCSE: Simple Contrastive Learning of Sentence Embeddings", 2021.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .registry import Options, option, register


@dataclass
class SimCSEOptions(Options):
    temperature: float = option(0.05, "softmax temperature", above=0)


class SimCSEObjective(nn.Module):
    def __init__(self, model, temperature: float = 0.05):
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

        super().__init__()
        SimCSEOptions(temperature)  # checks the value
        self.model = model
        self.temperature = temperature
        self.loss = MultipleNegativesRankingLoss(model, scale=1.0 / temperature, gather_across_devices=True)

    def forward(self, sentence_features, labels=None) -> torch.Tensor:
        return self.loss(sentence_features, labels)

    def compute_loss_from_embeddings(self, embeddings, labels=None, features=None) -> torch.Tensor:
        """``embeddings`` of shape (2, B, D): the two views of each sentence."""
        return self.loss.compute_loss_from_embeddings(list(embeddings), labels)


SPEC = register("simcse", "sentences", SimCSEOptions, summary="unsupervised contrastive learning with dropout views",
                build=lambda model, num_labels, o, seed, data: SimCSEObjective(model, o.temperature))
