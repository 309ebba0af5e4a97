"""cea.discover.neighbours: the neighbour lists, the positive pairs of a step, and the contrastive space (seeded,
unit rows, a text's nearest more often of its class), bad options refused."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from cea.discover.neighbours import contrast_neighbours, nearest_neighbours, positive_pairs
from cea.errors import OptionError


def test_nearest_neighbours_are_the_closest_by_cosine_without_the_row_itself():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 5))
    near = nearest_neighbours(x, 3)
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    cos = u @ u.T
    np.fill_diagonal(cos, -np.inf)
    expected = np.argsort(-cos, axis=1)[:, :3]
    assert near.shape == (40, 3)
    assert all(set(a) == set(b) for a, b in zip(near.tolist(), expected.tolist()))
    assert nearest_neighbours(x[:3], 5).shape == (3, 2)  # at most the other rows


def test_positive_pairs_are_drawn_neighbours_listed_neighbours_and_one_known_class():
    # rows 0, 1 are the anchors, 2, 3 their drawn neighbours; text 5 (row 1) lists text 7 (row 3) as a neighbour,
    # text 4 (row 0) and text 9 (row 2) are labelled "a" (class 0), the rest unlabelled
    rows = np.array([4, 5, 9, 7])
    neighbours = np.full((10, 2), 0)
    neighbours[4] = [1, 2]
    neighbours[5] = [7, 1]
    neighbours[9] = [1, 3]
    neighbours[7] = [2, 3]
    classes = np.full(10, -1)
    classes[[4, 9]] = 0
    a1, p, a2, n = positive_pairs(rows, neighbours, classes, m=2)
    positive = set(zip(a1.tolist(), p.tolist()))
    # the anchor / drawn pairs (0, 2), (1, 3); row 1 lists row 3's text; rows 0 and 2 share a class
    assert positive == {(0, 2), (2, 0), (1, 3), (3, 1)}
    negative = set(zip(a2.tolist(), n.tolist()))
    assert negative == {(i, j) for i in range(4) for j in range(4) if i != j} - positive
    classes[7] = 0  # now row 3 shares the class too: (0, 3), (2, 3) join
    a1, p, _, _ = positive_pairs(rows, neighbours, classes, m=2)
    assert {(0, 3), (3, 0), (2, 3), (3, 2)} <= set(zip(a1.tolist(), p.tolist()))


def _noisy_blobs(seed):
    """Eight classes in 4 informative dimensions, hidden among 28 noisy ones: k-means on the raw rows confuses them."""
    x, y = make_blobs(n_samples=480, centers=8, n_features=4, cluster_std=1.0, center_box=(-6, 6), random_state=seed)
    rng = np.random.default_rng(seed)
    x = np.hstack([x, rng.normal(scale=2.5, size=(len(x), 28))]).astype(np.float32)
    labels = [f"c{t}" if t < 4 and rng.random() < 0.2 else None for t in y]
    return x, y, labels


def test_the_contrastive_space_is_seeded_and_unit_length():
    x, _, labels = _noisy_blobs(0)
    a = contrast_neighbours(x, labels, epochs=2, seed=3)
    b = contrast_neighbours(x, labels, epochs=2, seed=3)
    c = contrast_neighbours(x, labels, epochs=2, seed=4)
    assert a.shape == x.shape
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_texts_nearest_are_more_often_of_its_class_after_training(seed):
    # noisy blobs: about half of a text's 10 nearest rows share its class; the space trained to draw neighbours (and
    # the labelled texts of a class) together holds more of them (seed 1: 0.47 -> 0.54, seed 2: 0.46 -> 0.51), where
    # the same network after too few steps to learn holds fewer (0.47 -> 0.35, 0.46 -> 0.42)
    x, y, labels = _noisy_blobs(seed)

    def purity(space):
        near = nearest_neighbours(space, 10)
        return float((y[near] == y[:, None]).mean())

    trained = contrast_neighbours(x, labels, neighbours=10, epochs=50, batch_size=64, seed=seed)
    untrained = contrast_neighbours(x, labels, neighbours=10, epochs=1, batch_size=len(x), seed=seed)
    assert purity(trained) > purity(x) + 0.03
    assert purity(untrained) < purity(x)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"neighbours": 0}, "neighbours"),
        ({"epochs": 1.5}, "epochs"),
        ({"batch_size": True}, "batch_size"),
        ({"temperature": 0}, "temperature"),
    ],
)
def test_bad_options_are_refused_by_name(kwargs, name):
    x, _, labels = _noisy_blobs(0)
    with pytest.raises(OptionError, match=name):
        contrast_neighbours(x, labels, **kwargs)
