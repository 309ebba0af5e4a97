"""The global batch under ``torchrun`` / ``accelerate launch``: every process sees every process's examples.

Objectives that compare examples across the batch (cea's pairs and memories, supcon, triplet mining) would otherwise
only compare within each process's share. :func:`gather_batch` all-gathers the embeddings *with their gradients*, the
labels and, for the datapoint memory, the token ids, in rank order, so every process computes one process's loss on
the global batch; each process's embeddings receive ``world_size`` times their gradient share, which DDP's averaging
turns back into the one-process gradient, and memories and an objective's own parameters stay identical everywhere.
The objectives outside :class:`cea.objectives.base.EmbeddingObjective` say under "Under torchrun" whether they
gather. pytorch-metric-learning's ``DistributedLossWrapper`` gathers only for its own losses and torch's public
gather with gradients is deprecated, hence the few lines of autograd here; batches of different sizes are padded.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


class _AllGather(torch.autograd.Function):
    """All-gather along dim 0 (equal sizes); the backward sums the gradients and keeps this rank's slice."""

    @staticmethod
    def forward(ctx, x):
        parts = [torch.empty_like(x) for _ in range(world_size())]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad)  # every process's loss reaches every slice
        rows = len(grad) // world_size()
        return grad[dist.get_rank() * rows : (dist.get_rank() + 1) * rows]


def gather_with_grad(x: torch.Tensor) -> torch.Tensor:
    """Concatenate ``x`` of every process along dim 0 (rank order; any trailing shape), keeping the
    autograd graph where ``x`` has one (labels and token ids gather the same way, without)."""
    if world_size() == 1:
        return x
    counts = [torch.zeros(1, dtype=torch.long, device=x.device) for _ in range(world_size())]
    dist.all_gather(counts, torch.tensor([len(x)], device=x.device))  # every process's rows
    sizes = [int(n) for n in counts]
    rows = max(sizes)  # all_gather takes parts of one size: each padded to the longest
    gathered = _AllGather.apply(F.pad(x, (0, 0) * (x.dim() - 1) + (0, rows - len(x))) if rows > len(x) else x)
    return torch.cat([gathered[r * rows : r * rows + n] for r, n in enumerate(sizes)])


def gather_features(features: dict) -> dict:
    """Token ids, attention masks (and token types) of every process, padded to one width."""
    keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in features]
    width = torch.tensor([features["input_ids"].shape[1]], device=features["input_ids"].device)
    dist.all_reduce(width, op=dist.ReduceOp.MAX)
    return {k: gather_with_grad(F.pad(features[k], (0, int(width) - features[k].shape[1]))) for k in keys}


def gather_batch(embeddings: torch.Tensor, labels: torch.Tensor, features: dict | None = None):
    """``(embeddings, labels, features)`` of the global batch; unchanged in a single process."""
    if world_size() == 1:
        return embeddings, labels, features
    return (
        gather_with_grad(embeddings),
        gather_with_grad(labels),
        gather_features(features) if features is not None else None,
    )
