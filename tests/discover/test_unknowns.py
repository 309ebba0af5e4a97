"""The loop in the service: texts answered unknown are kept in the store (bounded, shared, durable), grouped, and a
group accepted as a class is predicted from the next request."""

import subprocess
import sys
import time

import pytest
from fastapi.testclient import TestClient

from cea.bundle import Bundle
from cea.bundle.references import FolderStore
from cea.discover.unknowns import GROUPS, PAGE, accept_group, group_unknowns
from cea.errors import CeaError
from cea.knn.decision import Classifier
from cea.service.app import create_app

HIDDEN = [f"buy bitcoin with my crypto wallet {'z' * (i + 1)}" for i in range(8)]


def _kept(client, n, seconds=5.0):
    """GET /unknowns until it lists ``n`` texts (they are kept off the request path)."""
    for _ in range(int(seconds / 0.05)):
        got = client.get("/unknowns").json()["unknowns"]
        if len(got) >= n:
            return got
        time.sleep(0.05)
    return got


def test_the_folder_store_keeps_the_latest_unknowns_across_restarts_and_processes(tmp_path, tiny_st_dir, intents):
    Bundle.create(tmp_path / "b", tiny_st_dir, list(intents["text"]), list(intents["label"]), progress=False).close()
    store = FolderStore(tmp_path / "b")
    store.keep([{"text": f"text {i}", "closest": "card", "evidence": 0.1} for i in range(5)], limit=3)
    code = (
        "import sys; from pathlib import Path; from cea.bundle.references import FolderStore; "
        "FolderStore(Path(sys.argv[1])).keep([{'text': 'from another process', 'closest': None, "
        "'evidence': 0.0}], limit=3)"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "b")], check=True)
    again = FolderStore(tmp_path / "b")  # a restart: what the other process and this one kept is there
    texts = [u["text"] for u in again.kept()]
    assert texts[-1] == "from another process" and len(set(u["id"] for u in again.kept())) == len(texts)
    store.keep([{"text": "one more", "closest": "card", "evidence": 0.1}], limit=3)
    assert [u["text"] for u in again.kept()] == ["text 4", "from another process", "one more"]  # trimmed to 3
    again.forget([again.kept()[0]["id"]])
    assert [u["text"] for u in store.kept()] == ["from another process", "one more"]


def test_a_kept_line_torn_by_a_crash_spoils_only_itself(tmp_path, tiny_st_dir, intents):
    Bundle.create(tmp_path / "b", tiny_st_dir, list(intents["text"]), list(intents["label"]), progress=False).close()
    store = FolderStore(tmp_path / "b")
    store.keep([{"text": "first", "closest": "card", "evidence": 0.1}], limit=10)
    with open(tmp_path / "b" / "unknowns.jsonl", "ab") as fh:  # a crash in the middle of a line (and of a character)
        fh.write('{"id": "x", "text": "caf\u00e9'.encode("utf-8")[:-1])
    assert [u["text"] for u in store.kept()] == ["first"]
    store.keep([{"text": "after the crash", "closest": None, "evidence": 0.0}], limit=10)
    assert [u["text"] for u in store.kept()] == ["first", "after the crash"]
    store.forget([store.kept()[0]["id"]])
    assert [u["text"] for u in store.kept()] == ["after the crash"]


