"""Requests as records: several callers' predictions and additions answered together, each by its own fields."""

import dataclasses

import numpy as np
import pytest

from cea.bundle import AddRequest, PredictRequest
from cea.errors import CeaError


def test_the_records_name_their_fields_and_default_to_the_bundles_own():
    asked = PredictRequest(["a text"])
    assert (asked.texts, asked.k, asked.threshold) == (["a text"], None, None)
    added = AddRequest(["a text"], ["card"])
    assert (added.vectors, added.version) == (None, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        asked.k = 3


def test_each_prediction_request_keeps_its_own_k_and_threshold(made):
    text = "my card is lost a"
    alone = made.predict([text], k=3)[0]
    plain, wide, strict = made.predict_many(
        [PredictRequest([text]), PredictRequest([text, "where is this"], k=3), PredictRequest([text], threshold=1.5)]
    )
    assert [len(p) for p in (plain, wide, strict)] == [1, 2, 1]
    assert len(plain[0].neighbours) == 1 and len(wide[0].neighbours) == 3  # the bundle's k, then the request's
    assert wide[0].neighbours == alone.neighbours and wide[0].label == alone.label == "card"
    assert plain[0].label == "card" and strict[0].label == "unknown" and strict[0].closest == "card"
    vectors = made.embed([text, "where is this"])
    assert made.predict_encoded([text, "where is this"], vectors, k=3) == wide


def test_additions_with_and_without_their_vectors_are_one_change(made):
    given = made.embed(["blue cat and red dog"])
    before = made.encoder_version
    first, second, third = made.add_many(
        [
            AddRequest(["red dog and blue cat"], ["animals"]),
            AddRequest(["blue cat and red dog"], ["animals"], given, before),
            AddRequest(["a green frog", "a red bird"], ["animals", "birds"]),
        ]
    )
    assert (first, second, third) == ([24], [25], [26, 27])
    assert made.texts[-4:] == ["red dog and blue cat", "blue cat and red dog", "a green frog", "a red bird"]
    np.testing.assert_allclose(made.embeddings[-3], given[0], atol=1e-6)  # the request's own row, not encoded again
    np.testing.assert_allclose(made.embeddings[-1], made.embed(["a red bird"])[0], atol=1e-5)
    assert made.label_counts["animals"] == 3 and made.label_counts["birds"] == 1
    with pytest.raises(CeaError, match="add needs texts with labels; got 2 texts and 1 labels"):
        made.add_many([AddRequest(["one"], ["card"]), AddRequest(["two", "three"], ["card"])])
    assert len(made) == 28  # nothing of a refused batch added
