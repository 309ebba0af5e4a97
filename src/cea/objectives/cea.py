"""CEA: class-driven embedding alignment by pair regression on cosine similarity (:class:`CEALoss`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..errors import OptionError
from .base import EmbeddingObjective
from .catalog import CEAOptions
from .memory import Bank, ClassMemory, DatapointMemory


def cea_pair_loss(
    anchors: torch.Tensor,
    anchor_labels: torch.Tensor,
    partners: torch.Tensor,
    partner_labels: torch.Tensor,
    pairs: str = "all",
    reduction: str = "mean",
    negative_target: float = 0.0,
    self_block: bool = False,
    fallback=None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The CEA loss of anchors against partners. ``self_block=True``: the first ``len(anchors)`` partners are the
    anchors themselves (self pairs skipped; with ``pairs="all"`` each unordered in-batch pair counts once).
    ``fallback``: a second partner set (embeddings, labels) for anchors with no positive or no negative among
    ``partners`` (the mixed memory). Labels are class ids, or multi-hot rows (Jaccard targets; no ``fallback``)."""
    n = len(anchors)
    if n == 0 or len(partners) == 0:  # no partners: an empty memory (the first step)
        return anchors.sum() * 0
    cos = F.normalize(anchors, dim=-1) @ F.normalize(partners, dim=-1).T
    overlap = label_overlap(anchor_labels, partner_labels).to(cos.dtype)
    positive = overlap > 0
    valid, once = torch.ones_like(positive), torch.ones_like(positive)
    if self_block:
        valid[:, :n] &= ~torch.eye(n, dtype=torch.bool, device=anchors.device)
        once[:, :n] = torch.triu(torch.ones(n, n, dtype=torch.bool, device=anchors.device), 1)
    chosen = (
        valid & once if pairs == "all" else _sample(valid & positive, generator) | _sample(valid & ~positive, generator)
    )
    target = negative_target + (1 - negative_target) * overlap
    parts = [((cos - target) ** 2, chosen, positive)]
    if fallback is not None and len(fallback[0]):
        lacks_pos, lacks_neg = ~(valid & positive).any(1), ~(valid & ~positive).any(1)
        need = lacks_pos | lacks_neg
        if need.any():
            fb_cos = F.normalize(anchors[need], dim=-1) @ F.normalize(fallback[0], dim=-1).T
            fb_pos = anchor_labels[need][:, None] == fallback[1][None, :]
            wanted = (fb_pos & lacks_pos[need][:, None]) | (~fb_pos & lacks_neg[need][:, None])
            if pairs == "sampled":
                wanted = _sample(wanted & fb_pos, generator) | _sample(wanted & ~fb_pos, generator)
            fb_target = torch.where(fb_pos, torch.ones_like(fb_cos), torch.full_like(fb_cos, negative_target))
            parts.append(((fb_cos - fb_target) ** 2, wanted, fb_pos))
    return _reduce(parts, reduction)


def _reduce(parts, reduction: str) -> torch.Tensor:
    """The mean or sum of the squared errors each ``(errors, chosen, positive)`` part chooses, or the mean of the
    positive and the negative pairs' means (``balanced``), as masked sums (indexing by a mask makes the host wait for
    the GPU); 0 where no pair is chosen."""

    def total(pick):
        return sum((errors * pick(chosen, positive)).sum() for errors, chosen, positive in parts)

    def count(pick):
        return sum(pick(chosen, positive).sum() for _, chosen, positive in parts)

    if reduction == "balanced":  # positives and negatives weigh the same, however many of each
        sides = [lambda c, p: c & p, lambda c, p: c & ~p]
        present = [(count(side) > 0).float() for side in sides]
        means = [total(side) / count(side).clamp(min=1) for side in sides]
        return sum(m * h for m, h in zip(means, present)) / sum(present).clamp(min=1)

    def every(chosen, positive):  # every chosen pair, whatever its side
        return chosen

    return total(every) / count(every).clamp(min=1) if reduction == "mean" else total(every)


