"""The one embedding store: rows by encoder state and text, in memory and on disk, each text encoded once."""

import numpy as np
import pytest

from cea.encoders.store import PART, EmbeddingStore, run_store


class _Counting:
    """An encoder stand-in: each text's row is its length and first letter's code; it counts what it encodes."""

    def __init__(self):
        self.seen = []

    def __call__(self, model, texts, batch_size):
        self.seen += list(texts)
        return np.array([[len(t), ord(t[0])] for t in texts], np.float32)


def test_each_text_is_encoded_once_per_state_and_found_in_any_order():
    store, encode = EmbeddingStore(), _Counting()
    first = store.encode(None, ["bb", "a", "bb", "ccc"], state="s1", encode=encode)
    assert encode.seen == ["bb", "a", "ccc"]  # the repeat within one call encoded once
    np.testing.assert_array_equal(first[:, 0], [2, 1, 2, 3])
    again = store.encode(None, ["ccc", "a", "dddd"], state="s1", encode=encode)
    assert encode.seen[3:] == ["dddd"] and again[:, 0].tolist() == [3, 1, 4]
    assert store.get("s1", ["a", "ccc"])[:, 0].tolist() == [1, 3] and store.get("s1", ["zz"]) is None
    store.encode(None, ["a"], state="s2", encode=encode)  # another state: encoded again
    assert encode.seen[-1] == "a" and store.encoded == {"s1": 4, "s2": 1}
    assert store.repeated("s1") == 0
    store.count("s1", ["a"])  # a text encoded twice under one state is what the counts catch
    assert store.repeated("s1") == 1


def test_rows_on_disk_are_found_by_another_store_and_saved_once(tmp_path):
    store, encode = EmbeddingStore(tmp_path), _Counting()
    store.encode(None, ["a", "bb"], state="s", encode=encode)
    assert store.get("s", ["a"]) is not None and not (tmp_path / "s").exists()  # nothing on disk before save
    store.save("s")
    store.save("s")  # nothing new: no second part
    assert len(list((tmp_path / "s").glob(PART.format("*")))) == 1
    other = EmbeddingStore(tmp_path)
    np.testing.assert_array_equal(other.get("s", ["bb", "a"]), store.get("s", ["bb", "a"]))
    other.encode(None, ["bb", "ccc"], state="s", encode=encode)
    assert encode.seen == ["a", "bb", "ccc"]
    other.save("s")
    assert len(list((tmp_path / "s").glob(PART.format("*")))) == 2
    assert EmbeddingStore(tmp_path).get("s", ["ccc", "a", "bb"])[:, 0].tolist() == [3, 1, 2]
    assert EmbeddingStore().get("s", ["a"]) is None  # memory only: nothing read from disk


def test_a_damaged_part_is_dropped_and_its_rows_encoded_again(tmp_path):
    store, encode = EmbeddingStore(tmp_path), _Counting()
    store.encode(None, ["a"], state="s", encode=encode)
    store.save("s")
    part = next((tmp_path / "s").glob(PART.format("*")))
    part.write_bytes(b"not an npz")
    fresh = EmbeddingStore(tmp_path)
    assert fresh.get("s", ["a"]) is None and not part.exists()
    fresh.encode(None, ["a"], state="s", encode=encode)
    assert encode.seen == ["a", "a"]


def test_a_training_runs_final_rows_are_kept_beside_its_model(tmp_path, monkeypatch):
    store, encode = EmbeddingStore(), _Counting()
    store.encode(None, ["a", "bb"], state="final", encode=encode)
    (tmp_path / "run" / "model").mkdir(parents=True)
    assert run_store(tmp_path / "run" / "model").root.name == "store"  # no embeddings beside it: the user's
    store.save("final", tmp_path / "run" / "embeddings")
    kept = run_store(tmp_path / "run" / "model")
    assert kept.root == tmp_path / "run" / "embeddings" and kept.get("final", ["bb"])[:, 0].tolist() == [2]
    monkeypatch.chdir(tmp_path / "run")  # a catalog name is no run's model, whatever folder it is run from
    assert run_store("all-MiniLM-L6-v2").root.name == "store"


@pytest.mark.parametrize("texts", [["a"], ["é", "日本"], [""]])
def test_keys_survive_the_round_trip_whatever_the_text(tmp_path, texts):
    store = EmbeddingStore(tmp_path)
    store.put("s", texts, np.ones((len(texts), 3)))
    store.save("s")
    assert EmbeddingStore(tmp_path).get("s", texts).shape == (len(texts), 3)