def test_a_hidden_class_turned_away_is_grouped_accepted_and_then_predicted(tmp_path, tiny_st_dir, intents):
    made = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier(k=3),
        progress=False,
    )
    client = TestClient(create_app(made, keep_unknowns=100))
    strict = ["my card is lost again aa", "my card is lost again bb"]  # a known class, turned away by the threshold
    first = client.post("/predict", json={"texts": HIDDEN + strict, "threshold": 5.0}).json()["predictions"]
    assert {p["label"] for p in first} == {"unknown"}  # turned away
    client.post("/predict", json={"texts": ["my card is lost aa"]})  # answered: not kept
    kept = _kept(client, len(HIDDEN) + 2)
    assert sorted(u["text"] for u in kept) == sorted(HIDDEN + strict) and all(u["closest"] for u in kept)
    found = group_unknowns(tmp_path / "b")  # cut where the bundle's own examples group best
    new = [g for g in found["groups"] if g["kind"] == "new"]
    assert len(new) == 1 and new[0]["size"] == len(HIDDEN) and new[0]["id"] == 0  # every hidden text, first
    assert found["estimate"]["new_groups"] == 1 and 0 < found["estimate"]["threshold"] < 1
    card = [g for g in found["groups"] if g["kind"] == "known"]
    assert [(g["known_class"], g["size"]) for g in card] == [("card", 2)]  # too strict a threshold for them
    assert all(t in HIDDEN for t in new[0]["central_texts"]) and "bitcoin" in new[0]["words"]
    assert (tmp_path / "b" / GROUPS).exists() and "bitcoin" in (tmp_path / "b" / PAGE).read_text()
    ids = accept_group(tmp_path / "b", new[0]["id"], "crypto")
    assert len(ids) == len(HIDDEN)  # and those texts are forgotten: the known class's two are left
    assert sorted(u["text"] for u in client.get("/unknowns").json()["unknowns"]) == strict
    got = client.post("/predict", json={"texts": ["buy bitcoin with my crypto wallet zzzzzzzzzz"]}).json()
    assert got["predictions"][0]["label"] == "crypto"  # the running service, from its next request
    with pytest.raises(CeaError, match="were accepted or dropped since"):
        accept_group(tmp_path / "b", new[0]["id"], "crypto")


def test_several_groups_are_accepted_as_one_class(tmp_path, tiny_st_dir, intents):
    made = Bundle.create(tmp_path / "b", tiny_st_dir, list(intents["text"]), list(intents["label"]), progress=False)
    made.store.keep([{"text": t, "closest": "card", "evidence": 0.1} for t in HIDDEN], limit=100)
    made.close()
    found = group_unknowns(tmp_path / "b", clusters=3, page=False)
    ids = [g["id"] for g in found["groups"]]
    sizes = {g["id"]: g["size"] for g in found["groups"]}
    with pytest.raises(CeaError, match="no group 99 among"):
        accept_group(tmp_path / "b", [ids[0], 99], "crypto")  # nothing added where one id is wrong
    added = accept_group(tmp_path / "b", [ids[0], ids[1], ids[0]], "crypto")  # a repeated id counts once
    assert len(added) == sizes[ids[0]] + sizes[ids[1]]
    reopened = Bundle.load(tmp_path / "b")
    assert reopened.label_counts["crypto"] == len(added) and len(reopened.store.kept()) == sizes[ids[2]]


def test_accepting_a_group_marked_as_another_known_class_says_so(tmp_path, tiny_st_dir, intents):
    made = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier(k=3),
        progress=False,
    )
    strict = ["my card is lost again aa", "my card is lost again bb"]
    made.store.keep([{"text": t, "closest": "card", "evidence": 0.1} for t in HIDDEN + strict], limit=100)
    made.close()
    found = group_unknowns(tmp_path / "b", page=False)
    new = [g["id"] for g in found["groups"] if g["kind"] == "new"]
    card = [g["id"] for g in found["groups"] if g["known_class"] == "card"]
    assert len(new) == 1 and len(card) == 1
    said = []
    accept_group(tmp_path / "b", new, "crypto", say=said.append)  # a new group: nothing to say
    assert said == []
    accept_group(tmp_path / "b", card, "crypto", say=said.append)
    assert len(said) == 1 and f"group {card[0]} was marked 'card'" in said[0] and "now 'crypto'" in said[0]
    assert Bundle.load(tmp_path / "b").label_counts["crypto"] == len(HIDDEN) + 2  # added all the same


def test_grouping_needs_kept_texts_and_accepting_needs_a_grouping(tmp_path, tiny_st_dir, intents):
    Bundle.create(tmp_path / "b", tiny_st_dir, list(intents["text"]), list(intents["label"]), progress=False).close()
    with pytest.raises(CeaError, match="keeps 0 texts answered unknown; serve it with cea serve --keep-unknowns"):
        group_unknowns(tmp_path / "b")
    with pytest.raises(CeaError, match="has no grouped unknowns; run cea discover"):
        accept_group(tmp_path / "b", 0, "x")
