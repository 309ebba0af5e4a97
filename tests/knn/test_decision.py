"""The classifier on top of the embeddings: its answer, the evidence behind it, and the thresholds it sets on held-out
references."""

import numpy as np
import pytest

from cea.errors import OptionError
from cea.knn import fit_head
from cea.knn.decision import Classifier
from cea.knn.labelsets import choose_label_threshold, label_shares
from cea.knn.search import normalize


def _clusters(n: int, seed: int):
    """Two classes of unit vectors spread around orthogonal centres."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.2, (2 * n, 8))
    x[:n, 0] += 1
    x[n:, 1] += 1
    return normalize(x), np.array(["a"] * n + ["b"] * n)


def _nearest(queries, refs, labels, k=5):
    sims = queries @ refs.T
    idx = np.argsort(-sims, 1)[:, :k]
    return np.take_along_axis(sims, idx, 1), labels[idx].astype(object)


def test_knn_evidence_is_the_vote_share_times_the_nearest_cosine():
    sims = np.array([[0.9, 0.8, 0.7], [0.6, 0.5, -0.1]], np.float32)
    labels = np.array([["a", "b", "b"], ["a", "a", None]], dtype=object)
    decision = Classifier("knn").decide(None, np.zeros((2, 4), np.float32), sims, labels)
    assert decision.labels.tolist() == ["b", "a"] and decision.ranked is None
    np.testing.assert_allclose(decision.scores, [2 / 3, 1.0])
    np.testing.assert_allclose(decision.evidence, [0.9 * 2 / 3, 0.6], rtol=1e-6)


def test_a_label_the_head_has_not_seen_is_answered_by_the_distance_vote():
    refs, labels = _clusters(50, seed=0)
    spec = Classifier("linear", k=3)
    head = spec.fit(refs, labels)
    query = normalize(np.array([[0.0, 0.0, 1.0, 0, 0, 0, 0, 0]]))
    sims = np.array([[1.0, 0.2, 0.1]])
    got = spec.decide(head, query, sims, np.array([["c", "a", "a"]], dtype=object))
    # 1 / (1 - cos) weights: c gets 1 / 1e-12-ish, far above a's two votes
    assert got.labels.tolist() == ["c"] and got.scores[0] > 0.99
    # a known label nearest: the head answers
    assert spec.decide(head, query, sims, np.array([["a", "a", "b"]], dtype=object)).labels[0] == head.predict(query)[0]


def test_label_sets_get_every_label_at_the_threshold_and_the_best_where_none_is():
    spec = Classifier("knn", k=3, multi_label=True, label_threshold=0.6)
    neighbours = np.empty((2, 3), dtype=object)
    neighbours[0] = [("a",), ("a", "b"), ("b",)]
    neighbours[1] = [("c",), ("a",), None]
    got = spec.decide(None, np.zeros((2, 4)), np.array([[0.9, 0.8, 0.7], [0.5, 0.4, 0.0]]), neighbours)
    assert got.ranked[0] == [("a", pytest.approx(2 / 3)), ("b", pytest.approx(2 / 3))]
    assert got.ranked[1] == [("a", 0.5)] and got.labels.tolist() == ["a", "a"]  # 0.5 each: the first of the tie
    np.testing.assert_allclose(got.evidence, [0.9 * 2 / 3, 0.5 * 0.5])
    classes, shares = label_shares(neighbours)
    assert classes.tolist() == ["a", "b", "c"]
    # micro-F1 against gold {a, b} and {c}: at 0.6 and below 2 of 3 right in the first; the grid's lowest best wins
    assert choose_label_threshold(shares, classes, [("a", "b"), ("c",)]) == 0.1


@pytest.mark.parametrize("kind", ["knn", "linear"])
def test_the_calibrated_threshold_turns_away_about_the_rate_of_new_texts_of_known_classes(kind):
    refs, labels = _clusters(300, seed=0)
    spec = Classifier(kind, k=5).calibrate(refs, list(labels), 0.2)
    head = spec.fit(refs, labels)
    if kind == "linear":
        expected = fit_head(refs, labels, spec.C)
        np.testing.assert_allclose(head.coef, expected.coef, rtol=1e-5)
    # fresh texts of the same classes, judged against every reference, as the bundle will
    fresh, _ = _clusters(500, seed=1)
    strength = spec.decide(head, fresh, *_nearest(fresh, refs, labels)).evidence
    assert 0.1 <= float(np.mean(strength < spec.unknown_threshold)) <= 0.25  # a fifth of held-out texts, fewer
    # texts of no class (orthogonal to both centres) fall below it
    other, _ = _clusters(50, seed=2)
    stranger = normalize(np.roll(other, 4, axis=1))
    strength = spec.decide(head, stranger, *_nearest(stranger, refs, labels)).evidence
    assert np.mean(strength < spec.unknown_threshold) > 0.9


def test_the_held_out_accuracy_and_the_manifest_round_trip():
    refs, labels = _clusters(100, seed=3)
    accuracy, held = Classifier("knn", k=3).held_out_accuracy(refs, list(labels))
    assert held == 40 and accuracy == 100.0  # two clusters this far apart: every held-out text right
    spec = Classifier("linear", k=7, weights="distance", C=3.0, knn_share=0.25, unknown_threshold=0.4)
    manifest = {**spec.manifest(), "unknown": spec.unknown_manifest(None)}
    assert manifest["unknown"] == {"threshold": 0.4, "rate": None, "count_curve": []}
    assert manifest["classifier"] == {"kind": "linear", "C": 3.0, "knn_share": 0.25, "class_weight": "median"}
    assert Classifier.from_manifest(manifest) == spec
    assert Classifier.from_manifest({}) == Classifier("knn", class_weight=None)  # a bundle from before the head votes
    before = {**manifest, "classifier": {"kind": "linear", "C": 3.0, "knn_share": 0.25}}
    assert Classifier.from_manifest(before).class_weight is None  # made before the weighting: its head as it was
    curved = spec.replace(count_curve=((2, 0.5), (8, 1.0)))
    assert Classifier.from_manifest({**manifest, "unknown": curved.unknown_manifest(0.1)}) == curved
    assert Classifier.from_manifest(before).count_curve == ()  # calibrated before the curve: the evidence as it was


def test_a_small_class_s_evidence_is_divided_by_the_count_curve_and_the_threshold_set_on_it():
    refs, labels = _clusters(100, seed=4)
    refs, labels = np.vstack([refs[:100], refs[100:110]]), np.array(["a"] * 100 + ["b"] * 10)  # b: 10 examples
    plain = Classifier("knn", k=5)
    spec = plain.calibrate(refs, list(labels), 0.2)
    assert spec.count_curve and spec.count_curve[-1] == (55, 1.0)  # the median of 100 and 10 examples
    fresh, _ = _clusters(50, seed=5)
    sims, neighbours = _nearest(fresh, refs, labels)
    raw = plain.decide(None, fresh, sims, neighbours)
    counts = {"a": 100, "b": 10}
    scaled = spec.decide(None, fresh, sims, neighbours, counts)
    ratio = np.interp(np.log(10), np.log([n for n, _ in spec.count_curve]), [r for _, r in spec.count_curve])
    expected = np.where(raw.labels == "b", raw.evidence / ratio, raw.evidence)
    np.testing.assert_allclose(scaled.evidence, expected)
    assert ratio < 1 and (scaled.evidence > raw.evidence).any()
    np.testing.assert_allclose(spec.decide(None, fresh, sims, neighbours).evidence, raw.evidence)  # no counts given
    # the threshold is the rate-quantile of the scaled evidence of the held-out fifth
    decision, _ = spec._held_out_decision(refs, list(labels), 0)
    assert spec.unknown_threshold == pytest.approx(np.quantile(decision.evidence, 0.2))


@pytest.mark.parametrize(
    "options, parameter",
    [
        ({"kind": "tree"}, "kind"),
        ({"k": 0}, "k"),
        ({"weights": "near"}, "weights"),
        ({"C": 0.0}, "C"),
        ({"knn_share": 2.0}, "knn_share"),
        ({"unknown_threshold": -1}, "unknown_threshold"),
        ({"class_weight": "balanced"}, "class_weight"),
    ],
)
def test_bad_options_name_their_parameter(options, parameter):
    with pytest.raises(OptionError) as caught:
        Classifier(**options)
    assert caught.value.parameter == parameter


@pytest.mark.parametrize("weights", ["uniform", "distance"])
def test_each_mixture_answers_with_the_formula_over_the_head_and_the_vote(weights):
    """(1 - s) x the head's probabilities + s x the k-NN vote's shares, worked out here with scikit-learn's logistic
    regression and neighbours; choose keeps the best of the shares it tries."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import NearestNeighbors

    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 240)
    x = normalize(rng.normal(size=(4, 12))[y] + rng.normal(scale=1.2, size=(240, 12)))
    names = np.array(["a", "b", "c", "d"])[y]
    refs, ref_y, queries, gold = x[:180], names[:180], x[180:], names[180:]
    head = LogisticRegression(C=1.0, max_iter=1000).fit(refs, ref_y).predict_proba(queries)
    dist, idx = NearestNeighbors(n_neighbors=7, metric="cosine").fit(refs).kneighbors(queries)
    w = np.ones_like(dist) if weights == "uniform" else 1.0 / dist
    votes = np.stack([(w * (ref_y[idx] == c)).sum(1) for c in "abcd"], 1)
    votes /= votes.sum(1, keepdims=True)
    accuracy = {}
    for share in (0.0, 0.25, 0.5, 0.75):
        spec = Classifier("linear", k=7, weights=weights, C=1.0, knn_share=share, class_weight=None)
        got = spec.answer(refs, ref_y, queries).labels
        expected = np.array(list("abcd"))[((1 - share) * head + share * votes).argmax(1)]
        assert np.mean(got == expected) >= 0.99  # lbfgs to a tolerance: a near tie may fall the other way
        accuracy[share] = 100 * np.mean(got == gold)
    spec, report = Classifier.choose(
        refs, ref_y, queries, gold, ks=(7,), Cs=(1.0,), weights=(weights,), class_weight=None
    )
    assert report["accuracy"] >= max(accuracy.values()) - 1  # within a near tie of the best share
    assert report["accuracy"] == round(100 * np.mean(spec.answer(refs, ref_y, queries).labels == gold), 2)


