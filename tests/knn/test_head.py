"""The linear head: scikit-learn's logistic regression kept as arrays, refitted from previous weights."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from cea.errors import CeaError
from cea.knn.head import FILE, LinearHead, class_weights, fit_head


def clusters(n_classes: int, per_class: int = 20, dim: int = 16, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, dim))
    x = np.vstack([c + 0.6 * rng.normal(size=(per_class, dim)) for c in centres]).astype(np.float32)
    y = np.repeat([f"c{i}" for i in range(n_classes)], per_class)
    return x, y


@pytest.mark.parametrize("n_classes", [2, 4])
def test_probabilities_are_scikit_learns(n_classes):
    """Our arrays give the probabilities scikit-learn's own fitted estimator gives on unit-length rows."""
    x, y = clusters(n_classes)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    reference = LogisticRegression(C=3.0, max_iter=3000).fit(unit, y)
    head = fit_head(x, y, C=3.0)
    queries = np.random.default_rng(1).normal(size=(7, x.shape[1]))
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    np.testing.assert_allclose(head.predict_proba(queries), reference.predict_proba(q), atol=1e-5)
    assert head.predict(queries).tolist() == reference.predict(q).tolist()
    assert head.classes.tolist() == [f"c{i}" for i in range(n_classes)]


def test_a_refit_starts_from_the_previous_weights_and_a_new_class_from_its_prototype():
    x, y = clusters(4)
    cold = fit_head(x, y)
    again = fit_head(x, y, previous=cold)  # the same data from its own optimum: no step left to take
    assert cold.n_iter > 5 and again.n_iter <= 1
    np.testing.assert_allclose(again.coef, cold.coef, atol=1e-6)
    moved = fit_head(x[5:], y[5:], previous=cold)  # five examples fewer: a few steps from the old optimum
    np.testing.assert_allclose(moved.predict_proba(x), fit_head(x[5:], y[5:]).predict_proba(x), atol=1e-2)
    three = fit_head(x[y != "c3"], y[y != "c3"])
    grown = fit_head(x, y, previous=three)  # a new class: its row starts at its examples' scaled mean direction
    assert grown.classes.tolist() == ["c0", "c1", "c2", "c3"]
    assert grown.predict(x).tolist() == cold.predict(x).tolist()
    np.testing.assert_allclose(grown.predict_proba(x), cold.predict_proba(x), atol=5e-3)
    step = fit_head(x, y, previous=three, steps=2)  # bounded: two steps from the old weights, then on from there
    assert step.n_iter == 2 and not step.converged and cold.converged
    while not step.converged:
        step = fit_head(x, y, previous=step, steps=2)
    np.testing.assert_allclose(step.predict_proba(x), cold.predict_proba(x), atol=5e-3)
    pair = fit_head(x[np.isin(y, ["c0", "c1"])], y[np.isin(y, ["c0", "c1"])])  # one row for two classes: cold
    from_pair = fit_head(x, y, previous=pair, steps=2)  # from scratch: to convergence, whatever the steps
    assert from_pair.n_iter == cold.n_iter and from_pair.converged
    np.testing.assert_array_equal(from_pair.coef, cold.coef)


def test_a_small_class_weighs_as_the_median_class():
    assert class_weights(["a"] * 30 + ["b"] * 10 + ["c"] * 40) == {"a": 1.0, "b": 3.0, "c": 1.0}
    assert class_weights(["a"] * 8 + ["b"] * 8) == {"a": 1.0, "b": 1.0}  # equal counts: the plain head
    assert class_weights(["a", "b"], None) is None
    # a class added with 3 examples beside classes of 40, its centre near theirs: the plain head rarely predicts
    # it, the weighted head does; on equal counts the two heads are the same
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 16))
    centres[2] = 0.5 * (centres[0] + centres[1]) + 0.3 * rng.normal(size=16)
    x = np.vstack([c + 0.6 * rng.normal(size=(n, 16)) for c, n in zip(centres, (40, 40, 3))]).astype(np.float32)
    y = np.repeat(["c0", "c1", "c2"], (40, 40, 3))
    queries = centres[2] + 0.6 * rng.normal(size=(200, 16))
    plain = np.mean(fit_head(x, y).predict(queries) == "c2")
    weighted = np.mean(fit_head(x, y, class_weight="median").predict(queries) == "c2")
    assert plain < 0.15 and weighted > 0.3, (plain, weighted)  # 0.095 and 0.395
    even, labels = clusters(4)
    np.testing.assert_allclose(
        fit_head(even, labels, class_weight="median").coef, fit_head(even, labels).coef, atol=1e-6
    )
    with pytest.raises(CeaError, match="class_weight"):
        class_weights(["a", "b"], "balanced")
    numbers = np.repeat(["10", "2", "38"], (40, 40, 3))  # names that read as numbers, weighted alike
    head = fit_head(x, numbers, class_weight="median")
    assert list(head.classes) == ["10", "2", "38"] and np.mean(head.predict(queries) == "38") == weighted


def test_saved_heads_load_without_pickle(tmp_path):
    x, y = clusters(3)
    head = fit_head(x, y, C=0.5)
    path = head.save(tmp_path)
    assert path.name == FILE
    with np.load(path, allow_pickle=False) as data:
        assert data["classes"].dtype.kind == "U"
    again = LinearHead.load(tmp_path)
    assert again.C == 0.5 and again.classes.tolist() == head.classes.tolist()
    np.testing.assert_array_equal(again.coef, head.coef)
    np.testing.assert_array_equal(again.predict_proba(x), head.predict_proba(x))


def test_bad_input():
    x, y = clusters(2)
    with pytest.raises(CeaError, match="C must be positive"):
        fit_head(x, y, C=0)
    with pytest.raises(CeaError, match="at least two classes"):
        fit_head(x, np.repeat("a", len(x)))


def test_a_head_per_label_is_scikit_learns_one_vs_rest_and_round_trips(tmp_path):
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    from cea.knn.head import LinearHead, fit_label_head

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 8)).astype(np.float32)
    sets = [tuple({f"l{a}" for a in rng.integers(0, 4, size=rng.integers(1, 3))}) for _ in range(200)]
    head = fit_label_head(X, sets, C=10)
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    y = np.array([[c in s for c in head.classes] for s in sets])
    expected = OneVsRestClassifier(LogisticRegression(C=10, max_iter=3000)).fit(unit, y).predict_proba(unit)
    np.testing.assert_allclose(head.predict_proba(X), expected, atol=1e-5)
    head.save(tmp_path)
    loaded = LinearHead.load(tmp_path)
    assert loaded.multi_label and loaded.classes.tolist() == head.classes.tolist()
    np.testing.assert_allclose(loaded.predict_proba(X), head.predict_proba(X), atol=1e-6)
    again = fit_label_head(X, sets, C=10, previous=head)  # from the previous weights: already at the optimum
    assert again.n_iter < head.n_iter
    np.testing.assert_allclose(again.predict_proba(X), expected, atol=1e-4)
