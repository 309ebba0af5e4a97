"""The discovery protocol's split (bolt-lab / TEXTOIR): known classes drawn, 10% of their texts labelled, no new class's
label ever among the labelled."""

import pandas as pd
import pytest

from cea.data.dataset import TextDataset, discovery_split
from cea.errors import OptionError


def _dataset(n_classes=20, per_class=30):
    rows = [(f"text {c} {i}", f"class{c:02d}") for c in range(n_classes) for i in range(per_class)]
    frame = pd.DataFrame(rows, columns=["text", "label"])
    test = frame.sample(min(100, len(frame)), random_state=0)
    return TextDataset("toy", {"train": frame, "dev": frame.head(40), "test": test})


@pytest.mark.parametrize("known", [0.25, 0.5, 0.75])
@pytest.mark.parametrize("seed", range(5))
def test_no_new_class_label_leaks_into_the_labelled_share(known, seed):
    ds = _dataset()
    split = discovery_split(ds, known, 0.1, seed)
    assert len(split.known) == round(known * 20) and set(split.known).isdisjoint(split.new)
    assert sorted(split.known + split.new) == ds.labels
    labelled = split.train[split.train["labelled"]]
    assert set(labelled["label"]) == set(split.known)  # every known class labelled, nothing else
    assert not {lab for lab in split.labels if lab is not None} & set(split.new)
    assert all(lab is None for lab, gold in zip(split.labels, split.train["label"]) if gold in split.new)
    assert (labelled.groupby("label").size() == 3).all()  # 10% of 30 per known class
    assert len(split.train) == len(ds["train"]) and list(split.test["text"]) == list(ds["test"]["text"])


def test_the_draws_follow_the_seed():
    ds = _dataset()
    a, b, c = (discovery_split(ds, 0.5, 0.1, s) for s in (0, 0, 1))
    assert a.known == b.known and a.labels == b.labels
    assert a.known != c.known


def test_every_known_class_keeps_at_least_one_labelled_text():
    split = discovery_split(_dataset(per_class=4), 0.5, 0.1, 0)
    assert (split.train[split.train["labelled"]].groupby("label").size() == 1).all()


@pytest.mark.parametrize(
    "known, labelled, message",
    [
        (0.0, 0.1, "known_classes must keep"),
        (1.0, 0.1, "known_classes must keep"),
        (0.01, 0.1, "known_classes must keep"),
        (0.5, 0.0, "labelled must be a share"),
    ],
)
def test_bad_shares_name_the_option(known, labelled, message):
    with pytest.raises(OptionError, match=message):
        discovery_split(_dataset(), known, labelled, 0)
