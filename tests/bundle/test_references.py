"""The folder store: processes sharing one bundle folder see each other's changes; compaction, by hand or by itself."""

import json

import numpy as np
import pytest

from cea.bundle import Bundle, edits as bundle_module
from cea.bundle.references import FolderStore
from cea.errors import CeaError
from cea.knn.decision import Classifier
from cea.knn.index import ExactIndex


@pytest.fixture
def folder(tmp_path, tiny_st_dir, intents):
    Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier("knn", k=1),
        progress=False,
    ).close()
    return tmp_path / "b"


def test_two_openings_of_one_folder_see_each_others_changes(folder):
    one, two = Bundle.load(folder), Bundle.load(folder)  # as two service processes would
    assert one.add(["red dog and blue cat"], ["animals"]) == [24]
    assert two.predict(["red dog and blue cat"])[0].label == "animals"  # without reloading
    assert two.add(["blue cat and red dog"], ["animals"]) == [25]  # the next id, not a second 24
    two.remove([0])
    one.relabel([1], ["lost card"])
    assert two.get(1)["label"] == "lost card" and one.label_counts["animals"] == 2
    assert sorted(one.ids.tolist()) == sorted(two.ids.tolist()) == list(range(1, 26))
    assert one.next_id == two.next_id == 26


def test_a_compaction_elsewhere_is_loaded_at_the_next_request(folder):
    one, two = Bundle.load(folder), Bundle.load(folder)
    two.remove([0, 1])
    one.add(["red dog and blue cat"], ["animals"])
    one.compact()
    assert one.manifest["generation"] == 1 and len(one.index.vectors) == 23  # removed rows dropped
    assert two.add(["a green bird"], ["animals"]) == [25]  # caught up with generation 1 first, lock kept
    assert two.store._depth == 0 and one.add(["a red bird"], ["animals"]) == [26]
    assert two.manifest["generation"] == 1 and len(two) == len(one) == 25
    assert Bundle.load(folder).get(25) == {"id": 25, "label": "animals", "text": "a green bird"}
    with pytest.raises(Exception, match="unknown example id"):
        one.get(0)


def test_the_folder_compacts_by_itself_past_a_share_of_removed_rows(folder, monkeypatch):
    monkeypatch.setattr(bundle_module, "COMPACT_REMOVED", (0.25, 2))
    made = Bundle.load(folder)
    made.remove([0])
    assert made.manifest["generation"] == 0  # 1 of 24 removed: under both bounds
    made.remove(list(range(1, 6)))  # 6 of 24 removed: 25%
    assert made.manifest["generation"] == 1 and len(made.index.vectors) == len(made) == 18
    assert json.loads((folder / "manifest.json").read_text())["next_id"] == 24
    assert made.add(["red dog"], ["animals"]) == [24]  # ids of removed rows are never given again
    assert (folder / "wal.jsonl").read_bytes().count(b"\n") == 1


def test_the_folder_compacts_by_itself_past_as_many_logged_rows_as_it_holds(folder, monkeypatch):
    monkeypatch.setattr(bundle_module, "COMPACT_LOGGED", (1.0, 5))
    made = Bundle.load(folder)
    made.add([f"text number {i}" for i in range(23)], ["misc"] * 23)
    assert made.manifest["generation"] == 0  # 23 logged rows, 24 in the generation
    made.add(["one more text"], ["misc"])
    assert made.manifest["generation"] == 1 and made.label_counts["misc"] == 24
    assert Bundle.load(folder).predict(["one more text"])[0].label == "misc"


def test_rows_added_one_at_a_time_equal_rows_added_at_once():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 8)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    whole, pieces = ExactIndex(8), ExactIndex(8)
    whole.add(x)
    buffers = set()
    for start in range(0, 300, 7):
        pieces.add(x[start : start + 7])
        buffers.add(id(pieces._vectors))
    assert np.array_equal(pieces.vectors, x) and len(pieces) == 300
    assert len(buffers) < 12  # grown by half each time: about log1.5(300 / 16) + 1 buffers, not 43
    pieces.remove([3, 3, 10])
    assert len(pieces) == 298 and not pieces.alive[[3, 10]].any()
    sims = x[:5] @ x.T
    sims[:, [3, 10]] = -np.inf
    assert np.array_equal(pieces.search(x[:5], 3)[1], np.argsort(-sims, axis=1)[:, :3])


def test_each_store_kind_registers_itself_and_an_unknown_one_is_named(tmp_path):
    from cea.bundle.postgres import PostgresStore
    from cea.bundle.references import STORES, FolderStore, open_store
    from cea.errors import CeaError

    assert STORES == {"folder": FolderStore, "postgresql": PostgresStore}
    with pytest.raises(CeaError, match="'s3' store, unknown to this cea"):
        open_store(tmp_path, {"store": {"kind": "s3"}})


def test_kept_traffic_with_its_embeddings_outlives_a_restart_and_is_shared_by_processes(folder):
    import subprocess
    import sys

    store = FolderStore(folder)
    vectors = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    store.keep([{"text": f"t{i}", "prediction": "card", "embedding": v} for i, v in enumerate(vectors)], 10, "traffic")
    code = (
        "import sys, numpy as np; from pathlib import Path; from cea.bundle.references import FolderStore; "
        "FolderStore(Path(sys.argv[1])).keep([{'text': 'other', 'prediction': 'x', "
        "'embedding': np.ones(4, dtype=np.float32)}], 10, 'traffic')"
    )
    subprocess.run([sys.executable, "-c", code, str(folder)], check=True)
    kept = FolderStore(folder).kept("traffic")  # a restart
    assert [k["text"] for k in kept] == ["t0", "t1", "t2", "other"] and store.kept() == []  # unknowns: their own pile
    np.testing.assert_array_equal(np.stack([k["embedding"] for k in kept]), np.vstack([vectors, np.ones((1, 4))]))
    store.forget([kept[0]["id"]], "traffic")
    assert [k["text"] for k in FolderStore(folder).kept("traffic")] == ["t1", "t2", "other"]
    with pytest.raises(CeaError, match="no kept pile 'other'"):
        store.kept("other")
