"""Run an encoder over a padded batch in length-sorted chunks, each cut to its own longest text.

A P x K training batch is padded to its longest text (banking77: about 46 tokens for a mean of 16),
and attention costs grow with that width. Sorting the rows by length, cutting them into chunks and
dropping each chunk's all-padding columns computes the same embeddings (padding is masked out of
attention and pooling) on far fewer tokens; the chunks' embeddings are put back in batch order, so
the loss still sees the whole batch, with gradients. sentence-transformers sorts by length when it
encodes for inference but not in training, and the trainer pads per batch: hence this module.
"""

from __future__ import annotations

import torch


def forward_in_chunks(model, features: dict, chunk_size: int | None) -> torch.Tensor:
    """``model(features)["sentence_embedding"]``, computed ``chunk_size`` rows at a time in length order
    (None, a chunk as large as the batch, or inputs without an attention mask such as the bag of
    embeddings' token ids: one call, as before)."""
    mask = features.get("attention_mask")
    n = 0 if mask is None else len(mask)
    if not chunk_size or chunk_size >= n:
        return model(features)["sentence_embedding"]
    order = torch.argsort(mask.sum(1), stable=True)
    parts = []
    for start in range(0, n, chunk_size):
        rows = order[start:start + chunk_size]
        keep = mask[rows].any(0)  # the columns some row of the chunk uses (left or right padding alike)
        chunk = {k: v[rows][:, keep] if _per_token(v, mask) else v[rows] if _per_row(v, n) else v
                 for k, v in features.items()}
        parts.append(model(chunk)["sentence_embedding"])
    return torch.cat(parts)[torch.argsort(order)]


def _per_token(value, mask) -> bool:
    return isinstance(value, torch.Tensor) and value.shape[:2] == mask.shape


def _per_row(value, n: int) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() > 0 and len(value) == n
