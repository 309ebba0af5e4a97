"""Memories that give the CEA loss partners beyond the current batch, saved and restored with a run
(``state_tensors`` / ``load_state_tensors``). pytorch-metric-learning's ``CrossBatchMemory`` wraps a loss around a
queue; CEA needs the queue's contents for its own pair selection, so :class:`Bank` is kept here.
"""

from __future__ import annotations

import torch


class ClassMemory:
    """Latest detached embedding per label."""

    kind = "class"

    def __init__(self, num_labels: int, dim: int):
        self.embeddings = torch.zeros(num_labels, dim)
        self.filled = torch.zeros(num_labels, dtype=torch.bool)

    def partners(self, model=None) -> tuple[torch.Tensor, torch.Tensor]:
        labels = torch.nonzero(self.filled).flatten()
        return self.embeddings[labels], labels

    def update(self, embeddings: torch.Tensor, labels: torch.Tensor, features=None) -> None:
        # the last occurrence of each label in the batch wins ("the latest seen")
        self.embeddings, self.filled = self.embeddings.to(embeddings.device), self.filled.to(embeddings.device)
        self.embeddings[labels] = embeddings.detach()
        self.filled[labels] = True

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"embeddings": self.embeddings.cpu(), "filled": self.filled.cpu()}

    def load_state_tensors(self, state: dict[str, torch.Tensor]) -> None:
        self.embeddings, self.filled = state["embeddings"].clone(), state["filled"].clone()


class DatapointMemory:
    """Latest example (token ids) per label, re-encoded with the current weights when asked for partners, so gradients
    flow through both sides of a pair; in length-sorted chunks of ``chunk``, each padded to its own longest."""

    kind = "datapoint"

    def __init__(self, num_labels: int, max_length: int = 512, chunk: int = 16):
        self.max_length, self.chunk = max_length, chunk
        self.ids = torch.zeros(num_labels, max_length, dtype=torch.long)
        self.lengths = torch.zeros(num_labels, dtype=torch.long)

    def update(self, embeddings: torch.Tensor, labels: torch.Tensor, features=None) -> None:
        mask = features["attention_mask"]
        for row, label in enumerate(labels.tolist()):
            n = int(mask[row].sum())
            self.ids[label].zero_()
            self.ids[label, :n] = features["input_ids"][row, mask[row].bool()][: self.max_length].cpu()
            self.lengths[label] = n

    def partners(self, model) -> tuple[torch.Tensor, torch.Tensor]:
        # under DDP the trainer hands the loss the wrapper: encode through the module itself (a second
        # call of the wrapper in one step confuses DDP; the gradients meet in the same parameters)
        model = getattr(model, "module", model)
        labels = torch.nonzero(self.lengths).flatten()
        if len(labels) == 0:
            return torch.zeros(0, 0), labels
        device = next(model.parameters()).device
        with_types = "token_type_ids" in getattr(model.tokenizer, "model_input_names", ())
        perm = torch.argsort(self.lengths[labels], stable=True)
        parts = []
        for group in labels[perm].split(self.chunk):
            lengths = self.lengths[group]
            width = int(lengths.max())
            mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
            features = {"input_ids": self.ids[group, :width].to(device), "attention_mask": mask.to(device)}
            if with_types:
                features["token_type_ids"] = torch.zeros_like(features["input_ids"])
            parts.append(model(features)["sentence_embedding"])
        inverse = torch.argsort(perm)  # back to label order: row i of the result belongs to labels[i]
        return torch.cat(parts)[inverse.to(device)], labels.to(device)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"ids": self.ids, "lengths": self.lengths}

    def load_state_tensors(self, state: dict[str, torch.Tensor]) -> None:
        self.ids, self.lengths = state["ids"].clone(), state["lengths"].clone()


class Bank:
    """FIFO of the last ``size`` detached embeddings with their labels (cross-batch memory)."""

    kind = "bank"

    def __init__(self, size: int, dim: int):
        self.size = size
        self.embeddings = torch.zeros(size, dim)
        self.labels = torch.full((size,), -1, dtype=torch.long)
        self.pointer, self.count = 0, 0

    def partners(self, model=None) -> tuple[torch.Tensor, torch.Tensor]:
        return self.embeddings[: self.count], self.labels[: self.count]

    def update(self, embeddings: torch.Tensor, labels: torch.Tensor, features=None) -> None:
        embeddings, labels = embeddings.detach()[-self.size :], labels[-self.size :]
        self.embeddings, self.labels = self.embeddings.to(embeddings.device), self.labels.to(embeddings.device)
        slots = (self.pointer + torch.arange(len(labels), device=embeddings.device)) % self.size
        self.embeddings[slots] = embeddings
        self.labels[slots] = labels
        self.pointer = int((self.pointer + len(labels)) % self.size)
        self.count = min(self.size, self.count + len(labels))

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {
            "embeddings": self.embeddings.cpu(),
            "labels": self.labels.cpu(),
            "position": torch.tensor([self.pointer, self.count]),
        }

    def load_state_tensors(self, state: dict[str, torch.Tensor]) -> None:
        self.embeddings, self.labels = state["embeddings"].clone(), state["labels"].clone()
        self.pointer, self.count = (int(v) for v in state["position"])
