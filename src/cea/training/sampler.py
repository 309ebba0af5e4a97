"""P x K batches: P labels, K examples of each, so every batch holds positives and negatives.

sentence-transformers' ``GroupByLabelBatchSampler`` cannot set P and K (or say when a class is too small), so this
sampler is written here on the same base class. Its order depends only on (seed, epoch), so a resumed run continues
exactly where a killed one stopped.
"""

from __future__ import annotations

import functools
from collections import defaultdict

import torch
from sentence_transformers.base.sampler import DefaultBatchSampler

from ..errors import CeaError, OptionError


def check_pk(labels, k: int) -> None:
    """Raise a one-line error when P x K batches cannot be built from ``labels``: a single class. A class with fewer
    than ``k`` examples is no obstacle: it contributes what it has (:class:`PKBatchSampler`)."""
    if len(set(labels)) < 2:
        raise CeaError("the training data has a single class; label-aware objectives need at least two")


def group_of(label):
    """The label a text is batched by: its label; the first of ``[label, aux]`` (ints); for a text with several
    labels (a multi-hot row of floats) the first of its labels, so its batch holds K texts sharing that one."""
    if isinstance(label, list):
        return label.index(1.0) if label and isinstance(label[0], float) else label[0]
    return label


class PKBatchSampler(DefaultBatchSampler):
    """Batches of ``batch_size // k`` labels times ``k`` examples; epoch length ``len(dataset) // batch_size``.
    With fewer labels than that, every label is in every batch with as many examples as fit. A label with fewer than
    ``k`` examples (one to three, in a long tail) contributes all it has, each once, to a batch it is drawn into."""

    def __init__(
        self,
        dataset,
        batch_size: int,
        drop_last: bool = True,
        valid_label_columns=None,
        generator=None,
        seed: int = 0,
        k: int = 4,
    ):
        super().__init__(
            dataset,
            batch_size=batch_size,
            drop_last=drop_last,
            valid_label_columns=valid_label_columns,
            generator=generator,
            seed=seed,
        )
        if batch_size % k or batch_size // k < 2:
            raise OptionError("k_per_class", f"{k} must divide the batch size {batch_size} into 2 labels or more")
        labels = [group_of(lab) for lab in dataset["label"]]
        check_pk(labels, k)
        groups: dict = defaultdict(list)
        for i, label in enumerate(labels):
            groups[label].append(i)
        self.groups = [groups[label] for label in sorted(groups)]
        self.p = min(batch_size // k, len(self.groups))
        # fewer labels than P: take more examples of each, so batches keep their size
        self.k = max(k, min(batch_size // self.p, min(len(g) for g in self.groups)))
        self.num_batches = max(1, len(labels) // (self.p * self.k))

    def __iter__(self):
        g = torch.Generator().manual_seed(int(self.seed) + int(self.epoch))
        queues = [[] for _ in self.groups]
        for _ in range(self.num_batches):
            batch = []
            for label in torch.randperm(len(self.groups), generator=g)[: self.p].tolist():
                if len(queues[label]) < self.k:  # refill with a fresh permutation of the class
                    members = self.groups[label]
                    queues[label] += [members[i] for i in torch.randperm(len(members), generator=g).tolist()]
                batch += queues[label][: self.k]
                del queues[label][: self.k]
            yield batch

    def __len__(self) -> int:
        return self.num_batches


def pk_sampler_factory(k: int):
    """The callable sentence-transformers' ``batch_sampler`` argument accepts (picklable, as the
    trainer saves its arguments with every checkpoint)."""
    return functools.partial(PKBatchSampler, k=k)
