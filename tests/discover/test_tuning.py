"""The encoder fine-tuned on the labelled texts before grouping (cea.discover.tuning)."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest

from cea.discover import discover, discover_protocol
from cea.discover.tuning import fine_tune, labelled_part
from cea.errors import CeaError, OptionError
from cea.knn.search import normalize

from .test_run import _toy


def _weights(folder):
    from cea.encoders import load_encoder

    encoder = load_encoder(str(folder), device="cpu")  # compared as NumPy arrays: on the CPU where a GPU is the default
    return {k: v.detach().clone() for k, v in encoder.state_dict().items()}


def test_fine_tune_trains_the_encoder_on_the_labelled_texts_only(tmp_path, tiny_bert_dir):
    texts, labels = labelled_part(
        ["a card", "lost card", "x", "a transfer", "money transfer", "y"],
        ["card", "card", None, "transfer", "transfer", None],
    )
    assert texts == ["a card", "lost card", "a transfer", "money transfer"] and None not in labels
    frame = _toy(3, 12)["train"]
    folder = fine_tune(tiny_bert_dir, list(frame["text"]), list(frame["label"]), work=tmp_path, seed=0)
    before, after = _weights(tiny_bert_dir), _weights(folder)
    assert before.keys() == after.keys()
    moved = [k for k in before if not np.allclose(before[k].numpy(), after[k].numpy())]
    assert moved and all("word_embeddings" not in k for k in moved)  # trained, the word embeddings kept (softmax)
    with pytest.raises(CeaError, match="two classes at least"):
        fine_tune(tiny_bert_dir, ["a", "b"], ["x", "x"], work=tmp_path / "one")


def test_the_protocol_fine_tunes_first_and_leaves_nothing_behind(tmp_path, tiny_bert_dir, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    frozen = discover_protocol(_toy(), 0.5, 0.3, seed=0, model=tiny_bert_dir, contrast=False, fine_tune=False)
    tuned = discover_protocol(_toy(), 0.5, 0.3, seed=0, model=tiny_bert_dir, contrast=False)  # the default: auto
    assert tuned["config"]["fine_tune"] is True and frozen["config"]["fine_tune"] is False
    assert tuned["seconds"]["fine_tune"] > 0 and "fine_tune" not in frozen["seconds"]
    assert tuned["model_fingerprint"] != frozen["model_fingerprint"]  # grouped in the trained encoder's space
    assert list((tmp_path / "tmp").iterdir()) == []  # the run and its model removed


def test_a_second_run_on_the_same_labelled_texts_reads_the_trained_embeddings_back(tiny_bert_dir, monkeypatch):
    from cea.discover import space, tuning

    first = discover_protocol(_toy(), 0.5, 0.3, seed=0, model=tiny_bert_dir, contrast=False, fine_tune=True)
    assert first["seconds"]["fine_tune"] > 0

    def untrained(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(space, "tune", untrained)  # space trains through tuning.fine_tune
    again = discover_protocol(_toy(), 0.5, 0.3, seed=0, model=tiny_bert_dir, contrast=False, fine_tune=True)
    assert again["seconds"]["fine_tune"] == 0 and again["config"]["fine_tune"] is True
    assert again["model_fingerprint"] == first["model_fingerprint"] and "+tuned-" in first["model_fingerprint"]
    assert again["metrics"]["test"] == first["metrics"]["test"]  # the same space, the same clusters
    with pytest.raises(AssertionError, match="trained again"):  # another seed is another training run
        discover_protocol(_toy(), 0.5, 0.3, seed=1, model=tiny_bert_dir, contrast=False, fine_tune=True)
    texts, labels = ["a card", "lost card", "a transfer"], ["card", "card", "transfer"]
    name = tuning.tuned_fingerprint("base", texts, labels)
    assert name.startswith("tuned-") and name == tuning.tuned_fingerprint("base", texts, labels)
    assert name != tuning.tuned_fingerprint("other base", texts, labels)
    assert name != tuning.tuned_fingerprint("base", texts, ["card", "transfer", "transfer"])
    assert name != tuning.tuned_fingerprint("base", texts, labels, seed=1)


@pytest.mark.parametrize("keep_frozen", [True, False])
def test_the_trained_space_keeps_the_frozen_encoders_embeddings_beside_it(tiny_bert_dir, keep_frozen):
    from cea.discover.tuning import tuned_fingerprint
    from cea.encoders import EmbeddingStore, load_encoder, model_fingerprint

    frame = _toy(4, 10)["train"]
    texts, labels = list(frame["text"]), [lab if i % 2 else None for i, lab in enumerate(frame["label"])]
    found = discover(
        texts, labels, model=tiny_bert_dir, clusters=4, contrast=False, fine_tune=True, keep_frozen=keep_frozen
    )
    base = model_fingerprint(load_encoder(tiny_bert_dir, device="cpu"))
    store = EmbeddingStore(root=True)  # what discover keeps on disk, by the encoder's name
    tuned = store.get(tuned_fingerprint(base, *labelled_part(texts, labels)), texts)
    frozen = store.get(base, texts)
    assert tuned is not None and (frozen is not None) == keep_frozen  # the frozen encode only where kept
    space = np.hstack([normalize(frozen), normalize(tuned)]) if keep_frozen else normalize(tuned)
    same = discover(texts, labels, embeddings=space, clusters=4, contrast=False)
    assert np.array_equal(found.clusters, same.clusters)
    assert ("encode_frozen" in found.seconds) == keep_frozen and found.model_fingerprint.startswith(
        f"{base}+" if keep_frozen else "tuned-"
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"embeddings": np.eye(3, 4), "labels": ["a", "b", None]}, "pass no embeddings"),
        ({"labels": ["a", "a", None]}, "two classes at least"),
    ],
)
def test_fine_tuning_is_refused_where_it_cannot_run(kwargs, message):
    with pytest.raises(OptionError, match=message):
        discover(["one text", "another", "a third"], model="no-such-model-is-loaded", fine_tune=True, **kwargs)


def test_auto_fine_tunes_only_where_two_classes_and_ten_texts_are_labelled():
    from cea.discover.tuning import worth_it

    assert worth_it(["a"] * 5 + ["b"] * 5 + [None] * 3)
    assert not worth_it(["a"] * 5 + ["b"] * 4 + [None] * 30)  # nine labelled texts: no tenth to judge on
    assert not worth_it(["a"] * 20 + [None] * 3)  # one class
    x = np.random.default_rng(0).normal(size=(24, 8)).astype(np.float32)
    labels = ["a"] * 6 + ["b"] * 6 + [None] * 12
    found = discover([f"t{i}" for i in range(24)], labels, embeddings=x, clusters=3, contrast=False)
    assert "fine_tune" not in found.seconds  # given embeddings: auto leaves the space as it is
    with pytest.raises(OptionError, match="must be auto, True or False"):
        discover([f"t{i}" for i in range(24)], labels, embeddings=x, fine_tune="yes")


def test_a_dev_draw_of_last_texts_falls_back_to_one_text_of_the_largest_class(tmp_path, tiny_bert_dir, monkeypatch):
    """Eleven texts unstratified (a class of one): whatever the tenth drawn, the run gets a dev text and trains."""
    texts = [f"card lost {i}" for i in range(9)] + ["a transfer", "money moved"]
    labels = ["card"] * 9 + ["transfer", "other"]
    import sklearn.model_selection as ms

    monkeypatch.setattr(ms, "train_test_split", lambda frame, **kw: (frame.iloc[:-1], frame.iloc[-1:]))  # "other"
    folder = fine_tune(tiny_bert_dir, texts, labels, work=tmp_path, seed=0)
    assert any(folder.glob("*.json"))


def test_the_fine_tuning_reports_to_the_tracker_asked_for(tmp_path, tiny_bert_dir, monkeypatch):
    import mlflow

    monkeypatch.setenv("CEA_CACHE", str(tmp_path / "cache"))  # trained here, not read from another test's cache
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    discover_protocol(_toy(), 0.5, 0.3, seed=0, model=tiny_bert_dir, contrast=False, fine_tune=True, report_to="mlflow")
    runs = mlflow.search_runs(experiment_names=["Default"], output_format="list")
    assert len(runs) == 1 and runs[0].data.params["cea.label_names"] == "off"
    assert "loss" in runs[0].data.metrics and "test_knn_accuracy" in runs[0].data.metrics
