"""The bag-of-embeddings encoder (classification vs metric learning study): built from texts, trained from scratch,
transferred."""

import numpy as np
import pytest

from cea.encoders import forget_fingerprint, model_fingerprint
from cea.encoders.bag import build_bag_encoder, parse_bag
from cea.errors import CeaError
from cea.training import TrainConfig, train


def test_vocabulary_tokenisation_and_mean_of_word_vectors():
    model = build_bag_encoder(["The cat, the dog!", "a CAT"], dim=4, seed=0)
    vocab = model[0].tokenizer.get_vocab()
    assert {"the", "cat", ",", "dog", "!", "a", "[UNK]"} <= set(vocab) and "CAT" not in vocab
    weights = model[0].embedding.weight.detach().cpu().numpy()  # the model sits on CUDA where there is one
    assert weights.shape == (len(vocab), 4) and np.abs(weights).max() <= 0.5
    expected = (weights[vocab["the"]] + weights[vocab["cat"]]) / 2
    np.testing.assert_allclose(model.encode(["the cat"])[0], expected, rtol=1e-5)
    np.testing.assert_allclose(model.encode(["zebra"])[0], weights[vocab["[UNK]"]], rtol=1e-5)
    assert parse_bag("bag") == 32 and parse_bag("bag:64") == 64 and parse_bag("bagel") is None


def test_train_from_scratch_then_transfer(intents_csv, tmp_path):
    first = train(
        TrainConfig(
            dataset=intents_csv,
            model="bag:16",
            objective="softmax",
            output=str(tmp_path / "a"),
            epochs=15,
            batch_size=6,
            k_per_class=2,
            lr=0.05,
            knn_k=3,
        ),
        progress=False,
    )
    assert first["metrics"]["test"]["knn_accuracy"] >= 80  # three classes with their own words
    assert first["model_fingerprint"] != first["base_model_fingerprint"]
    second = train(
        TrainConfig(
            dataset=intents_csv,
            model=str(tmp_path / "a" / "model"),
            objective="triplet",
            output=str(tmp_path / "b"),
            epochs=1,
            batch_size=6,
            k_per_class=2,
            lr=0.05,
            knn_k=3,
        ),
        progress=False,
    )
    assert second["base_model_fingerprint"] == first["model_fingerprint"]
    with pytest.raises(CeaError, match="at least 1"):
        parse_bag("bag:0")


def test_fingerprint_of_a_bag_changes_with_its_weights():
    model = build_bag_encoder(["a b c"], dim=3)
    before = model_fingerprint(model)
    forget_fingerprint(model)
    with __import__("torch").no_grad():
        model[0].embedding.weight[0, 0] += 1
    assert model_fingerprint(model) != before
