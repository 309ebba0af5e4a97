"""Answers from the label names alone: the running mean of the texts asked about, and the nearest name centred on it."""

import numpy as np
import pytest

from cea.knn.names import MIN_ASKED, SCALE, Asked, nearest_names
from cea.knn.search import normalize


def _space():
    """Two names and two queries over a shared direction (axis 0) that outweighs their own words (axes 1, 2): the
    second name carries more of it, so that uncentred, both queries are nearest the second name."""
    names = normalize(np.array([[1.0, 1.0, 0.0], [3.0, 0.0, 1.0]], np.float32))
    queries = normalize(np.array([[3.0, 1.0, 0.0], [3.0, 0.0, 1.0]], np.float32))
    return names, np.array(["card", "transfer"]), queries


def test_the_mean_of_the_texts_asked_about_centres_only_once_there_are_enough():
    asked = Asked()
    rows = np.random.default_rng(0).normal(size=(MIN_ASKED, 4)).astype(np.float32)
    asked.add(rows[: MIN_ASKED - 1])
    asked.add(rows[:0])
    assert asked.count == MIN_ASKED - 1 and asked.centre is None
    asked.add(rows[MIN_ASKED - 1 :])
    np.testing.assert_allclose(asked.centre, rows.mean(0), rtol=1e-5)


def test_centred_the_names_own_words_decide():
    names, labels, queries = _space()
    plain = nearest_names(names, labels, queries, None)
    assert plain.chosen.tolist() == ["transfer", "transfer"] and plain.rows.tolist() == [[1], [1]]
    chosen, scores, cosines, rows = nearest_names(names, labels, queries, queries.mean(0), k=2)
    assert chosen.tolist() == ["card", "transfer"] and rows.tolist() == [[0, 1], [1, 0]]
    centred_names, centred_queries = normalize(names - queries.mean(0)), normalize(queries - queries.mean(0))
    np.testing.assert_allclose(cosines[0], centred_queries[0] @ centred_names.T, rtol=1e-5)
    gap = cosines[0, 0] - cosines[0, 1]
    assert scores[0] == pytest.approx(1 / (1 + np.exp(-SCALE * gap)), rel=1e-5)


def test_a_label_scores_by_its_nearest_name():
    names = normalize(np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], np.float32))
    labels = ["a", "b", "b"]
    chosen, scores, cosines, rows = nearest_names(
        names, labels, normalize(np.array([[0.8, 0.6]], np.float32)), None, k=5
    )
    assert chosen.tolist() == ["b"] and rows.tolist() == [[2, 0, 1]]  # k is at most the names
    assert scores[0] == pytest.approx(1 / (1 + np.exp(-SCALE * (0.96 - 0.8))), rel=1e-4)
