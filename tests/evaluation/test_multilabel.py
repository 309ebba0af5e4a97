"""Multi-label kNN: votes per label, the threshold, and the metrics, against hand-worked values."""

import numpy as np
import pytest

from cea.evaluation.multilabel import multilabel_evaluate, multilabel_scores
from cea.knn.decision import nearest
from cea.knn.labelsets import binarize, choose_labels, label_shares

# four references on the unit circle at 0, 20, 40 and 180 degrees
ANGLES = np.radians([0, 20, 40, 180])
REFS = np.stack([np.cos(ANGLES), np.sin(ANGLES)], 1)
SETS = [("a",), ("a", "b"), ("b",), ("c",)]


def test_votes_are_the_share_of_the_k_nearest_carrying_each_label():
    query = np.array([[np.cos(np.radians(15)), np.sin(np.radians(15))]])  # nearest: 20, 0, 40 degrees
    cosines, rows = nearest(REFS, query, 3)
    sets = np.empty(len(SETS), dtype=object)
    sets[:] = SETS
    classes, scores = label_shares(sets[rows])
    assert classes.tolist() == ["a", "b"]  # the labels the neighbours carry
    np.testing.assert_allclose(scores, [[2 / 3, 2 / 3]])
    np.testing.assert_allclose(cosines[0], np.cos(np.radians([5, 15, 25])), rtol=1e-6)
    assert choose_labels(scores, classes, 0.5) == [("a", "b")]
    assert choose_labels(scores, classes, 0.7) == [("a",)]  # none reaches it: the best label (the first of a tie)


def test_metrics_on_a_hand_worked_example():
    gold = [("a",), ("a", "b"), ("c",)]
    predicted = [("a", "b"), ("a", "b"), ("a",)]
    # a: tp 2, fp 1, fn 0 -> F1 0.8; b: tp 1, fp 1 -> 2/3; c: fn 1 -> 0; micro: tp 3, fp 2, fn 1 -> 6/9
    got = multilabel_scores(predicted, gold)
    assert got["per_label_f1"] == {"a": 80.0, "b": 66.67, "c": 0.0}
    assert got["macro_f1"] == pytest.approx(100 * (0.8 + 2 / 3) / 3, abs=0.01)
    assert got["micro_f1"] == 66.67 and got["subset_accuracy"] == 33.33
    assert binarize(gold, ["a", "b", "c"]).tolist() == [[1, 0, 0], [1, 1, 0], [0, 0, 1]]


def test_the_threshold_is_chosen_on_dev_and_applied_to_test():
    deg = lambda *a: np.stack([np.cos(np.radians(a)), np.sin(np.radians(a))], 1)  # noqa: E731
    # dev: a text at 10 degrees carries a and b (its 3 nearest: 2 x a, 2 x b of 3); one at 175 only c
    queries = {"dev": (deg(10, 175), [("a", "b"), ("c",)]), "test": (deg(30, 170), [("a", "b"), ("c",)])}
    result = multilabel_evaluate(REFS, SETS, queries, k=3)
    # scores at 10 degrees (nearest 0, 20, 40): a 2/3, b 2/3; at 175 (nearest 180, 40, 20): a 1/3, b 2/3, c 1/3.
    # threshold <= 1/3: {a, b} and {a, b, c}, micro-F1 6/8; up to 2/3: {a, b} and {b}, 4/6; above: {a} and {b},
    # 2/5. The best, 0.75, first reached at 0.1 (ties go to the lower threshold)
    assert result.threshold == 0.1 and result.scores["dev"]["micro_f1"] == 75.0
    assert result.predicted["dev"] == [("a", "b"), ("a", "b", "c")]
    assert (
        result.scores["test"]["micro_f1"] == multilabel_scores(result.predicted["test"], queries["test"][1])["micro_f1"]
    )
    assert set(result.metrics()["test"]) == {"knn_micro_f1", "knn_macro_f1", "knn_subset_accuracy", "threshold"}