def label_overlap(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The overlap of each pair of label sets: 1 or 0 for class ids, the Jaccard index of multi-hot rows (empty: 0)."""
    if a.dim() == 1:
        return (a[:, None] == b[None, :]).float()
    a, b = a.float(), b.float()
    inter = a @ b.T
    return inter / (a.sum(1)[:, None] + b.sum(1)[None, :] - inter).clamp(min=1)  # |A & B| / |A | B|


def _sample(candidates: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One uniformly random True per row of ``candidates`` (rows without any stay empty); the draw comes from
    the objective's seeded CPU generator, so the pairs are the same on every device."""
    noise = torch.rand(candidates.shape, generator=generator, device="cpu").to(candidates.device)
    pick = torch.zeros_like(candidates)
    pick[torch.arange(len(candidates), device=candidates.device), noise.masked_fill(~candidates, -1.0).argmax(1)] = True
    return pick & candidates.any(1, keepdim=True)  # rows without a candidate stay empty


class CEALoss(EmbeddingObjective):
    """CEA: class-driven embedding alignment by pair regression on cosine similarity.

    What it expects
        Single texts with integer class labels; batches of several labels (the P x K sampler) unless a memory
        supplies the partners. Also multi-hot label rows (texts with several labels), without memories.

    What it returns
        ``mean`` (default) or ``sum`` over the selected pairs (a, b) of ``(cos(e_a, e_b) - t)^2`` with ``t = 1`` for
        the same label and ``t = negative_target`` (0: orthogonal, not opposite) otherwise; no margin, no
        temperature. With multi-hot labels ``t = negative_target + (1 - negative_target) * |A & B| / |A | B|``
        (Jaccard), a pair positive when the sets share a label. ``balanced`` averages the positive and the negative
        pairs' means, so the many negatives of an all-pairs batch do not drown the few positives.

    Pairs and memories
        ``pairs="all"`` (the default, more accurate than sampled: docs/decisions.md#cea) uses every (anchor, partner)
        pair, ``"sampled"`` (the CEA study's) one random positive and one random negative per anchor. Partners come
        from the batch (``memory="none"``), a memory only (``class``, ``datapoint``), the batch and the memory where the
        batch lacks a partner (``mixed``), or the batch plus a FIFO ``bank`` (:mod:`cea.objectives.memory`).

    When to use it
        Classification by nearest neighbours, where a class should sit together and other classes be unrelated
        rather than opposite. In the CEA study it matched but did not beat classification fine-tuning.

    Options
        ``num_labels`` (the class and datapoint memories' slots); ``pairs``, ``memory``, ``memory_size`` (the bank's,
        4096), ``reduction``, ``negative_target`` (0): :class:`CEAOptions`, ``cea train``'s ``--pairs``, ``--memory``
        and so on; ``seed``: the generator of sampled pairs; ``multi_label``: labels are multi-hot rows.

    Example
        >>> loss = CEALoss(model, num_labels=77, pairs="all", memory="bank", memory_size=4096)
        >>> loss = CEALoss(model, num_labels=28, multi_label=True)  # labels: multi-hot rows
        >>> trainer = SentenceTransformerTrainer(model=model, train_dataset=ds, loss=loss, ...)

    Citation
        CEA, flairNLP/flair on GitHub, branch embedding-alignment (code and result tables, unpublished);
        the bank follows Wang et al., "Cross-Batch Memory for Embedding Learning", CVPR 2020.
    """

    def __init__(
        self,
        model,
        num_labels: int,
        pairs: str = "all",
        memory: str = "none",
        memory_size: int = 4096,
        reduction: str = "mean",
        negative_target: float = 0.0,
        seed: int = 0,
        multi_label: bool = False,
    ):
        super().__init__(model)
        CEAOptions(pairs, memory, memory_size, reduction, negative_target)  # checks the values
        if multi_label and memory != "none":
            raise OptionError(
                "memory", f"{memory} holds one label per text; texts with several labels train with memory none"
            )
        self.multi_label = multi_label  # labels are multi-hot rows: targets by the Jaccard overlap
        self.pairs, self.memory_kind, self.reduction, self.negative_target = pairs, memory, reduction, negative_target
        self.needs_features = memory == "datapoint"
        self.memory, dim = None, model.get_embedding_dimension()  # memory none: partners from the batch alone
        if memory in ("class", "mixed"):
            self.memory = ClassMemory(num_labels, dim)
        elif memory == "datapoint":
            self.memory = DatapointMemory(num_labels, model.max_seq_length)
        elif memory == "bank":
            self.memory = Bank(memory_size, dim)
        self.generator = torch.Generator().manual_seed(seed)

    def compute_loss_from_embeddings(self, embeddings, labels, features=None) -> torch.Tensor:
        labels = labels.view(len(embeddings), -1) if self.multi_label else labels.view(-1).long()
        kw = dict(
            pairs=self.pairs, reduction=self.reduction, negative_target=self.negative_target, generator=self.generator
        )
        if self.memory is None:
            return cea_pair_loss(embeddings, labels, embeddings, labels, self_block=True, **kw)
        mem_emb, mem_labels = self.memory.partners(self.model)
        if self.memory_kind in ("class", "datapoint"):
            loss = cea_pair_loss(embeddings, labels, mem_emb, mem_labels, **kw)
        elif self.memory_kind == "mixed":
            loss = cea_pair_loss(
                embeddings, labels, embeddings, labels, self_block=True, fallback=(mem_emb, mem_labels), **kw
            )
        else:  # bank: the batch and the queue together
            partners = torch.cat([embeddings, mem_emb.to(embeddings.device)])
            partner_labels = torch.cat([labels, mem_labels.to(labels.device)])
            loss = cea_pair_loss(embeddings, labels, partners, partner_labels, self_block=True, **kw)
        self.memory.update(embeddings, labels, features)
        return loss

    def memory_state(self) -> dict[str, torch.Tensor]:
        memory = self.memory.state_tensors() if self.memory is not None else {}
        return {"generator": self.generator.get_state(), **{f"memory.{k}": v for k, v in memory.items()}}

    def load_memory_state(self, state: dict[str, torch.Tensor]) -> None:
        self.generator.set_state(state["generator"])
        if self.memory is not None:
            self.memory.load_state_tensors({k[7:]: v for k, v in state.items() if k.startswith("memory.")})

    def get_config_dict(self) -> dict:
        return {
            "pairs": self.pairs,
            "memory": self.memory_kind,
            "reduction": self.reduction,
            "negative_target": self.negative_target,
        }
