"""STS correlations and top-k retrieval on hand-made embeddings, against values worked out here."""

import numpy as np
import pytest

from cea.errors import CeaError
from cea.evaluation.retrieval import retrieval_scores
from cea.evaluation.similarity import sts_correlations


def test_sts_correlations():
    a = np.array([[1, 0], [1, 0], [1, 0], [1, 0]], float)
    b = np.array([[1, 0], [1, 1], [0, 1], [-1, 0.2]], float)  # cosines 1, 0.707, 0, -0.98
    gold = np.array([5.0, 3.0, 4.0, 0.0])
    got = sts_correlations(a, b, gold)
    # ranks of cos: 4 3 2 1; ranks of gold: 4 2 3 1 -> d = 0, 1, 1, 0 -> rho = 1 - 6*2/(4*15) = 0.8
    assert got["spearman"] == pytest.approx(80.0)
    cos = np.array([1, 1 / np.sqrt(2), 0, -1 / np.sqrt(1.04)])
    pearson = np.sum((cos - cos.mean()) * (gold - gold.mean())) / np.sqrt(
        np.sum((cos - cos.mean()) ** 2) * np.sum((gold - gold.mean()) ** 2)
    )
    assert got["pearson"] == pytest.approx(100 * pearson, abs=0.01)


# references on the unit circle at angles 0, 10, 20, 90, 100 degrees, labels a a b c c
ANGLES = np.radians([0, 10, 20, 90, 100])
REFS = np.stack([np.cos(ANGLES), np.sin(ANGLES)], 1)
LABELS = np.array(["a", "a", "b", "c", "c"])


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_top_k_accuracy_and_mrr(index):
    q = np.radians([19, 95, 12])
    queries = np.stack([np.cos(q), np.sin(q)], 1)
    # query 1 (19 deg): neighbours 20 b, 10 a, 0 a -> gold a at rank 2
    # query 2 (95 deg): 90 c / 100 c -> gold c at rank 1
    # query 3 (12 deg): 10 a, 20 b, 0 a -> gold b at rank 2
    got = retrieval_scores(REFS, LABELS, queries, np.array(["a", "c", "b"]), index=index)
    assert got["top1_accuracy"] == pytest.approx(100 / 3, abs=0.01)
    assert got["top2_accuracy"] == got["top3_accuracy"] == 100.0
    assert got["mrr"] == pytest.approx(100 * (0.5 + 1 + 0.5) / 3, abs=0.01)


def test_gold_beyond_the_depth_counts_zero_and_bad_input():
    q = np.radians([0])
    got = retrieval_scores(REFS, LABELS, np.stack([np.cos(q), np.sin(q)], 1), np.array(["c"]), ks=(1,), depth=2)
    assert got == {"top1_accuracy": 0.0, "mrr": 0.0}
    with pytest.raises(CeaError, match="unknown --index"):
        retrieval_scores(REFS, LABELS, REFS, LABELS, index="ivf")
    with pytest.raises(CeaError, match="dimensions"):
        retrieval_scores(REFS, LABELS, np.ones((1, 3)), LABELS[:1])
