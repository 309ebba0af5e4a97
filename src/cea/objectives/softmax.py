"""Classification fine-tuning: a linear head with cross-entropy on the embedding (:class:`SoftmaxObjective`)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..encoders.embeddings import encode
from .base import EmbeddingObjective


class SoftmaxObjective(EmbeddingObjective):
    """Classification fine-tuning: a linear head with cross-entropy on the pooled embedding.

    What it expects
        Single texts with integer class labels.

    What it returns
        Cross-entropy of ``head(embedding / |embedding|)`` against the label (unit vectors, as the bundle's head
        sees). The head judges the run's dev (:meth:`linear_head`, a bundle's linear head) and is saved beside the
        encoder (``head.npz``); its accuracy is reported beside kNN accuracy.

    The head's start
        ``head_init="probe"`` (the default) starts the head from a logistic regression on the frozen encoder's
        embeddings of the training texts (:mod:`cea.knn.head`): linear probing, then fine-tuning (LP-FT), so the first
        steps move the encoder towards a classifier that already works; ``random`` barely learns in a few-shot run.
        It trains at lr 5e-5 for 3 epochs, or more on small sets (at least 800 steps, at most 10 epochs): ``cea
        train``'s objective for texts with one label (docs/decisions.md#objective).

    When to use it
        The baseline every study compares with (sentence-transformers' ``SoftmaxLoss`` classifies *pairs*).

    Options
        ``num_labels``: the number of classes (the head's outputs); ``head_init``: ``probe`` (default; fitted by
        :meth:`prepare` before training) or ``random`` (``cea train --head-init``).

    Example
        >>> loss = SoftmaxObjective(model, num_labels=6)
        >>> loss.prepare(texts, label_ids)  # the probe's weights, before training (cea train does it)

    Citation
        Devlin et al., "BERT", NAACL 2019 (fine-tuning with a classification head); Kumar et al., "Fine-Tuning can
        Distort Pretrained Features and Underperform Out-of-Distribution", ICLR 2022 (LP-FT).
    """

    def __init__(self, model, num_labels: int, head_init: str = "probe"):
        super().__init__(model)
        self.head = nn.Linear(model.get_embedding_dimension(), num_labels)
        self.head_init = head_init

    def compute_loss_from_embeddings(self, embeddings, labels, features=None) -> torch.Tensor:
        labels = labels.view(len(embeddings), -1)[:, 0].long()
        return F.cross_entropy(self.head(F.normalize(embeddings, dim=-1)), labels)

    def linear_head(self, classes):
        """The head as a bundle's (:class:`cea.knn.head.LinearHead`: the same ``normalize(x) @ W.T + b``), its rows
        named by ``classes`` (the label of each id): what judges the run's dev and ships with the encoder."""
        from ..knn.head import LinearHead

        return LinearHead(
            np.asarray(classes, dtype=str),
            self.head.weight.detach().cpu().numpy().astype(np.float32),
            self.head.bias.detach().cpu().numpy().astype(np.float32),
        )

    @torch.no_grad()
    def prepare(self, texts: list[str], label_ids, embeddings: np.ndarray | None = None) -> None:
        """With ``head_init="probe"``: set the head to a logistic regression fitted on the current (frozen) model's
        embeddings of ``texts`` (``embeddings`` where they were computed already, e.g. by ``cea fit``'s probe) with
        integer labels ``label_ids``; a label without texts keeps a zero row."""
        if self.head_init != "probe":
            return
        from ..knn.decision import Classifier  # inside: cea --help loads the objectives (their flags), not knn

        ids = np.asarray(label_ids)
        if embeddings is None:
            embeddings = encode(self.model, list(texts))
        fitted = Classifier(class_weight=None).fit(embeddings, ids.astype(str))  # the plain probe, every text as 1
        rows = fitted.classes.astype(int)
        weight, bias = np.zeros(tuple(self.head.weight.shape), np.float32), np.zeros(len(self.head.bias), np.float32)
        if len(rows) == 2:  # scikit-learn's one logit of the second class: softmax over (0, logit) is the same
            weight[rows[1]], bias[rows[1]] = fitted.coef[0], fitted.intercept[0]
        else:
            weight[rows], bias[rows] = fitted.coef, fitted.intercept
        self.head.weight.copy_(torch.from_numpy(weight))
        self.head.bias.copy_(torch.from_numpy(bias))

    def memory_state(self) -> dict[str, torch.Tensor]:
        """The head, saved beside each checkpoint (the trainer saves the encoder only)."""
        return {"head.weight": self.head.weight.detach().cpu(), "head.bias": self.head.bias.detach().cpu()}

    def load_memory_state(self, state: dict[str, torch.Tensor]) -> None:
        self.head.load_state_dict({"weight": state["head.weight"], "bias": state["head.bias"]})
