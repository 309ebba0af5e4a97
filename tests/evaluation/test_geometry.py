"""Cohesion, separation and the imbalance indicators on hand-made embeddings, against values
computed here pair by pair."""

import itertools

import numpy as np
import pytest

from cea.errors import CeaError
from cea.evaluation.geometry import analyze, cohesion, imbalance_indicators, separation, smallest_labels

# label a: three vectors near the x axis; b: two near the y axis; c: one vector (no pair)
X = np.array([[1, 0], [2, 0.2], [1, -0.1], [0, 1], [0.3, 2], [-1, -1]], float)
Y = np.array(["a", "a", "a", "b", "b", "c"])


def _cos(u, v):
    return float(np.dot(u, v) / np.linalg.norm(u) / np.linalg.norm(v))


def _pair_mean(rows):
    return np.mean([_cos(X[i], X[j]) for i, j in itertools.combinations(rows, 2)])


def _centroid(label):
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    return unit[Y == label].mean(0)


def test_cohesion_is_the_mean_pair_cosine_per_label():
    got = cohesion(X, Y)
    assert set(got["per_label"]) == {"a", "b"}  # c has a single example
    assert got["per_label"]["a"] == pytest.approx(_pair_mean([0, 1, 2]))
    assert got["per_label"]["b"] == pytest.approx(_pair_mean([3, 4]))
    assert got["mean"] == pytest.approx((_pair_mean([0, 1, 2]) + _pair_mean([3, 4])) / 2)


def test_separation_between_centroids():
    got = separation(X, Y)
    pairs = {(p, q): _cos(_centroid(p), _centroid(q)) for p, q in itertools.combinations("abc", 2)}
    assert got["mean"] == pytest.approx(np.mean(list(pairs.values())))
    assert got["max"] == pytest.approx(max(pairs.values()))
    assert got["nearest"]["c"]["label"] == max("ab", key=lambda p: _cos(_centroid(p), _centroid("c")))


def test_imbalance_indicators():
    got = imbalance_indicators(X, Y, ["b", "c"])
    assert got["small_cohesion"] == pytest.approx(_pair_mean([3, 4]))  # c has no pair
    assert got["small_to_large"] == pytest.approx(np.mean([_cos(_centroid(s), _centroid("a")) for s in "bc"]))
    assert got["small_to_small"] == pytest.approx(_cos(_centroid("b"), _centroid("c")))
    assert smallest_labels(Y, 2) == ["c", "b"]
    assert analyze(X, Y, ["c"])["imbalance"]["small_labels"] == ["c"]
    with pytest.raises(CeaError, match="small label\\(s\\) z not in the data"):
        imbalance_indicators(X, Y, ["z"])
    with pytest.raises(CeaError, match="every label is marked small"):
        imbalance_indicators(X, Y, ["a", "b", "c"])
