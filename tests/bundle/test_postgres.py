"""The PostgreSQL store: a real server with pgvector (skipped with the reason where none can start)."""

import json

import numpy as np
import pytest

from cea.bundle import Bundle
from cea.bundle.postgres import connect, table_name
from cea.errors import CeaError


@pytest.fixture
def pair(tmp_path, tiny_st_dir, intents, postgres_url):
    """The same examples in a folder bundle and in a PostgreSQL one."""
    texts, labels = list(intents["text"]), list(intents["label"])
    folder = Bundle.create(tmp_path / "folder", tiny_st_dir, texts, labels, progress=False)
    database = Bundle.create(
        tmp_path / f"pg-{tmp_path.name}", tiny_st_dir, texts, labels, progress=False, store=postgres_url
    )
    yield folder, database
    database.close()


def test_a_postgresql_bundle_predicts_as_the_folder_one(pair, postgres_url):
    folder, database = pair
    manifest = json.loads((database.root / "manifest.json").read_text())
    assert manifest["store"] == {"kind": "postgresql", "url": postgres_url, "table": table_name(database.root)}
    assert not list(database.root.glob("gen-*"))  # the examples live in the database only
    with connect(postgres_url) as conn:
        assert conn.execute(f"SELECT count(*) FROM {manifest['store']['table']}").fetchone()[0] == 24
    queries = ["my card is lost again", "what is the capital city", "transfer to my account"]
    for a, b in zip(folder.predict(queries), database.predict(queries)):
        assert a.label == b.label and a.score == pytest.approx(b.score, abs=1e-5)
        assert [n["id"] for n in a.neighbours] == [n["id"] for n in b.neighbours]


def test_replicas_see_each_others_changes_and_a_restart_keeps_them(pair):
    _, one = pair
    two = Bundle.load(one.root)  # a second service process on the same tables
    assert one.add(["red dog and blue cat", "blue cat and red dog"], ["animals", "animals"]) == [24, 25]
    assert two.predict(["red dog and blue cat"])[0].label == "animals"
    two.changes.reload_next = True  # as after a write that failed: the next change loads all again, inside its lock
    assert two.add(["a green bird"], ["animals"]) == [26]
    two.remove([0])
    one.relabel([1], ["lost card"])
    assert two.get(1)["label"] == "lost card" and one.label_counts["animals"] == 3
    two.close()
    again = Bundle.load(one.root)
    assert sorted(again.ids.tolist()) == list(range(1, 27)) and again.get(26)["text"] == "a green bird"
    assert np.allclose(again.embeddings, one.embeddings[np.argsort(one.ids)][np.argsort(np.argsort(again.ids))])
    again.compact()  # nothing to fold: PostgreSQL's autovacuum reclaims removed rows
    assert again.manifest["generation"] == 0 and len(again) == 26
    again.close()


def test_replicas_know_which_examples_an_annotation_added(pair):
    _, one = pair
    two = Bundle.load(one.root)
    assert one.set_examples("label-studio:1:7", ["red dog and blue cat"], ["animals"]) == [24]
    assert two.set_examples("label-studio:1:7", ["red dog and blue cat"], ["animals"]) is None  # replayed
    assert two.set_examples("label-studio:1:7", ["red dog and blue cat"], ["pets"]) == [25]  # updated: replaced
    assert one.label_counts.get("animals") is None and one.get(25)["label"] == "pets" and one.version == two.version
    again = Bundle.load(one.root)  # a restart reads the key back
    assert again.remove_sources(["label-studio:1:7", "label-studio:1:8"]) == (
        ["label-studio:1:7"],
        ["label-studio:1:8"],
    )
    assert len(one) == len(two) == 24
    again.close()
    two.close()


