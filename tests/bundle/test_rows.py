"""Rows: a bundle's rows in memory, built from what a store loads and changed by records, looked up by id and
source; the live rows one record, tombstones left out."""

import numpy as np
import pytest

from cea.bundle.examples import NAMED
from cea.bundle.references import Loaded
from cea.bundle.rows import Rows
from cea.errors import CeaError
from cea.knn import build_index


def unit(n, seed=0):
    vectors = np.random.default_rng(seed).normal(size=(n, 4)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def rows_of(labels, sources=None, next_id=0, multi_label=False, ids=None):
    embeddings = unit(len(labels))
    ids = np.arange(10, 10 + len(labels)) if ids is None else np.asarray(ids)
    loaded = Loaded({"next_id": next_id}, embeddings, ids, labels, [f"text {i}" for i in ids], sources=sources)
    return Rows(loaded, build_index(embeddings, "exact", None, k=None)[0], multi_label)


def test_rows_hold_what_the_store_loaded():
    rows = rows_of(["a", "b", "a"], sources=[None, "note:1", "note:1"])
    assert rows.ids[:3].tolist() == [10, 11, 12] and rows.row_of == {10: 0, 11: 1, 12: 2}
    assert dict(rows.counts) == {"a": 2, "b": 1} and rows.by_source == {"note:1": [11, 12]}
    assert rows.next_id == 13 and rows.generation == 3  # one past the largest id: the manifest's 0 is behind
    assert rows_of(["a"], next_id=40).next_id == 40  # the manifest's, where ids were removed past the last
    assert rows.example(11) == {"id": 11, "label": "b", "text": "text 11"}
    assert rows.pairs([12, 10]) == [("text 12", "a"), ("text 10", "a")]


def test_an_addition_grows_every_lookup_and_the_live_rows():
    rows = rows_of(["a", "b"])
    before = rows.live()
    rows.apply(
        {
            "op": "add",
            "ids": [20, 21],
            "labels": ["c", "a"],
            "texts": ["new c", "new a"],
            "embeddings": unit(2, seed=1),
            "sources": ["note:7", None],
        }
    )
    live = rows.live()
    assert live is not before and live is rows.live()  # made anew after a change, then cached
    assert live.ids.tolist() == [10, 11, 20, 21] and live.rows.tolist() == [0, 1, 2, 3]
    assert live.labels == ["a", "b", "c", "a"] and live.texts[2:] == ["new c", "new a"]
    assert live.sources == [None, None, "note:7", None] and not live.names_only
    np.testing.assert_allclose(live.embeddings[2:], unit(2, seed=1), atol=1e-6)
    assert dict(rows.counts) == {"a": 2, "b": 1, "c": 1} and rows.by_source == {"note:7": [20]}
    assert rows.next_id == 22 and rows.generation == 2 and rows.row_of[21] == 3


def test_a_removal_leaves_a_tombstone_and_drops_a_label_and_a_source_left_with_none():
    rows = rows_of(["a", "b", "b"], sources=["note:1", "note:2", "note:2"])
    rows.apply({"op": "remove", "ids": [10, 11, 99]})  # 99: removed meanwhile elsewhere, already gone
    assert dict(rows.counts) == {"b": 1} and rows.by_source == {"note:2": [12]}
    live = rows.live()
    assert live.ids.tolist() == [12] and live.rows.tolist() == [2] and len(rows.index.vectors) == 3
    with pytest.raises(CeaError, match=r"unknown example id\(s\) 10, 11; GET /labels"):
        rows.known([12, 11, 10])
    assert rows.known([np.int64(12)]) == [12]


def test_an_addition_that_replaces_an_annotations_examples_removes_them_first():
    rows = rows_of(["a", "b"], sources=["note:1", None])
    rows.apply(
        {
            "op": "add",
            "ids": [12],
            "labels": ["c"],
            "texts": ["again"],
            "embeddings": unit(1, seed=2),
            "sources": ["note:1"],
            "replaces": [10],
        }
    )
    assert rows.by_source == {"note:1": [12]} and dict(rows.counts) == {"b": 1, "c": 1}
    assert rows.live().ids.tolist() == [11, 12] and 10 not in rows.row_of


def test_a_relabel_moves_the_counts_and_a_multi_label_bundle_keeps_label_sets():
    rows = rows_of([["a"], ["a", "b"]], multi_label=True)
    assert rows.labels == [("a",), ("a", "b")] and rows.example(11)["label"] == ["a", "b"]
    rows.apply({"op": "relabel", "ids": [10, 77], "labels": [["b"], ["a"]]})  # 77: unknown here, left alone
    assert dict(rows.counts) == {("b",): 1, ("a", "b"): 1} and rows.live().labels == [("b",), ("a", "b")]


def test_names_only_while_every_live_row_is_a_labels_name():
    rows = rows_of(["a", "b"], sources=[NAMED + "a", NAMED + "b"])
    assert rows.live().names_only
    rows.apply({"op": "add", "ids": [12], "labels": ["a"], "texts": ["an annotation"], "embeddings": unit(1, seed=3)})
    assert not rows.live().names_only
    rows.apply({"op": "remove", "ids": [12]})
    assert rows.live().names_only
    assert not rows_of([]).live().names_only  # no rows: no names either