def test_choose_picks_k_and_weights_on_dev():
    # one reference of class a right on each query, three of class b a little further: only k = 1 gets them right
    refs = np.array([[1, 0], [0.9, 0.44], [0.9, 0.43], [0.9, 0.42], [0, 1], [0.1, 0.99]], dtype=np.float32)
    labels = np.array(["a", "b", "b", "b", "b", "b"])
    spec, report = Classifier.choose(
        refs, labels, np.array([[1, 0.01], [0, 1]], dtype=np.float32), ["a", "b"], ks=(1, 3, 5), kinds=("knn",)
    )
    assert (spec.kind, spec.k, spec.weights) == ("knn", 1, "uniform") and report["accuracy"] == 100.0
    assert report["knn"] == {"k": 1, "weights": "uniform", "accuracy": 100.0} and "linear" not in report
    three, _ = Classifier.choose(
        refs,
        labels,
        np.array([[1, 0.01], [0, 1]], dtype=np.float32),
        ["a", "b"],
        ks=(3,),
        weights=("uniform",),
        kinds=("knn",),
    )
    assert three.answer(refs, labels, np.array([[1, 0.01]], dtype=np.float32)).labels.tolist() == ["b"]


def test_the_choice_judges_the_head_it_ships_class_weights_included():
    """A class of 3 examples beside classes of 40: the weighted head (the bundle's default) and the unweighted one
    answer differently, and choose reports the accuracy of the one it returns, as that classifier answers."""
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(3, 16))
    y = np.array([0] * 40 + [1] * 40 + [2] * 3 + [0] * 20 + [1] * 20 + [2] * 20)
    x = normalize(centres[y] + rng.normal(scale=1.0, size=(len(y), 16)))
    names = np.array(["big", "other", "small"])[y]
    refs, ref_y, dev, gold = x[:83], names[:83], x[83:], names[83:]
    for weight in ("median", None):
        spec, report = Classifier.choose(refs, ref_y, dev, gold, kinds=("linear",), shares=(0.0,), class_weight=weight)
        assert spec.class_weight == weight and spec.kind == "linear"
        assert report["accuracy"] == round(100 * np.mean(spec.answer(refs, ref_y, dev).labels == gold), 2)
    weighted = Classifier("linear", C=1.0).answer(refs, ref_y, dev).labels
    plain = Classifier("linear", C=1.0, class_weight=None).answer(refs, ref_y, dev).labels
    assert np.sum(weighted == "small") > np.sum(plain == "small")


