"""The bases of the objectives. Labels of shape (B, 2) carry a second (auxiliary) label column. An
:class:`EmbeddingObjective` encodes its batch in length-sorted chunks (``chunk_size``, :mod:`cea.encoders.chunks`),
scores it in fp32 outside autocast, and under ``torchrun`` scores the global batch (:mod:`cea.objectives.gather`)."""

from __future__ import annotations

import abc

import torch
from torch import nn

from ..encoders.chunks import forward_in_chunks
from .gather import gather_batch


class EmbeddingObjective(nn.Module, abc.ABC):
    """Base: embed the texts with the model, then score the embeddings."""

    needs_features = False  # True where the loss reads the token ids (the datapoint memory)
    chunk_size: int | str | None = None  # rows per length-sorted chunk of the forward pass, "auto" or None (one pass)

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, sentence_features, labels: torch.Tensor) -> torch.Tensor:
        features = sentence_features[0]
        embeddings = forward_in_chunks(self.model, features, self.chunk_size).float()
        embeddings, labels, gathered = gather_batch(embeddings, labels, features if self.needs_features else None)
        features = gathered if self.needs_features else features
        with torch.autocast(embeddings.device.type, enabled=False):  # the loss and the memories in fp32
            return self.compute_loss_from_embeddings(embeddings, labels, features)

    @abc.abstractmethod
    def compute_loss_from_embeddings(self, embeddings, labels, features=None) -> torch.Tensor:
        """The loss of a batch of embeddings; ``features`` are the tokenised inputs (for memories)."""


class PMLObjective(EmbeddingObjective):
    """A pytorch-metric-learning loss (and optional miner) as a sentence-transformers loss. ``multi_label``: the
    labels are multi-hot rows; a pair is positive where the texts share a label, else negative (``indices_tuple``)."""

    def __init__(self, model, loss, miner=None, multi_label: bool = False):
        super().__init__(model)
        self.loss_fn, self.miner, self.multi_label = loss, miner, multi_label

    def compute_loss_from_embeddings(self, embeddings, labels, features=None) -> torch.Tensor:
        if self.multi_label:
            return self.loss_fn(embeddings, indices_tuple=shared_label_pairs(labels.view(len(embeddings), -1)))
        labels = labels.view(len(embeddings), -1)[:, 0].long()
        return self.loss_fn(embeddings, labels, self.miner(embeddings, labels) if self.miner is not None else None)


def shared_label_pairs(multi_hot: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """pytorch-metric-learning's ``(anchor, positive, anchor, negative)`` pair indices of a batch of multi-hot
    label rows: positives share at least one label (self pairs left out), negatives share none."""
    rows = multi_hot.float()
    shared = (rows @ rows.T) > 0
    eye = torch.eye(len(rows), dtype=torch.bool, device=rows.device)
    return (*torch.nonzero(shared & ~eye, as_tuple=True), *torch.nonzero(~shared, as_tuple=True))


class LibraryObjective(nn.Module):
    """A sentence-transformers loss used as it is, on texts in two columns (pairs, or two views)."""

    def __init__(self, model, loss):
        super().__init__()
        self.model, self.loss = model, loss

    def forward(self, sentence_features, labels=None) -> torch.Tensor:
        return self.loss(sentence_features, labels)

    def compute_loss_from_embeddings(self, embeddings, labels=None, features=None) -> torch.Tensor:
        """``embeddings`` of shape (2, B, D): the first and the second text of each row."""
        return self.loss.compute_loss_from_embeddings(list(embeddings), labels)
