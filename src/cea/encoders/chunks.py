"""Run an encoder over a padded batch in length-sorted chunks, each cut to its own longest text.

A training batch is padded to its longest text, and attention costs grow with that width. Sorting the rows by
length, cutting them into chunks and dropping each chunk's all-padding columns computes the same embeddings on far
fewer tokens; the embeddings are put back in batch order, with gradients. sentence-transformers sorts by length when
it encodes for inference but not in training: hence this module. On a GPU a call costs far more than a batch's
padding, so ``"auto"`` chunks only on the CPU (docs/decisions.md#precision).
"""

from __future__ import annotations

import torch

from .embeddings import least_cost_passes

# tokens' worth of time one more encoder call costs ("auto" chunks; measured: docs/records)
CALL_COST = 96


def plan_chunks(lengths, chunk_size: int | str) -> list[tuple[int, int]]:
    """(start, end) of each chunk over ``lengths`` sorted ascending: ``chunk_size`` rows each, or for ``"auto"`` the
    boundaries that minimise padded tokens plus :data:`CALL_COST` per chunk
    (:func:`cea.encoders.embeddings.least_cost_passes`, by dynamic programming)."""
    n = len(lengths)
    if chunk_size != "auto":
        return [(start, min(start + chunk_size, n)) for start in range(0, n, chunk_size)]
    return [(int(rows[0]), int(rows[-1]) + 1) for rows in least_cost_passes(lengths, CALL_COST, n)]


def forward_in_chunks(model, features: dict, chunk_size: int | str | None) -> torch.Tensor:
    """``model(features)["sentence_embedding"]``, computed a chunk of rows at a time in length order: ``chunk_size``
    rows, or ``"auto"`` (:func:`plan_chunks`, on the CPU only); otherwise, or without an attention mask, one call."""
    mask = features.get("attention_mask")
    n = 0 if mask is None else len(mask)
    if (
        not chunk_size
        or mask is None
        or (chunk_size != "auto" and chunk_size >= n)
        or (chunk_size == "auto" and mask.device.type != "cpu")
    ):
        return model(features)["sentence_embedding"]
    lengths = mask.sum(1)
    order = torch.argsort(lengths, stable=True)
    parts = []
    for start, end in plan_chunks(lengths[order].tolist(), chunk_size):
        rows = order[start:end]
        keep = mask[rows].any(0)  # the columns some row of the chunk uses (left or right padding alike)
        parts.append(model({k: _cut(v, rows, keep, mask) for k, v in features.items()})["sentence_embedding"])
    return torch.cat(parts)[torch.argsort(order)]


def _cut(value, rows, keep, mask):
    """A feature cut to the chunk's ``rows`` (and its ``keep`` columns where it has one per token); others as is."""
    if not isinstance(value, torch.Tensor) or value.dim() == 0 or len(value) != len(mask):
        return value
    return value[rows][:, keep] if value.shape[:2] == mask.shape else value[rows]