def test_choose_on_label_sets_picks_a_kind_and_its_threshold():
    rng = np.random.default_rng(2)
    centres = normalize(rng.normal(size=(3, 8)))
    sets = [("a",), ("b",), ("a", "b"), ("c",)]
    rows = rng.integers(0, 4, 200)
    means = np.array([centres[0], centres[1], centres[0] + centres[1], centres[2]])
    x = normalize(means[rows] + rng.normal(scale=0.3, size=(200, 8)))
    label_sets = [sets[r] for r in rows]
    spec, report = Classifier.choose(x[:150], label_sets[:150], x[150:], label_sets[150:], ks=(3, 5))
    assert spec.multi_label and spec.label_threshold is not None and "micro_f1" in report
    assert report["micro_f1"] >= max(report["knn"]["micro_f1"], report["linear"]["micro_f1"]) - 1e-9
    from cea.evaluation.multilabel import multilabel_scores

    answered = [tuple(sorted(label for label, _ in r)) for r in spec.answer(x[:150], label_sets[:150], x[150:]).ranked]
    assert multilabel_scores(answered, label_sets[150:])["micro_f1"] == report["micro_f1"] > 80


def test_a_trained_head_answers_alone_and_is_chosen_only_where_better_on_dev():
    """Training's dev judgement: the head with no references (its probability the evidence); choose keeps a training
    run's head where it beats every fitted one on dev, ties going to the fitted head; a trained head is given, never
    fitted by answer."""
    from cea.knn.head import LinearHead

    refs, labels = _clusters(40, seed=1)
    dev, gold = _clusters(20, seed=2)
    fitted = fit_head(refs, labels, 10.0)
    alone = Classifier(head="trained").decide(fitted, dev)
    proba = fitted.predict_proba(dev)
    assert alone.labels.tolist() == fitted.classes[proba.argmax(1)].tolist()
    np.testing.assert_allclose(alone.evidence, proba.max(1))
    with pytest.raises(OptionError, match="neighbour_labels are needed by a kNN vote"):
        Classifier(knn_share=0.5).decide(fitted, dev)
    wrong = LinearHead(np.array(["a", "b"]), -fitted.coef, -fitted.intercept)  # every answer swapped
    spec, report = Classifier.choose(refs, labels, dev, gold, trained=wrong)
    assert spec.head == "fit" and "head" not in report["linear"]
    shifted = np.where(dev[:, 2] > 0, "a", "b")  # dev gold by a rule the references do not show, a trained head does
    knows = LinearHead(np.array(["a", "b"]), np.array([[0, 0, -20.0, 0, 0, 0, 0, 0]]), np.zeros(1))  # b's one logit
    spec, report = Classifier.choose(refs, labels, dev, shifted, trained=knows)
    assert spec.head == "trained" and spec.kind == "linear" and report["accuracy"] == report["linear"]["accuracy"]
    assert report["linear"]["head"] == "trained" and report["accuracy"] > report["knn"]["accuracy"] + 20
    with pytest.raises(OptionError, match="head is trained: it comes with its encoder"):
        Classifier(head="trained").answer(refs, labels, dev)
    assert Classifier.from_manifest(Classifier(head="trained").manifest()).head == "trained"


