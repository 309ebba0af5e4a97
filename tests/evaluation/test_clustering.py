"""The discovery figures: accuracy under the best one-to-one matching (by hand), NMI and ARI (scikit-learn's)."""

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from cea.errors import CeaError
from cea.evaluation.clustering import clustering_scores, matching


def accuracy(gold, clusters) -> float:
    return clustering_scores(gold, clusters)["accuracy"]


def test_accuracy_matches_a_hand_count():
    gold = ["a", "a", "a", "b", "b", "c", "c", "c"]
    clusters = [2, 2, 0, 0, 0, 1, 1, 2]
    # contingency (clusters x classes): 0 -> a1 b2; 1 -> c2; 2 -> a2 c1. Best one-to-one: 2->a (2), 0->b (2),
    # 1->c (2): 6 of 8 (any other matching holds fewer)
    assert matching(gold, clusters) == {0: "b", 1: "c", 2: "a"}
    assert accuracy(gold, clusters) == pytest.approx(75.0)


def test_matching_is_one_to_one_where_a_greedy_pick_is_not():
    # cluster 0 holds the most of both a and b: a greedy majority vote would give both to cluster 0's class
    gold = ["a"] * 3 + ["b"] * 2 + ["a"] * 2 + ["b"] * 1
    clusters = [0] * 5 + [1] * 3
    # 0->a, 1->b: 3 + 1 = 4; 0->b, 1->a: 2 + 2 = 4; both 4 of 8
    assert accuracy(gold, clusters) == pytest.approx(50.0)
    assert accuracy(["a", "a", "b"], [0, 0, 0]) == pytest.approx(200 / 3)  # one cluster, one class matched


def test_renamed_clusters_score_the_same_and_perfect_is_100():
    gold = np.array(["x", "y", "z", "x", "y", "z"])
    assert clustering_scores(gold, [5, 7, 9, 5, 7, 9]) == {"accuracy": 100.0, "nmi": 100.0, "ari": 100.0}
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 6, 300)
    clusters = np.where(rng.random(300) < 0.7, gold, rng.integers(0, 8, 300))
    perm = rng.permutation(8)
    assert accuracy(gold, clusters) == pytest.approx(accuracy(gold, perm[clusters]))


def test_nmi_and_ari_are_scikit_learns_in_percent():
    rng = np.random.default_rng(1)
    gold = rng.integers(0, 5, 200)
    clusters = np.where(rng.random(200) < 0.6, gold, rng.integers(0, 7, 200))
    scores = clustering_scores(gold, clusters)
    assert scores["nmi"] == pytest.approx(100 * normalized_mutual_info_score(gold, clusters), abs=1e-4)
    assert scores["ari"] == pytest.approx(100 * adjusted_rand_score(gold, clusters), abs=1e-4)


def test_more_clusters_than_classes_leave_some_texts_unmatched():
    assert accuracy(["a", "a", "b", "b"], [0, 1, 2, 3]) == pytest.approx(50.0)


def test_known_and_new_accuracy_under_the_same_matching():
    gold = ["k1", "k1", "k2", "k2", "n1", "n1", "n1", "n2"]
    clusters = [0, 0, 1, 1, 2, 2, 3, 3]  # 3 -> n2 (1) beats 3 -> n1 (1)? ties: n1 already has cluster 2 (2 texts)
    scores = clustering_scores(gold, clusters, known=["k1", "k2"])
    assert scores["known_accuracy"] == 100.0
    assert scores["new_accuracy"] == pytest.approx(75.0)  # n1: 2 of 3 in cluster 2; n2: 1 of 1 in cluster 3
    assert scores["accuracy"] == pytest.approx(87.5)


def test_bad_shapes_are_one_line_errors():
    with pytest.raises(CeaError, match="one length"):
        accuracy(["a", "b"], [0])
    with pytest.raises(CeaError, match="non-empty"):
        clustering_scores([], [])
