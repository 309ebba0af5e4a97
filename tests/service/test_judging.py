"""The judge of a background fit (cea.service.judging): accuracy where the held-back texts tell the bundles apart,
the gold label's mean log-probability where they differ by at most two texts; ties keep the live bundle."""

import numpy as np
import pytest

from cea.service.judging import CLOSE, EQUAL, FLOOR, Scored, judge


def scored(right: int, of: int = 13, probability: float = 0.6) -> Scored:
    """``right`` of ``of`` texts answered right, each gold label given ``probability``."""
    return Scored(np.arange(of) < right, np.full(of, probability))


def test_a_tie_goes_to_the_bundle_surer_of_the_gold_labels():
    verdict = judge(scored(13, probability=0.6), scored(13, probability=0.9))
    assert verdict.swap and verdict.decided_by == "log-probability"
    assert verdict.fitted_log_probability == pytest.approx(np.log(0.9)) and verdict.live_accuracy == 100.0
    assert "decided by the mean log-probability" in verdict.why
    assert not judge(scored(13, probability=0.9), scored(13, probability=0.6)).swap


def test_equal_figures_keep_the_live_bundle():
    verdict = judge(scored(10), scored(10))
    assert not verdict.swap and verdict.decided_by == "log-probability"
    assert not judge(scored(10, probability=0.6), scored(10, probability=0.6 * (1 + EQUAL / 2))).swap  # float noise
    assert judge(scored(10, probability=0.6), scored(10, probability=0.6 * (1 + 2 * EQUAL))).swap


def test_one_or_two_texts_apart_the_finer_measure_decides():
    assert CLOSE == 2
    ahead_by_two_but_unsure = judge(scored(10, probability=0.8), scored(12, probability=0.5))
    assert not ahead_by_two_but_unsure.swap and ahead_by_two_but_unsure.decided_by == "log-probability"
    behind_by_one_but_sure = judge(scored(11, probability=0.5), scored(10, probability=0.8))
    assert behind_by_one_but_sure.swap


def test_more_than_two_texts_apart_accuracy_decides():
    verdict = judge(scored(9, probability=0.9), scored(12, probability=0.4))
    assert verdict.swap and verdict.decided_by == "accuracy" and "decided by" not in verdict.why
    assert not judge(scored(12, probability=0.4), scored(9, probability=0.9)).swap
    assert judge(scored(9), scored(10), close=0).decided_by == "accuracy"


def test_a_gold_label_given_nothing_is_floored_not_infinite():
    live = Scored(np.array([True, False]), np.array([0.9, 0.0]))
    assert live.log_probability[1] == pytest.approx(np.log(FLOOR))
    figures = judge(live, Scored(np.array([True, True]), np.array([0.9, 0.2]))).figures()
    assert figures["live_log_probability"] == pytest.approx((np.log(0.9) + np.log(FLOOR)) / 2, abs=1e-4)
    assert figures["fitted_accuracy"] == 100.0 and figures["live_accuracy"] == 50.0


def test_both_bundles_must_be_scored_on_the_same_texts():
    with pytest.raises(ValueError, match="13 and 12 texts"):
        judge(scored(13), scored(12, of=12))
