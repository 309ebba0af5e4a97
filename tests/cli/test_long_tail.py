"""Long tails: a folder (train.csv, test.csv) whose rarest classes have one to three training examples goes through
every command; dev is carved around a class's only example, and a line says so."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
from sklearn.metrics import f1_score

from cea.bundle import Bundle
from cea.data import load_dataset
from cea.knn.decision import Classifier

SIZES = {"colour": 2, "pets": 1, "born": 3, "card": 8, "geo": 8, "transfer": 8}  # the rare first, as a file may be
TOPICS = {
    "colour": "red and blue",
    "pets": "the dog and the cat",
    "born": "what year was i born",
    "card": "my card is lost",
    "geo": "what is the capital city",
    "transfer": "transfer money to my account",
}
NOTE = "kept in train, not carved: the only example of pets"


def run(*args):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "cea", *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture
def folder(tmp_path):
    data = tmp_path / "news"
    data.mkdir()
    train = [(f"{TOPICS[label]} {'abcdefgh'[i] * (i + 1)}", label) for label, n in SIZES.items() for i in range(n)]
    test = [(f"{TOPICS[label]} {'xy'[i] * (i + 2)}", label) for label in SIZES for i in range(2)]
    pd.DataFrame(train, columns=["text", "label"]).to_csv(data / "train.csv", index=False)
    pd.DataFrame(test, columns=["text", "label"]).to_csv(data / "test.csv", index=False)
    return data


def test_fit_ships_a_bundle_of_every_class(folder, tiny_bert_dir, tmp_path):
    proc = run(
        "fit",
        str(folder),
        "--models",
        tiny_bert_dir,
        "-o",
        str(tmp_path / "b"),
        "--work",
        str(tmp_path / "w"),
        "--budget",
        "2m",
        "--device",
        "cpu",
        "--label-names",
        "off",
    )
    assert proc.returncode == 0, proc.stderr
    assert NOTE in proc.stderr
    summary = json.loads((tmp_path / "b" / "fit.json").read_text())
    assert summary["training"]["ran"] and summary["references"] == 30 + 12  # trained with K=4 over classes of 1-3
    bundle = Bundle.load(tmp_path / "b")
    assert bundle.label_counts == {label: n + 2 for label, n in SIZES.items()}
    # rare: fewer than 5 train texts (born gave dev one); dev and test figures as the chosen encoder and classifier
    # give them, train (and dev, for test) as references
    assert summary["rare"] == {"below": 5, "labels": ["born", "colour", "pets"]}
    source = tmp_path / "w" / ("train/model" if summary["chosen"] == "trained" else "frozen-model")
    ds, chosen = load_dataset(str(folder)), summary["candidates"][summary["chosen"]]
    assert list(ds["dev"]["label"]) == ["born", "geo", "transfer"]
    for split, references in (("dev", ds["train"]), ("test", pd.concat([ds["train"], ds["dev"]]))):
        judge = Bundle.create(
            tmp_path / split,
            str(source),
            list(references["text"]),
            list(references["label"]),
            label_names="off",
            progress=False,
            classifier=Classifier.from_manifest(bundle.manifest),
        )
        gold, predicted = list(ds[split]["label"]), [p.label for p in judge.predict(list(ds[split]["text"]))]
        rare = sorted({"born", "colour", "pets"} & set(gold + predicted))
        assert chosen[split]["macro_f1"] == round(100 * f1_score(gold, predicted, average="macro"), 2)
        assert chosen[split]["rare_f1"] == round(100 * f1_score(gold, predicted, labels=rare, average="macro"), 2)
    page = (tmp_path / "b" / "report.html").read_text()
    assert (
        "<th>test rare-F1</th>" in page and "the 3 labels of fewer than 5 training texts (born, colour, pets)" in page
    )
    assert f"macro-F1 {summary['test']['macro_f1']:.2f}, rare-class F1 {summary['test']['rare_f1']:.2f}" in proc.stdout


def test_train_with_the_default_p_x_k_sampler(folder, tiny_bert_dir, tmp_path):
    proc = run(
        "train",
        "--dataset",
        str(folder),
        "--model",
        tiny_bert_dir,
        "--output",
        str(tmp_path / "r"),
        "--max-steps",
        "2",
        "--device",
        "cpu",
        "--label-names",
        "off",
    )
    assert proc.returncode == 0, proc.stderr
    assert NOTE in proc.stderr
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["config"]["sampler"] == "pk" and results["config"]["k_per_class"] == 4 and results["steps"] == 2


def test_bundle_of_the_train_split_keeps_every_class(folder, tiny_bert_dir, tmp_path):
    proc = run(
        "bundle",
        tiny_bert_dir,
        "--dataset",
        str(folder),
        "--splits",
        "train",
        "-o",
        str(tmp_path / "b"),
        "--label-names",
        "off",
    )
    assert proc.returncode == 0, proc.stderr
    counts = Bundle.load(tmp_path / "b").label_counts
    assert counts["pets"] == 1 and set(counts) == set(SIZES) and sum(counts.values()) == 27  # dev: 3 carved


def test_discover_with_rare_known_classes(folder, tiny_bert_dir, tmp_path):
    proc = run(
        "discover",
        "--dataset",
        str(folder),
        "--known-classes",
        "0.5",
        "--labelled",
        "1",
        "--fine-tune",
        "--model",
        tiny_bert_dir,
        "--device",
        "cpu",
        "--output",
        str(tmp_path / "d"),
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "d" / "results.json").read_text())
    assert sorted(results["known_classes"] + results["new_classes"]) == sorted(SIZES)
    assert results["n_train"] == 27 and results["n_test"] == 12


def test_check_with_rare_classes(folder, tiny_st_dir, tmp_path):
    proc = run("check", str(folder), "--model", tiny_st_dir, "-o", str(tmp_path / "issues.csv"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "issues.csv").exists()


def test_fit_checks_the_data_before_probing(folder, tiny_bert_dir, tmp_path):
    pd.DataFrame({"text": ["a green dog"], "label": ["green"]}).to_csv(folder / "dev.csv", index=False)
    proc = run("fit", str(folder), "--models", tiny_bert_dir, "-o", str(tmp_path / "b"), "--work", str(tmp_path / "w"))
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "error: no dev text has a label of the train split (dev: green); give dev texts of the train split's labels, "
        "or no dev split (it is then carved from train)"
    )
    assert not (tmp_path / "b").exists() and not (tmp_path / "w").exists()
