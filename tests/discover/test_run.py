"""cea.discover.run: the groups named and described, the count estimated when asked, the protocol's files, and bad
input refused before any work; cea.discover offers the run's names."""

import json

import pandas as pd
import pytest

import cea.discover
from cea.data.dataset import TextDataset
from cea.discover import run
from cea.discover.run import discover, discover_protocol
from cea.errors import CeaError, OptionError

from .test_groups import _blobs


def test_discover_on_blobs_names_known_clusters_and_describes_new_groups():
    x, y, labels, known = _blobs(8, 0, labelled=0.2)
    names = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    texts = [f"text {i} about {names[t]} today" for i, t in enumerate(y)]
    found = discover(texts, labels, embeddings=x, clusters=8, seed=0, whiten=False)
    assert found.n_clusters == 8 and len(found.groups) == 8 and found.known == known
    kinds = [g["kind"] for g in found.groups]
    assert kinds.count("known") == len(known) and kinds == sorted(kinds)  # the known groups first
    assert sum(g["size"] for g in found.groups) == sum(lab is None for lab in labels)
    for g in found.groups:
        assert len(g["central_texts"]) == 5 and g["nearest_known"]["label"] in known
        assert g["nearest_known"]["label"] != g["known_class"]
        topic = {t.split()[3] for t in g["central_texts"]}
        assert len(topic) == 1 and topic.pop() in g["words"]  # well-separated blobs: one topic, its word stands out
        if g["kind"] == "known":
            assert {t.split()[3] for t in g["central_texts"]} == {names[int(g["known_class"][1:])]}
    predicted = found.clusters
    from cea.evaluation.clustering import clustering_scores

    assert clustering_scores(y, predicted)["accuracy"] > 95


def test_discover_estimates_the_count_when_auto():
    x, y, labels, _ = _blobs(10, 1, labelled=0.2)
    found = discover(
        [f"t{i}" for i in range(len(x))], labels, embeddings=x, clusters="auto", estimate="silhouette", whiten=False
    )
    assert abs(found.n_clusters - 10) <= 1 and found.estimate["method"] == "silhouette"


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"labels": ["a", "b"]}, CeaError, "every text is labelled"),
        ({"labels": ["a"]}, CeaError, "got 2 texts and 1 labels"),
        ({"labels": ["a", None], "clusters": 0}, OptionError, "clusters must be auto or a whole number of at least 1"),
        ({"labels": [None, None], "clusters": 3}, OptionError, "clusters must be at most the 2 texts"),
        ({"labels": [None, None], "clusters": "many"}, OptionError, "clusters must be auto or a whole number"),
        ({"labels": ["a", None], "labelled_weight": 0}, OptionError, "labelled_weight must be above 0"),
    ],
)
def test_bad_input_is_refused_before_any_work(kwargs, error, message):
    with pytest.raises(error, match=message):
        discover(["one text", "another"], model="no-such-model-is-loaded", **kwargs)


def _toy(n_classes=6, per_class=12):
    words = [
        "bank card lost",
        "transfer money account",
        "capital city country",
        "dog cat red",
        "river blue name",
        "year born who",
    ]
    rows = [(f"{words[c]} {'x' * (i + 1)}", f"class{c}") for c in range(n_classes) for i in range(per_class)]
    frame = pd.DataFrame(rows, columns=["text", "label"])
    return TextDataset("toy", {"train": frame, "dev": frame.head(6), "test": frame.sample(30, random_state=0)})


def test_the_protocol_writes_results_and_groups(tmp_path, tiny_bert_dir):
    out = tmp_path / "run"
    results = discover_protocol(_toy(), 0.5, 0.2, seed=0, output=out, model=tiny_bert_dir)
    saved = json.loads((out / "results.json").read_text())
    assert saved["format"] == "cea.discover/1" and saved["metrics"] == results["metrics"]
    assert set(saved["metrics"]["test"]) >= {"accuracy", "nmi", "ari", "known_accuracy", "new_accuracy"}
    assert saved["n_clusters"] == 6 and saved["config"]["clusters"] == "given" and saved["clusters_estimate"] is None
    assert set(saved["known_classes"]).isdisjoint(saved["new_classes"]) and len(saved["known_classes"]) == 3
    assert saved["config"]["contrast"] is True and "contrast" in saved["seconds"]  # the default space
    groups = json.loads((out / "groups.json").read_text())
    assert groups["format"] == "cea.discover.groups/1" and len(groups["groups"]) == 6
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary leftovers
    with pytest.raises(CeaError, match="already holds a discovery"):
        discover_protocol(_toy(), 0.5, 0.2, seed=0, output=out, model=tiny_bert_dir)
    auto = discover_protocol(_toy(), 0.5, 0.2, seed=0, clusters="auto", model=tiny_bert_dir, contrast=False)
    assert auto["config"]["contrast"] is False and "contrast" not in auto["seconds"]
    assert auto["clusters_estimate"]["true"] == 6
    assert auto["clusters_estimate"]["error"] == auto["n_clusters"] - 6
    # the protocol draws its known classes at random, so their sizes bound the estimate there by default
    assert auto["config"]["estimate"] == auto["clusters_estimate"]["method"] == "sizes"


def test_the_package_offers_the_runs_names():
    assert cea.discover.discover is run.discover and cea.discover.discover_texts is run.discover_texts
    assert set(cea.discover.__all__) <= set(dir(cea.discover))
