"""cea.labelling.check: flipped labels found on a toy space, duplicates labelled differently, the cleaned copy."""

import numpy as np
import pandas as pd
import pytest

from cea.errors import CeaError
from cea.labelling.check import check_labels, conflicting_duplicates, fixed, neighbour_votes


def _space(seed=0, per=40, classes=4, flips=8):
    rng = np.random.default_rng(seed)
    truth = np.repeat(np.arange(classes), per)
    x = rng.normal(size=(classes, 16))[truth] * 3 + rng.normal(size=(len(truth), 16))
    labels = np.array([f"c{i}" for i in truth], dtype=object)
    flipped = np.sort(rng.choice(len(truth), flips, replace=False))
    for i in flipped:
        labels[i] = f"c{(truth[i] + 1) % classes}"
    return [f"text {i}" for i in range(len(truth))], labels, x, flipped, truth


@pytest.mark.parametrize("knn_share", [0.0, 0.5, 1.0])
def test_the_flipped_labels_are_found_and_their_true_label_suggested(knn_share):
    texts, labels, x, flipped, truth = _space()
    check = check_labels(texts, labels, x, knn_share=knn_share)
    assert sorted(check.issues["row"]) == flipped.tolist()
    assert check.issues["suggested"].tolist() == [f"c{truth[r]}" for r in check.issues["row"]]
    assert check.issues["score"].is_monotonic_decreasing and (check.issues["score"] > 0.5).all()
    assert check.issues["neighbours"].min() >= 0.8  # their neighbours carry the true label
    gold, taken_for, n = check.confused[0]  # c_i flipped to c_i+1 looks like c_i+1 taken for c_i
    assert int(taken_for[1:]) == (int(gold[1:]) - 1) % 4 and n >= 1


def test_clean_labels_are_left_alone():
    texts, labels, x, _, truth = _space(flips=0)
    assert check_labels(texts, labels, x).issues.empty


def test_neighbour_votes_leave_the_text_itself_out():
    x = np.array([[1.0, 0], [0.99, 0.1], [0, 1.0], [0.1, 0.99]])
    votes = neighbour_votes(x, np.array([0, 1, 1, 1]), 2, k=1)
    assert votes.tolist() == [[0, 1], [1, 0], [0, 1], [0, 1]]


def test_duplicates_labelled_differently_exact_and_near():
    texts = ["Lost my card", "lost  my CARD", "a transfer", "a transfer!", "the capital", "far away"]
    labels = np.array(["card", "transfer", "transfer", "card", "geo", "geo"])
    x = np.array([[1, 0, 0], [0.2, 1, 0], [0, 1, 0], [0, 1, 0.01], [0, 0, 1], [0.7, 0, 0.7]], float)
    found = conflicting_duplicates(texts, labels, x, near=0.99)
    assert found[["row_a", "row_b"]].values.tolist() == [[0, 1], [2, 3]]  # the same once lower-cased; cosine 1.0
    assert found["label_b"].tolist() == ["transfer", "card"]


def test_the_cleaned_copy_drops_or_relabels_only_the_flagged_rows():
    texts, labels, x, flipped, truth = _space()
    frame = pd.DataFrame({"text": texts, "label": labels})
    check = check_labels(texts, labels, x)
    dropped = fixed(frame, check, "drop")
    assert len(dropped) == len(frame) - len(flipped) and not set(dropped["text"]) & {texts[i] for i in flipped}
    relabelled = fixed(frame, check, "relabel")
    assert relabelled["label"].tolist() == [f"c{t}" for t in truth]
    assert frame["label"].tolist() == labels.tolist()  # the input is not touched


def test_the_checking_classifier_is_the_bundles_regularised_by_C():
    from cea.knn.decision import Classifier
    from cea.labelling.check import CHECK_C, out_of_fold

    texts, labels, x, flipped, _ = _space()
    issues = check_labels(texts, labels, x, knn_share=0.0).issues
    for C in (CHECK_C, 100.0):
        probs, _, classes = out_of_fold(x, labels.astype(str), classifier=Classifier(C=C))
        given = probs[issues["row"], np.searchsorted(classes, issues["label"])]
        assert np.allclose(issues["score"], np.round(1 - given, 4)) == (C == CHECK_C)
    loose = check_labels(texts, labels, x, knn_share=0.0, C=100.0).issues.set_index("row")["score"]
    both = issues.set_index("row")["score"].index.intersection(loose.index)
    assert len(both) >= 6 and (loose[both] > issues.set_index("row")["score"][both]).all()  # surer of the true class


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"labels": ["a"] * 6}, "single label"),
        ({"folds": 1}, "folds must be at least 2"),
        ({"knn_share": 2}, "knn_share must be between 0 and 1"),
        ({"texts": ["x"]}, "1 texts, 6 labels"),
        ({"C": 0}, "C must be positive"),
    ],
)
def test_bad_input_is_refused(kwargs, message):
    args = {"texts": [str(i) for i in range(6)], "labels": ["a", "b"] * 3, "embeddings": np.eye(6), **kwargs}
    with pytest.raises(CeaError, match=message):
        check_labels(**args)


def test_checking_never_forks(monkeypatch):
    """A process forked while another thread holds a lock can wait on it for ever (fit's torch, Ray, the service's
    batcher all run threads), so the check runs in the calling process."""
    import multiprocessing

    def no_fork(*args, **kwargs):
        raise AssertionError("check_labels forked a process pool")

    monkeypatch.setattr(multiprocessing, "Pool", no_fork)
    monkeypatch.setattr("psutil.cpu_count", lambda logical=True: 4)  # cleanlab's default would fork 4 here
    texts, labels, x, flipped, _ = _space()
    assert sorted(check_labels(texts, labels, x).issues["row"]) == flipped.tolist()
