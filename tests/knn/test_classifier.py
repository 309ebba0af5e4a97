import numpy as np
import pytest
from sklearn.neighbors import KNeighborsClassifier

from cea.errors import CeaError
from cea.knn import KNNClassifier, vote
from cea.knn.search import normalize


def _data(n=600, q=200, d=16, classes=7, seed=0):
    rng = np.random.default_rng(seed)
    X, Q = rng.standard_normal((n, d)), rng.standard_normal((q, d))
    return X.astype(np.float32), rng.integers(0, classes, n), Q.astype(np.float32)


@pytest.mark.parametrize("k", [1, 4, 5, 10])
@pytest.mark.parametrize("weights", ["uniform", "distance"])
def test_agrees_with_sklearn(k, weights):
    X, y, Q = _data()
    ours = KNNClassifier(k, weights=weights, tie_break="smallest").fit(X, y)
    theirs = KNeighborsClassifier(k, weights=weights, metric="cosine", algorithm="brute").fit(X, y)
    dist, idx = ours.kneighbors(Q)
    sk_dist, sk_idx = theirs.kneighbors(Q)
    np.testing.assert_array_equal(idx, sk_idx)
    np.testing.assert_allclose(dist, sk_dist, atol=1e-5)
    np.testing.assert_array_equal(ours.predict(Q), theirs.predict(Q))
    np.testing.assert_allclose(ours.predict_proba(Q), theirs.predict_proba(Q), atol=1e-6)
    # with k = 4 and 7 classes ties are common: the test must have met some
    if k == 4 and weights == "uniform":
        proba = ours.predict_proba(Q)
        assert ((proba == proba.max(1, keepdims=True)).sum(1) > 1).sum() > 10


def test_leave_one_out_agrees_with_sklearn():
    X, y, _ = _data(n=300)
    ours = KNNClassifier(5, tie_break="smallest").fit(X, y)
    theirs = KNeighborsClassifier(5, metric="cosine", algorithm="brute").fit(X, y)
    _, idx = ours.kneighbors()
    np.testing.assert_array_equal(idx, theirs.kneighbors(return_distance=False))
    assert not (idx == np.arange(300)[:, None]).any()
    votes = np.array([np.bincount(y[row], minlength=7).argmax() for row in idx])
    np.testing.assert_array_equal(ours.predict(), votes)


def test_ties_go_to_the_nearest_neighbour():
    X = np.array([[1, 0.0], [0.9, 0.1], [0.8, 0.3], [0.7, 0.5]], np.float32)
    y = np.array(["b", "a", "b", "a"])  # query [1, 0]: neighbours b, a, b, a -> 2 votes each
    query = np.array([[1.0, 0.0]], np.float32)
    assert KNNClassifier(4).fit(X, y).predict(query)[0] == "b"
    assert KNNClassifier(4, tie_break="smallest").fit(X, y).predict(query)[0] == "a"


def test_top_k_accuracy_and_evaluate_by_hand():
    X = np.array([[1, 0], [0, 1], [-1, 0], [0, -1]], np.float32)
    y = np.array(["e", "n", "w", "s"])
    Q = np.array([[1, 0.2], [0.1, 1], [-1, -0.3]], np.float32)
    gold = np.array(["n", "n", "e"])
    knn = KNNClassifier(2).fit(X, y)
    # nearest two: (e, n), (n, e), (w, s)
    assert KNNClassifier(1).fit(X, y).evaluate(Q, gold)["top_k_accuracy"] == pytest.approx(1 / 3)
    scores = knn.evaluate(Q, gold)
    assert scores["accuracy"] == pytest.approx(1 / 3)  # ties -> nearest: e, n, w
    assert scores["top_k_accuracy"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("backend", ["int8", "faiss"])
def test_backends_match_fp32(backend):
    X, y, Q = _data(n=5000, q=300, d=48)
    ref = KNNClassifier(5, backend="torch").fit(X, y)
    other = KNNClassifier(5, backend=backend).fit(X, y)
    np.testing.assert_array_equal(other.kneighbors(Q)[1], ref.kneighbors(Q)[1])
    np.testing.assert_array_equal(other.kneighbors()[1], ref.kneighbors()[1])
    np.testing.assert_array_equal(other.predict(Q), ref.predict(Q))


@pytest.mark.parametrize(
    "flags, n, expected",
    [
        ({"avx2", "avx512f", "avx512_vnni"}, 50_000, "int8"),
        ({"avx2", "avx_vnni"}, 40_000, "int8"),
        ({"avx2", "avx512f", "avx512_vnni"}, 39_999, "faiss"),
        ({"avx2"}, 100_000, "faiss"),
        (set(), 100_000, "faiss"),
    ],
)
def test_auto_searches_with_the_kernel_this_cpu_runs_fastest(monkeypatch, flags, n, expected):
    """int8 only where the CPU multiplies int8 with 32-bit sums (VNNI) and from INT8_MIN_REFS references (measured
    faster than FAISS's flat index there); elsewhere FAISS's flat index, never slower than itself."""
    from cea import hardware
    from cea.knn import search

    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset(flags))
    assert search.exact_kernel(n) == expected
    X = normalize(np.random.default_rng(0).standard_normal((60, 8)).astype(np.float32))
    knn = KNNClassifier(3).fit(X, np.arange(60) % 3)
    assert knn.backend_ == "faiss"  # 60 references: FAISS on any CPU
    np.testing.assert_array_equal(
        knn.kneighbors(X[:5])[1], KNNClassifier(3, backend="torch").fit(X, np.arange(60) % 3).kneighbors(X[:5])[1]
    )


