"""The encoder fine-tuned on the labelled texts before grouping (cea.discover.tuning)."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest

from cea.discover import discover, discover_protocol
from cea.discover.tuning import fine_tune, labelled_part
from cea.errors import CeaError, OptionError

from .test_discover import _toy


def _weights(folder):
    from cea.encoders import load_encoder

    return {k: v.detach().clone() for k, v in load_encoder(str(folder)).state_dict().items()}


def test_fine_tune_trains_the_encoder_on_the_labelled_texts_only(tmp_path, tiny_bert_dir):
    texts, labels = labelled_part(["a card", "lost card", "x", "a transfer", "money transfer", "y"],
                                  ["card", "card", None, "transfer", "transfer", None])
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
    frozen = discover_protocol(_toy(), 0.5, 0.3, seed=0, model=tiny_bert_dir, contrast=False)
    tuned = discover_protocol(_toy(), 0.5, 0.3, seed=0, model=tiny_bert_dir, contrast=False, fine_tune=True)
    assert tuned["config"]["fine_tune"] is True and frozen["config"]["fine_tune"] is False
    assert tuned["seconds"]["fine_tune"] > 0 and "fine_tune" not in frozen["seconds"]
    assert tuned["model_fingerprint"] != frozen["model_fingerprint"]  # grouped in the trained encoder's space
    assert list((tmp_path / "tmp").iterdir()) == []  # the run and its model removed


@pytest.mark.parametrize("kwargs, message", [
    ({"embeddings": np.eye(3, 4), "labels": ["a", "b", None]}, "pass no embeddings"),
    ({"labels": ["a", "a", None]}, "two classes at least"),
])
def test_fine_tuning_is_refused_where_it_cannot_run(kwargs, message):
    with pytest.raises(OptionError, match=message):
        discover(["one text", "another", "a third"], model="no-such-model-is-loaded", fine_tune=True, **kwargs)
