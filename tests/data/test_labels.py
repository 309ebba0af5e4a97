"""One normalisation of label names for the readers, the bundle and the linear head."""

import numpy as np
import pandas as pd
import pytest

from cea.data.labels import UNKNOWN, label_name, label_set
from cea.data.readers import load_files
from cea.errors import CeaError


def test_a_name_is_its_text_without_surrounding_space():
    assert label_name(" a ") == "a" and label_name(3) == "3" and label_name("lost card") == "lost card"
    assert label_set([" b", "a", "b ", ""]) == ("a", "b")
    assert label_set(" a | b ", "|") == ("a", "b") and label_set("a|b") == ("a|b",)  # no separator: one label
    assert label_set(np.array(["x"])) == ("x",) and label_set(None) == () and label_set(float("nan")) == ()


def test_a_label_read_from_a_file_and_sent_to_the_bundle_is_one_label(tmp_path):
    from cea.bundle.examples import normalise_labels
    from cea.knn.head import fit_label_head

    single, multi = tmp_path / "single.csv", tmp_path / "multi.jsonl"
    pd.DataFrame({"text": ["one", "two"], "label": [" a", "b "]}).to_csv(single, index=False)
    pd.DataFrame({"text": ["one", "two"], "label": [[" a"], ["a", " b"]]}).to_json(multi, orient="records", lines=True)
    ds = load_files({"train": single, "dev": single, "test": single})
    assert list(ds["train"]["label"]) == ["a", "b"]
    ds = load_files({"train": multi, "dev": multi, "test": multi})
    assert list(ds["train"]["labels"]) == [("a",), ("a", "b")]
    assert normalise_labels([" a", "b "], multi=False) == ["a", "b"]  # what the service keeps of the same labels
    assert normalise_labels([[" a"], ["a", " b"]], multi=True) == [("a",), ("a", "b")]
    head = fit_label_head(np.eye(2, 3, dtype=np.float32), [[" a"], ["a", " b"]])
    assert list(head.classes) == ["a", "b"]


def test_the_bundle_refuses_empty_names_and_the_answer_unknown():
    from cea.bundle.examples import normalise_labels

    with pytest.raises(CeaError, match="empty label"):
        normalise_labels(["a", "  "], multi=False)
    with pytest.raises(CeaError, match="empty list of labels"):
        normalise_labels([["a"], [" "]], multi=True)
    with pytest.raises(CeaError, match="answer for texts of none"):
        normalise_labels([f" {UNKNOWN}"], multi=False)