def test_replicas_share_the_kept_unknowns_bounded_and_across_a_restart(pair):
    _, one = pair
    two = Bundle.load(one.root)  # a second service process on the same tables
    one.store.keep([{"text": f"odd {i}", "closest": "card", "evidence": 0.125} for i in range(4)], limit=3)
    two.store.keep([{"text": "odd from two", "closest": None, "evidence": 0.0}], limit=3)
    seen = one.store.kept()
    assert [u["text"] for u in seen] == ["odd 2", "odd 3", "odd from two"]  # the latest 3, oldest first
    assert seen[0]["closest"] == "card" and seen[0]["evidence"] == 0.125 and seen[0]["at"]
    two.store.forget([seen[0]["id"]])
    two.close()
    again = Bundle.load(one.root)  # a restart
    assert [u["text"] for u in again.store.kept()] == ["odd 3", "odd from two"]
    again.close()


def test_replicas_share_the_kept_traffic_with_its_embeddings(pair):
    _, one = pair
    two = Bundle.load(one.root)
    vectors = one.embed(["my card is lost", "send money"])
    one.store.keep([{"text": "my card is lost", "prediction": "card", "embedding": vectors[0]}], 10, "traffic")
    two.store.keep([{"text": "send money", "prediction": "transfer", "embedding": vectors[1]}], 10, "traffic")
    kept = one.store.kept("traffic")
    assert [(k["text"], k["prediction"]) for k in kept] == [("my card is lost", "card"), ("send money", "transfer")]
    np.testing.assert_allclose(np.stack([k["embedding"] for k in kept]), vectors, rtol=1e-6)
    assert one.store.kept() == []  # the unknowns: a pile of their own
    two.store.forget([kept[0]["id"]], "traffic")
    two.close()
    assert [k["text"] for k in one.store.kept("traffic")] == ["send money"]


def test_bad_stores_are_refused_in_one_line(tmp_path, tiny_st_dir, pair, postgres_url):
    with pytest.raises(
        CeaError,
        match=r"^cannot connect to the PostgreSQL store postgresql://127.0.0.1:1/x: .*; "
        r"check --store",
    ):
        Bundle.create(tmp_path / "x", tiny_st_dir, ["a b", "c d"], ["x", "y"], store="postgresql://127.0.0.1:1/x")
    assert not (tmp_path / "x").exists()
    with pytest.raises(CeaError, match="holds a password"):
        Bundle.create(tmp_path / "x", tiny_st_dir, ["a b", "c d"], ["x", "y"], store="postgresql://u:secret@h/db")
    with pytest.raises(CeaError, match="is not a PostgreSQL connection string"):
        Bundle.create(tmp_path / "x", tiny_st_dir, ["a b", "c d"], ["x", "y"], store="mysql://h/db")
    _, database = pair
    path = database.root / "manifest.json"
    manifest = json.loads(path.read_text())
    with connect(postgres_url) as conn:
        conn.execute(f"CREATE TABLE {manifest['store']['table']}_narrow (id bigint, embedding vector(7))")
    path.write_text(
        json.dumps({**manifest, "store": {**manifest["store"], "table": manifest["store"]["table"] + "_narrow"}})
    )
    with pytest.raises(CeaError, match="holds vectors of 7 dimensions but the bundle's encoder gives 32"):
        Bundle.load(database.root)
    path.write_text(json.dumps({**manifest, "store": {**manifest["store"], "table": "cea_dropped"}}))
    with pytest.raises(CeaError, match="has no table cea_dropped"):
        Bundle.load(database.root)
    path.write_text(json.dumps({**manifest, "store": {**manifest["store"], "url": "postgresql://127.0.0.1:1/x"}}))
    with pytest.raises(CeaError, match="cannot connect to the PostgreSQL store"):
        Bundle.load(database.root)
    path.write_text(json.dumps(manifest))
    with connect(postgres_url) as conn:  # a database without the extension: created on first use
        conn.execute("CREATE DATABASE fresh")
    fresh = postgres_url.replace("/postgres?", "/fresh?")
    assert fresh != postgres_url
    with connect(fresh) as conn:
        assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone() is not None
    with pytest.raises(CeaError, match="already holds a table"):  # a second bundle of the same folder name
        Bundle.create(
            tmp_path / "again" / database.root.name,
            tiny_st_dir,
            ["a b", "c d"],
            ["x", "y"],
            progress=False,
            store=postgres_url,
        )
