"""Similarity judged against gold scores: Spearman and Pearson correlation of cosine with the gold."""

from __future__ import annotations

import numpy as np

from ..encoders.embeddings import encode


def sts_correlations(emb1, emb2, gold) -> dict[str, float]:
    """Spearman and Pearson correlation (x 100) between cos(emb1_i, emb2_i) and gold_i."""
    from scipy.stats import pearsonr, spearmanr

    a, b = np.asarray(emb1, dtype=np.float64), np.asarray(emb2, dtype=np.float64)
    cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    gold = np.asarray(gold, dtype=np.float64)
    return {
        "spearman": round(100 * float(spearmanr(cos, gold).statistic), 2),
        "pearson": round(100 * float(pearsonr(cos, gold).statistic), 2),
    }


def evaluate_pairs(model, frame, batch_size: int = 64) -> dict[str, float]:
    """Encode a similarity split (text1, text2, score) and correlate cosine with the gold scores."""
    return sts_correlations(
        encode(model, frame["text1"], batch_size), encode(model, frame["text2"], batch_size), frame["score"].to_numpy()
    )
