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
    rows = {
        "text": [f"the dog {i}" for i in range(30)],
        "label": [i % 5 for i in range(30)],
        "label_text": [["very negative", "negative", "neutral", "positive", "very positive"][i % 5] for i in range(30)],
    }
    dd = DatasetDict({s: Dataset.from_dict(rows) for s in ("train", "validation", "test")})
    ds = load_dataset("sst5", hub_loader=_fake_loader("SetFit/sst5", dd))
    assert ds.labels == ["negative", "neutral", "positive", "very negative", "very positive"]
    assert [len(ds[s]) for s in ("train", "dev", "test")] == [30, 30, 30]
    assert ds.source == "hub SetFit/sst5"


def test_classlabel_names_and_hidden_test_labels():
    feats = Features({"sentence": Value("string"), "label": ClassLabel(names=["negative", "positive"])})
    train = Dataset.from_dict(
        {"sentence": [f"a {i}" for i in range(20)], "label": [i % 2 for i in range(20)]}, features=feats
    )
    val = Dataset.from_dict({"sentence": ["x", "y"], "label": [0, 1]}, features=feats)
    ds = load_dataset("sst2", hub_loader=_fake_loader("stanfordnlp/sst2", DatasetDict(train=train, validation=val)))
    assert list(ds["test"]["label"]) == ["negative", "positive"]
    assert "dev carved from train (10%, seed 0)" in ds.notes


def test_go_emotions_keeps_every_label_of_a_text():
    names = ["admiration", "anger", "joy"]
    feats = Features({"text": Value("string"), "labels": Sequence(ClassLabel(names=names))})
    rows = {"text": [f"t{i}" for i in range(12)], "labels": [[i % 3] if i % 4 else [0, 1] for i in range(12)]}
    split = Dataset.from_dict(rows, features=feats)
    dd = DatasetDict(train=split, validation=split, test=split)
    loader = _fake_loader("google-research-datasets/go_emotions", dd)
    ds = load_dataset("go_emotions", hub_loader=loader)
    assert loader.calls == [("google-research-datasets/go_emotions", "simplified")]
    assert ds.task == "multilabel" and len(ds["test"]) == 12 and ds.labels == names
    expected = [("admiration", "anger") if i % 4 == 0 else (names[i % 3],) for i in range(12)]
    assert ds["test"]["labels"].tolist() == expected


def test_sick_is_a_similarity_set():
    rows = {
        "sentence_A": ["a dog", "a cat"] * 5,
        "sentence_B": ["the dog", "a car"] * 5,
        "relatedness_score": [4.5, 1.0] * 5,
    }
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


def test_a_catalog_set_missing_from_the_offline_cache_is_one_line():
    def offline(path, config=None):  # what datasets raises under HF_HUB_OFFLINE=1 for a set it has not cached
        raise ConnectionError(f"Couldn't reach '{path}' on the Hub (OfflineModeIsEnabled)")

    with pytest.raises(CeaError) as info:
        load_dataset("sick", hub_loader=offline)
    message = str(info.value)
    assert "tried: hub RobZamp/sick (Couldn't reach 'RobZamp/sick' on the Hub" in message
    assert "--dataset FILE" in message and "\n" not in message


def test_any_hub_data_set_by_id_through_a_saved_copy(tmp_path, intents):
    """`hub:ORG/NAME` with its columns and splits named; offline, the same call reads a folder that
    `save_to_disk` wrote (ClassLabel ids become names), and `datasets.load_dataset` reads data files by path."""
    names = sorted(set(intents["label"]))
    features = Features({"utterance": Value("string"), "intent": ClassLabel(names=names)})
    rows = {"utterance": list(intents["text"]), "intent": [names.index(x) for x in intents["label"]]}
    dd = DatasetDict({s: Dataset.from_dict(rows, features=features) for s in ("training", "eval", "test")})
    ds = load_dataset(
        "hub:acme/intents",
        text_column="utterance",
        label_column="intent",
        split_map="train=training,dev=eval,test=test",
        hub_loader=_fake_loader("acme/intents", dd),
    )
    assert ds.labels == names and [len(ds[s]) for s in ("train", "dev", "test")] == [24, 24, 24]
    assert list(ds["dev"]["label"]) == list(intents["label"]) and ds.notes == []
    saved = tmp_path / "saved"
    dd.save_to_disk(str(saved))
    for spec in (f"hub:{saved}", str(saved)):  # save_to_disk's folder, with or without the prefix
        local = load_dataset(
            spec, text_column="utterance", label_column="intent", split_map="train=training,dev=eval,test=test"
        )
        assert local.name == "saved" and all(local[s].equals(ds[s]) for s in ("train", "dev", "test"))
    with pytest.raises(CeaError, match="no train split .*--split-map"):
        load_dataset(str(saved), text_column="utterance", label_column="intent")
    with pytest.raises(CeaError, match="split_map must map train"):
        load_dataset(str(saved), split_map="dev=eval")
    files = tmp_path / "files"
    files.mkdir()
    for split in ("train", "validation", "test"):  # datasets' own loader by path: its default split names
        intents.to_csv(files / f"{split}.csv", index=False)
    by_path = load_dataset(f"hub:{files}")
    assert [len(by_path[s]) for s in ("train", "dev", "test")] == [24, 24, 24] and by_path.notes == []


def test_a_hub_id_while_the_hub_is_unreachable(monkeypatch):
    monkeypatch.setattr(catalog, "hub_reachable", lambda: False)
    with pytest.raises(CeaError, match="unreachable, so acme/intents cannot be loaded.*save_to_disk"):
        load_dataset("hub:acme/intents")
