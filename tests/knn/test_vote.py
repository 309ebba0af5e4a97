"""The one kNN vote: majority or distance weights, ties to the nearest or the smallest, missing neighbours."""

import numpy as np
import pytest

from cea.errors import CeaError
from cea.knn.vote import vote


def test_majority_ties_and_missing_neighbours():
    labels = np.array([[1, 0, 1, 0], [2, 0, 0, 1], [1, -1, -1, -1], [0, 2, 2, -1]])
    decided, scores = vote(labels, 3)
    assert decided.tolist() == [1, 0, 1, 2]  # a 2-2 tie goes to the nearest: 1
    assert scores.tolist() == [[2, 2, 0], [2, 1, 1], [0, 1, 0], [1, 0, 2]]
    assert vote(labels, 3, tie_break="smallest")[0].tolist() == [0, 0, 1, 2]


def test_distance_weights():
    labels = np.array([[0, 1, 1], [0, 1, 1]])
    dist = np.array([[0.1, 0.3, 0.3], [0.0, 0.1, 0.1]])
    decided, scores = vote(labels, 2, dist, weights="distance")
    np.testing.assert_allclose(scores, [[10, 2 * 10 / 3], [1, 0]])  # distance 0 takes the whole vote
    assert decided.tolist() == [0, 0]
    with pytest.raises(CeaError, match="unknown weights 'cosine'"):
        vote(labels, 2, weights="cosine")
