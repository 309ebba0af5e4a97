"""Abstention: evidence, the threshold at a share of known texts, and unknown below it."""

import numpy as np
import pytest

from cea.errors import CeaError
from cea.knn.search import normalize
from cea.knn.unknown import UNKNOWN, abstain, count_curve, count_scale, evidence, threshold_at


def test_evidence_is_the_score_times_the_nearest_cosine_negative_cosines_counting_nothing():
    np.testing.assert_allclose(evidence([0.5, 0.9, 1.0], [0.8, -0.3, 0.25]), [0.4, 0.0, 0.25])
    np.testing.assert_allclose(evidence([0.5, 0.9, 1.0], [0.8, -0.3, 0.25], [0.5, 1.0, 0.8]), [0.8, 0.0, 0.3125])


def test_the_threshold_turns_away_the_given_share_of_known_texts():
    known = np.arange(1, 11) / 10  # 0.1 ... 1.0
    threshold = threshold_at(known, 0.1)
    assert threshold == pytest.approx(0.19)  # linear interpolation between 0.1 and 0.2, at 0.9 of the way
    assert np.mean(known < threshold) == pytest.approx(0.1)
    assert threshold_at(known, 0.5) == pytest.approx(0.55)


def test_abstain_below_the_threshold_and_never_without_one():
    labels = np.array(["card", "geo", "transfer"])
    assert abstain(labels, [0.3, 0.1, 0.2], 0.2).tolist() == ["card", UNKNOWN, "transfer"]
    assert abstain(labels, [0.3, 0.1, 0.2], None).tolist() == labels.tolist()


@pytest.mark.parametrize("rate", [0.0, 1.0, -0.1])
def test_a_share_outside_zero_to_one_is_refused(rate):
    with pytest.raises(CeaError, match="between 0 and 1"):
        threshold_at([0.5, 0.6], rate)


def _classes(counts, seed=0, dim=16, spread=0.5):
    """Classes of unit vectors around orthogonal centres, ``counts`` examples each."""
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for i, n in enumerate(counts):
        x = rng.normal(0, spread, (n, dim))
        x[:, i] += 1
        rows.append(x)
        labels += [f"c{i}"] * n
    return normalize(np.vstack(rows)), np.array(labels)


def test_the_count_curve_measures_how_much_nearer_the_nearest_example_is_with_more_examples():
    x, y = _classes([64, 64, 64, 64, 8])
    curve = count_curve(x, y)
    sizes, ratios = [n for n, _ in curve], [r for _, r in curve]
    assert sizes == [2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64] and ratios[-1] == 1.0  # up to the median class's count
    assert all(0.05 <= r <= 1.0 for r in ratios) and ratios[0] < 0.8 < ratios[-2]  # 2 examples: far nearer with 64
    assert ratios == sorted(ratios)  # more examples, a nearer nearest one (the draws' medians made monotone)
    assert curve == count_curve(x, y)  # drawn with a seed
    assert count_curve(*_classes([32, 32, 32])) == ()  # no class below the median: nothing to scale
    assert count_curve(*_classes([32])) == ()


def test_the_count_scale_interpolates_the_curve_in_log_count():
    curve = ((2, 0.5), (8, 0.8), (32, 1.0))
    scale = count_scale(curve, {"a": 2, "b": 4, "c": 100, "d": 32, "e": 1}, ["a", "b", "c", "d", "e", "new"])
    np.testing.assert_allclose(scale, [0.5, 0.65, 1.0, 1.0, 0.5, 1.0])  # 4 halfway from 2 to 8 in log count
    assert count_scale((), {"a": 2}, ["a"]) is None
