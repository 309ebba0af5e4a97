"""A bundle's answer: the evidence behind it, and the calibration of the unknown threshold."""

import numpy as np
import pytest

from cea.knn.search import normalize
from cea.serving.decision import answer, calibrate, decide


def _clusters(n: int, seed: int):
    """Two classes of unit vectors spread around orthogonal centres."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.2, (2 * n, 8))
    x[:n, 0] += 1
    x[n:, 1] += 1
    return normalize(x), np.array(["a"] * n + ["b"] * n)


def test_knn_evidence_is_the_vote_share_times_the_nearest_cosine():
    sims = np.array([[0.9, 0.8, 0.7], [0.6, 0.5, -0.1]], np.float32)
    labels = np.array([["a", "b", "b"], ["a", "a", None]], dtype=object)
    chosen, scores, strength = decide(np.zeros((2, 4), np.float32), sims, labels, None, {"kind": "knn"}, "uniform")
    assert chosen.tolist() == ["b", "a"]
    np.testing.assert_allclose(scores, [2 / 3, 1.0])
    np.testing.assert_allclose(strength, [0.9 * 2 / 3, 0.6], rtol=1e-6)
    assert answer(chosen, scores, strength, 0.61) == [("unknown", "b"), ("unknown", "a")]
    assert answer(chosen, scores, strength, 0.59) == [("b", None), ("a", None)]


@pytest.mark.parametrize("classifier", [{"kind": "knn"}, {"kind": "linear", "C": 10.0, "knn_share": 0.0}])
def test_the_calibrated_threshold_turns_away_about_the_rate_of_new_texts_of_known_classes(classifier):
    refs, labels = _clusters(300, seed=0)
    threshold = calibrate(refs, list(labels), 0.2, classifier, k=5, weights="uniform")
    # fresh texts of the same classes, judged against every reference, as the bundle will
    fresh, _ = _clusters(500, seed=1)
    sims = fresh @ refs.T
    idx = np.argsort(-sims, 1)[:, :5]
    head = None
    if classifier["kind"] == "linear":
        from cea.knn import fit_head

        head = fit_head(refs, labels, 10.0)
    _, _, strength = decide(fresh, np.take_along_axis(sims, idx, 1), labels[idx].astype(object), head, classifier,
                            "uniform")
    turned_away = float(np.mean(strength < threshold))
    assert 0.1 <= turned_away <= 0.25  # a fifth of held-out texts, a little fewer with every reference in
    # texts of no class (orthogonal to both centres) fall below it
    other, _ = _clusters(50, seed=2)
    stranger = normalize(np.roll(other, 4, axis=1))
    sims = stranger @ refs.T
    idx = np.argsort(-sims, 1)[:, :5]
    _, _, strength = decide(stranger, np.take_along_axis(sims, idx, 1), labels[idx].astype(object), head, classifier,
                            "uniform")
    assert np.mean(strength < threshold) > 0.9
