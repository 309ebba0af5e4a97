"""A bag-of-embeddings encoder trained from scratch: word vectors averaged.

The model of the "classification vs metric learning" study (:mod:`cea.evaluation.geometry`,
``nn.EmbeddingBag(vocab, 32)`` over a basic English tokenisation), as a sentence-transformers model with one
``StaticEmbedding`` module over a word vocabulary built from the training texts, so it trains, saves and loads like
any other cea encoder. Name it ``bag`` or ``bag:DIM`` (e.g. ``--model bag:32``).
"""

from __future__ import annotations

import re
from collections import Counter

import torch

from ..errors import CeaError

UNK, PAD = "[UNK]", "[PAD]"


def parse_bag(name: str) -> int | None:
    """``"bag"`` -> 32, ``"bag:64"`` -> 64; any other name -> None."""
    if not (match := re.fullmatch(r"bag(?::(\d+))?", name.strip())):
        return None
    dim = int(match.group(1) or 32)
    if dim < 1:
        raise CeaError(f"--model {name}: the embedding size must be at least 1")
    return dim


def _tokenizer(vocab: dict[str, int]):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()  # words and punctuation apart
    return tok


def build_bag_encoder(
    texts, dim: int = 32, min_count: int = 1, max_vocab: int | None = 200_000, seed: int = 0, device: str | None = None
):
    """A fresh bag-of-embeddings SentenceTransformer, its vocabulary from ``texts``, on ``device`` (None: auto)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import StaticEmbedding

    probe = _tokenizer({UNK: 0, PAD: 1})
    counts = Counter(
        w for text in texts for w, _ in probe.pre_tokenizer.pre_tokenize_str(probe.normalizer.normalize_str(str(text)))
    )
    words = [w for w, c in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0])) if c >= min_count][:max_vocab]
    if not words:
        raise CeaError("no words to build a vocabulary from; the training texts are empty")
    vocab = {UNK: 0, PAD: 1, **{w: i + 2 for i, w in enumerate(words)}}
    generator = torch.Generator().manual_seed(seed)
    weights = torch.rand(len(vocab), dim, generator=generator) - 0.5  # uniform in [-0.5, 0.5], as the study
    return SentenceTransformer(modules=[StaticEmbedding(_tokenizer(vocab), embedding_weights=weights)], device=device)