def test_a_setting_replaces_the_default_only_where_dev_is_sure_of_it():
    """A trained head that knows dev's rule beats the default head on every dev text it answers differently: on five
    dev texts that is one text (not sure: the default is kept, and the report says why); on forty, nineteen."""
    from cea.knn.head import LinearHead

    refs, labels = _clusters(40, seed=1)
    dev, _ = _clusters(20, seed=2)
    shifted = np.where(dev[:, 2] > 0, "a", "b")
    knows = LinearHead(np.array(["a", "b"]), np.array([[0, 0, -20.0, 0, 0, 0, 0, 0]]), np.zeros(1))
    free, _ = Classifier.choose(refs, labels, dev[:5], shifted[:5], trained=knows, sure=0)
    assert free.head == "trained"
    kept, report = Classifier.choose(refs, labels, dev[:5], shifted[:5], trained=knows)
    assert kept == Classifier(k=kept.k, weights=kept.weights) and report["kept_default"] == "1 won, 0 lost on dev"
    assert report["accuracy"] == 80.0
    sure, report = Classifier.choose(refs, labels, dev, shifted, trained=knows)
    assert sure.head == "trained" and "kept_default" not in report and report["accuracy"] == 100.0


def test_class_probabilities_are_what_the_answer_weighs():
    refs, labels = _clusters(40, seed=2)
    queries, _ = _clusters(10, seed=3)
    linear = Classifier("linear", k=5, knn_share=0.5)
    classes, proba = linear.class_probabilities(refs, labels, queries)
    head = linear.fit(refs, labels)
    sims, neighbours = _nearest(queries, refs, labels)
    np.testing.assert_allclose(proba, linear.probabilities(head, queries, sims, neighbours), atol=1e-6)
    decision = linear.answer(refs, labels, queries)
    assert classes.tolist() == ["a", "b"] and (classes[proba.argmax(1)] == decision.labels).all()
    np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-6)
    knn = Classifier("knn", k=5, weights="uniform")
    classes, shares = knn.class_probabilities(refs, labels, queries[:1])
    np.testing.assert_allclose(shares[0], [(neighbours[0] == c).sum() / 5 for c in classes])  # each neighbour 1/5
    assert shares.shape == (1, len(classes)) and shares.sum() == pytest.approx(1.0)
    with pytest.raises(OptionError, match="head"):
        Classifier("linear", head="trained").class_probabilities(refs, labels, queries)
