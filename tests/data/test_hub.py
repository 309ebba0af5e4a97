"""Hub loaders, tested against local DatasetDicts shaped like the real hub data sets."""

import pytest
from datasets import ClassLabel, Dataset, DatasetDict, Features, Sequence, Value

from cea.data import catalog, load_dataset
from cea.errors import CeaError


def _fake_loader(expected_path, dataset_dict):
    calls = []

    def loader(path, config=None):
        calls.append((path, config))
        assert path == expected_path
        return dataset_dict
    loader.calls = calls
    return loader


def test_sst5_shape():
    rows = {"text": [f"the dog {i}" for i in range(30)], "label": [i % 5 for i in range(30)],
            "label_text": [["very negative", "negative", "neutral", "positive", "very positive"][i % 5]
                           for i in range(30)]}
    dd = DatasetDict({s: Dataset.from_dict(rows) for s in ("train", "validation", "test")})
    ds = load_dataset("sst5", hub_loader=_fake_loader("SetFit/sst5", dd))
    assert ds.labels == ["negative", "neutral", "positive", "very negative", "very positive"]
    assert [len(ds[s]) for s in ("train", "dev", "test")] == [30, 30, 30]
    assert ds.source == "hub SetFit/sst5"


def test_classlabel_names_and_hidden_test_labels():
    feats = Features({"sentence": Value("string"), "label": ClassLabel(names=["negative", "positive"])})
    train = Dataset.from_dict({"sentence": [f"a {i}" for i in range(20)], "label": [i % 2 for i in range(20)]},
                              features=feats)
    val = Dataset.from_dict({"sentence": ["x", "y"], "label": [0, 1]}, features=feats)
    ds = load_dataset("sst2", hub_loader=_fake_loader("stanfordnlp/sst2", DatasetDict(train=train, validation=val)))
    assert list(ds["test"]["label"]) == ["negative", "positive"]
    assert "dev carved from train (10%, seed 0)" in ds.notes


def test_go_emotions_keeps_single_label_rows():
    names = ["admiration", "anger", "joy"]
    feats = Features({"text": Value("string"), "labels": Sequence(ClassLabel(names=names))})
    rows = {"text": [f"t{i}" for i in range(12)], "labels": [[i % 3] if i % 4 else [0, 1] for i in range(12)]}
    split = Dataset.from_dict(rows, features=feats)
    dd = DatasetDict(train=split, validation=split, test=split)
    loader = _fake_loader("google-research-datasets/go_emotions", dd)
    ds = load_dataset("go_emotions", hub_loader=loader)
    assert loader.calls == [("google-research-datasets/go_emotions", "simplified")]
    assert len(ds["test"]) == 9  # the 3 multi-label rows are dropped
    assert set(ds["test"]["label"]) == set(names)


def test_sick_is_a_similarity_set():
    rows = {"sentence_A": ["a dog", "a cat"] * 5, "sentence_B": ["the dog", "a car"] * 5,
            "relatedness_score": [4.5, 1.0] * 5}
    dd = DatasetDict({s: Dataset.from_dict(rows) for s in ("train", "validation", "test")})
    ds = load_dataset("sick", hub_loader=_fake_loader("RobZamp/sick", dd))
    assert ds.task == "similarity"
    assert ds["test"].iloc[0].to_dict() == {"text1": "a dog", "text2": "the dog", "score": 4.5}


def test_hub_unreachable_names_sources_and_the_local_file_route(monkeypatch):
    monkeypatch.setattr(catalog, "hub_reachable", lambda: False)
    with pytest.raises(CeaError) as info:
        load_dataset("ag_news")
    message = str(info.value)
    assert "tried: hub fancyzhx/ag_news (unreachable)" in message
    assert "--dataset FILE" in message and "\n" not in message