def test_int8_falls_back_when_it_cannot_certify():
    # many near-duplicates: the gaps between neighbours are below the int8 error bound
    rng = np.random.default_rng(1)
    base = rng.standard_normal(32)
    X = (base + 1e-4 * rng.standard_normal((3000, 32))).astype(np.float32)
    y = rng.integers(0, 3, 3000)
    Q = (base + 1e-4 * rng.standard_normal((20, 32))).astype(np.float32)
    knn = KNNClassifier(5, backend="int8").fit(X, y)
    idx = knn.kneighbors(Q)[1]
    assert knn.n_fallback_ > 0
    np.testing.assert_array_equal(idx, KNNClassifier(5, backend="torch").fit(X, y).kneighbors(Q)[1])


def test_chunked_search_equals_one_shot(monkeypatch):
    from cea.knn import search

    X, y, Q = _data(n=2000, q=500)
    whole = KNNClassifier(5).fit(X, y).kneighbors(Q)[1]
    monkeypatch.setattr(search, "SCORE_BUDGET", 2000 * 16)  # 16 queries per chunk
    np.testing.assert_array_equal(KNNClassifier(5).fit(X, y).kneighbors(Q)[1], whole)


def test_bad_input():
    X, y, Q = _data(n=10, q=2)
    with pytest.raises(CeaError, match="k = 11 is larger than the 10 references"):
        KNNClassifier(11).fit(X, y).predict(Q)
    with pytest.raises(CeaError, match="k = 10 is larger than the 9 references"):
        KNNClassifier(10).fit(X, y).predict()
    with pytest.raises(CeaError, match="not fitted"):
        KNNClassifier().predict(Q)
    with pytest.raises(CeaError, match="X has 5 features, but KNNClassifier is expecting 16"):
        KNNClassifier(3).fit(X, y).predict(Q[:, :5])
    with pytest.raises(CeaError, match="labels"):
        KNNClassifier(3).fit(X, y[:5])


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


def test_a_scikit_learn_estimator_in_its_tools():
    """Issue 17: clone, get/set_params, cross_val_score, GridSearchCV and a Pipeline, checked against
    scikit-learn's own cosine kNN (the same votes with ties to the smallest label)."""
    from sklearn.base import clone
    from sklearn.decomposition import PCA
    from sklearn.model_selection import GridSearchCV, cross_val_score
    from sklearn.pipeline import make_pipeline

    X, y, _ = _data(n=210)
    ours = KNNClassifier(5, tie_break="smallest")
    assert clone(ours).get_params() == {
        "backend": "auto",
        "n_neighbors": 5,
        "tie_break": "smallest",
        "weights": "uniform",
    }
    assert ours.set_params(n_neighbors=3).n_neighbors == 3
    theirs = KNeighborsClassifier(3, metric="cosine", algorithm="brute")
    np.testing.assert_allclose(cross_val_score(ours, X, y, cv=3), cross_val_score(theirs, X, y, cv=3))
    grid = {"n_neighbors": [1, 3, 9]}
    search = GridSearchCV(ours, grid, cv=3).fit(X, y)
    reference = GridSearchCV(theirs, grid, cv=3).fit(X, y)
    assert search.best_params_ == reference.best_params_
    assert search.best_score_ == pytest.approx(reference.best_score_)
    pipe = make_pipeline(PCA(8, random_state=0), KNNClassifier(3, tie_break="smallest")).fit(X, y)
    expected = make_pipeline(PCA(8, random_state=0), KNeighborsClassifier(3, metric="cosine", algorithm="brute"))
    np.testing.assert_array_equal(pipe.predict(X), expected.fit(X, y).predict(X))
    assert pipe[-1].n_features_in_ == 8


def test_scikit_learns_estimator_checks():
    """Every check of `check_estimator` passes with scikit-learn's tie rule; with cea's default (a tie goes to
    the nearest neighbour's label) one cannot apply: check_classifiers_train asserts that `predict` is the
    argmax of `predict_proba`, and vote shares cannot say which tied label was nearest."""
    import warnings

    from sklearn.utils.estimator_checks import check_estimator

    warnings.filterwarnings("ignore")
    results = check_estimator(KNNClassifier(3, tie_break="smallest"), on_fail=None)
    assert [r["check_name"] for r in results if r["status"] == "failed"] == []
    assert sum(r["status"] == "passed" for r in results) >= 50
    results = check_estimator(
        KNNClassifier(3),
        on_fail=None,
        expected_failed_checks={"check_classifiers_train": "ties go to the nearest label"},
    )
    assert {r["check_name"] for r in results if r["status"] == "failed"} == set()
    assert {r["check_name"] for r in results if r["status"] == "xfail"} == {"check_classifiers_train"}


def test_the_docstring_example_runs():
    """KNNClassifier's example (``help(KNNClassifier)``, the API reference) is a doctest run here."""
    import doctest

    import cea.knn.classifier

    result = doctest.testmod(cea.knn.classifier)
    assert result.attempted >= 5 and not result.failed
