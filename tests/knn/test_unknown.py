"""Abstention: evidence, the threshold at a share of known texts, and unknown below it."""

import numpy as np
import pytest

from cea.errors import CeaError
from cea.knn.unknown import UNKNOWN, abstain, evidence, threshold_at


def test_evidence_is_the_score_times_the_nearest_cosine_negative_cosines_counting_nothing():
    np.testing.assert_allclose(evidence([0.5, 0.9, 1.0], [0.8, -0.3, 0.25]), [0.4, 0.0, 0.25])


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
