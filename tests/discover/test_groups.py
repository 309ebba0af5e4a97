"""cea.discover.groups: the count estimated on synthetic blobs, k-means anchored at the known classes (new centres
by k-means++, the smallest dropped), the cut calibrated on the known classes, whitening and the groups' words."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from cea.discover.groups import (
    anchored_kmeans,
    distinctive_words,
    estimate_clusters,
    keep_largest,
    plus_plus,
    within_class_whitening,
)
from cea.errors import CeaError, OptionError


def _blobs(k, seed, known_share=0.5, labelled=0.1, per=60):
    x, y = make_blobs(
        n_samples=per * k, centers=k, n_features=16, cluster_std=1.5, center_box=(-10, 10), random_state=seed
    )
    rng = np.random.default_rng(seed)
    known = sorted(rng.choice(k, max(2, round(known_share * k)), replace=False).tolist())
    labels = [f"c{t}" if t in known and rng.random() < labelled else None for t in y]
    return x, y, labels, [f"c{c}" for c in known]


# the tolerance the estimate is held to on well-separated blobs (16 dimensions, 60 points each, 50% of the
# centres known, 10% of their points labelled): silhouette within one cluster of the truth; the labelled-calibrated
# count within a quarter of it (it sees only the few labelled points of half the classes)
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("k", [8, 15, 25])
def test_the_estimated_count_on_blobs_lands_within_the_stated_tolerance(k, seed):
    x, _, labels, known = _blobs(k, seed)
    found = estimate_clusters(x, labels, known, method="silhouette", seed=seed)
    assert abs(found["clusters"] - k) <= 1, found
    assert found["low"] == len(known) + 1 and min(found["scores"]) == found["low"]
    labelled = estimate_clusters(x, labels, known, method="labelled", seed=seed)
    assert abs(labelled["clusters"] - k) <= 0.25 * k, labelled


@pytest.mark.parametrize("seed", range(3))
def test_counts_the_labelled_texts_cannot_tell_apart_are_chosen_among_by_the_silhouette(seed):
    # 16 blobs, two known classes with two labelled texts each at one point: no count splits or merges them, so
    # every count ties on the labelled criterion; their middle would be 34, the silhouette among them finds 16
    x, y = make_blobs(
        n_samples=60 * 16, centers=16, n_features=16, cluster_std=1.0, center_box=(-10, 10), random_state=seed
    )
    labels = [None] * len(x)
    for c in (0, 1):
        rows = np.flatnonzero(y == c)[:2]
        x[rows[1]] = x[rows[0]]
        labels[rows[0]] = labels[rows[1]] = f"c{c}"
    found = estimate_clusters(x, labels, ["c0", "c1"], method="labelled", seed=seed, high=64)
    assert found["tied"][0] == 3 and found["tied"][-1] == 64 and set(found["scores"].values()) == {1.0}
    assert set(found["tie_scores"]) == set(found["tied"])
    assert found["clusters"] == max(found["tie_scores"], key=found["tie_scores"].get) == 16


def _split_new_classes(seed, k=16, n_known=4, per=60, apart=7.0):
    # 16 classes in 16 dimensions; the 4 known ones compact, each new one two sub-blobs 7 apart (a class the encoder
    # was not trained to draw together), 20% of the known classes' points labelled
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-10, 10, (k, 16))
    rows = []
    for c in range(k):
        if c < n_known:
            rows.append(centres[c] + rng.normal(0, 1.0, (per, 16)))
        else:
            offset = rng.normal(0, 1, 16)
            offset *= apart / np.linalg.norm(offset)
            rows += [centres[c] + side * offset + rng.normal(0, 0.5, (per // 2, 16)) for side in (1, -1)]
    y = np.repeat(np.arange(k), per)
    labels = [f"c{t}" if t < n_known and rng.random() < 0.2 else None for t in y]
    return np.concatenate(rows), labels, [f"c{c}" for c in range(n_known)]


@pytest.mark.parametrize("seed", range(3))
def test_the_known_classes_sizes_bound_the_silhouette_where_it_splits_new_classes(seed):
    x, labels, known = _split_new_classes(seed)
    by_sizes = estimate_clusters(x, labels, known, method="sizes", seed=seed, high=64)
    by_silhouette = estimate_clusters(x, labels, known, method="labelled", seed=seed, high=64)
    assert by_sizes["tied"] == by_silhouette["tied"] and len(by_sizes["tied"]) >= 5
    assert by_sizes["tie_implied"] == by_silhouette["tie_implied"] and by_sizes["method"] == "sizes"
    bound = by_sizes["tie_implied"][by_sizes["tied"][-1]]  # at the finest tied count the known classes stay whole
    assert abs(bound - 16) < 0.5 and by_sizes["clusters"] == 16
    assert by_silhouette["clusters"] >= 24  # the sub-blobs read as classes of their own
    assert all(implied < k for k, implied in by_sizes["tie_implied"].items() if k > 16)  # new classes split
    under = {k: v for k, v in by_sizes["tie_scores"].items() if k <= bound}
    assert by_sizes["clusters"] == max(under, key=under.get)  # the silhouette's choice below the bound


def test_without_two_labelled_classes_the_estimate_falls_back_to_silhouette():
    x, _, _, _ = _blobs(6, 0)
    assert estimate_clusters(x, [None] * len(x), [], method="labelled")["method"] == "silhouette"
    assert estimate_clusters(x, [None] * len(x), [], method="sizes")["method"] == "silhouette"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_cut_calibrated_on_known_blobs_counts_new_blobs_of_the_same_spread(seed):
    from sklearn.metrics import adjusted_rand_score

    from cea.discover.groups import calibrated_threshold, linkage_groups, sample_per_class

    x, y = make_blobs(
        n_samples=9 * 25, centers=9, n_features=16, cluster_std=1.0, center_box=(-8, 8), random_state=seed
    )
    x = x - x.mean(0)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    known, new = y < 6, y >= 6  # six classes known, three unseen
    rows = sample_per_class(y[known], 10, seed)
    assert len(rows) == 60 and all(np.sum(y[known][rows] == c) == 10 for c in range(6))
    threshold, ari = calibrated_threshold(x[known][rows], y[known][rows])
    assert ari > 0.9
    found = linkage_groups(x[new], threshold=threshold)  # the count comes out of the cut: three groups of 5 or more
    sizes = np.bincount(found)
    assert np.sum(sizes >= 5) == 3 and adjusted_rand_score(y[new], found) > 0.85
    for group in np.flatnonzero(sizes >= 5):  # each of one blob
        assert len(set(y[new][found == group])) == 1
    assert len(np.unique(linkage_groups(x[new], n=2))) == 2
    with pytest.raises(CeaError, match="at least two known classes"):
        calibrated_threshold(x[:5], ["a"] * 5)


def test_plus_plus_continues_from_the_given_centres():
    x = np.array([[0.0, 0.0], [0.1, 0.0], [10.0, 0.0], [0.0, 10.0]])
    new = plus_plus(x, x[:1], 2, np.random.default_rng(0))
    assert new.shape == (2, 2)
    assert {tuple(v) for v in new} == {(10.0, 0.0), (0.0, 10.0)}  # the far points: the near one has little chance
    assert plus_plus(x, x[:1], 0, np.random.default_rng(0)).shape == (0, 2)


def test_the_labelled_weight_pulls_a_centre_to_the_labelled_texts():
    # a known class's centroid at its labelled text (x = 0), unlabelled texts at 1, 2, 3 and a far pair: with weight w
    # the labelled text counts w times in its cluster's centre (scikit-learn's sample_weight): 6 / (w + 3)
    x = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [100.0, 0.0], [101.0, 0.0]])
    for weight, centre in ((1.0, 1.5), (5.0, 0.75)):
        assigned, centres = anchored_kmeans(x, x[:1], 2, sample_weight=np.array([weight, 1, 1, 1, 1, 1]))
        assert assigned.tolist() == [0, 0, 0, 0, 1, 1]
        assert centres[0, 0] == pytest.approx(centre) and centres[1, 0] == pytest.approx(100.5)


def test_keep_largest_keeps_the_anchors_then_the_new_centres_that_hold_most():
    centres = np.arange(5.0)[:, None]
    assigned = np.array([0, 1, 2, 2, 2, 3, 3, 4, 4, 4, 4])  # anchor 0; new centres 1-4 hold 1, 3, 2, 4 rows
    assert keep_largest(assigned, centres, 1, 3)[:, 0].tolist() == [0.0, 4.0, 2.0]
    weight = np.array([1, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1.0])  # weighted, centre 1 holds the most
    assert keep_largest(assigned, centres, 1, 3, weight)[:, 0].tolist() == [0.0, 1.0, 4.0]
    assert keep_largest(assigned, centres, 2, 2)[:, 0].tolist() == [0.0, 1.0]  # the anchors stay, even small


# 12 blobs, 3 of them known: with one draw of the new centres, k-means at the count leaves a blob split between two
# centres and two blobs under one on these seeds; drawn one more and the smallest new cluster dropped, it finds them
@pytest.mark.parametrize("seed", [4, 10, 11])
def test_drawing_a_cluster_more_then_dropping_the_smallest_mends_a_split_blob(seed):
    from sklearn.metrics import adjusted_rand_score

    x, y = make_blobs(n_samples=480, centers=12, n_features=8, cluster_std=1.0, center_box=(-10, 10), random_state=seed)
    anchors = np.stack([x[(y == c) & (np.arange(len(y)) % 5 == 0)].mean(0) for c in range(3)])
    plain, _ = anchored_kmeans(x, anchors, 12, seed=seed, n_init=1, over=1.0)
    mended, centres = anchored_kmeans(x, anchors, 12, seed=seed, n_init=1, over=1.1)
    assert adjusted_rand_score(y, plain) < 0.9 and adjusted_rand_score(y, mended) == pytest.approx(1.0)
    assert len(centres) == 12 and len(np.unique(mended)) == 12
    assert [np.bincount(mended[y == c]).argmax() for c in range(3)] == [0, 1, 2]  # the known blobs keep their anchors
    with pytest.raises(OptionError, match="over"):
        anchored_kmeans(x, anchors, 12, over=0.5)


def test_whitening_needs_two_labelled_classes():
    x, _, labels, _ = _blobs(6, 0, labelled=0.3)
    z = within_class_whitening(x, labels)
    assert z.shape == x.shape and np.allclose(np.linalg.norm(z, axis=1), 1, atol=1e-5)
    assert within_class_whitening(x, [None] * len(x)) is None


def test_distinctive_words_are_class_based():
    words = distinctive_words([["card lost card", "lost my card"], ["transfer money", "money transfer now"]], top=2)
    assert words == [["card", "lost"], ["money", "transfer"]]
    assert distinctive_words([["a"], ["b"]]) == [[], []]  # no word of two letters: nothing, no error
