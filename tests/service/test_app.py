"""The HTTP service through FastAPI's test client: predict, grow, limits, tokens."""

import threading
import time

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from cea.bundle import Bundle
from cea.bundle.layout import WAL
from cea.knn.decision import Classifier
from cea.service.app import create_app


@pytest.fixture
def client_for(tmp_path, tiny_st_dir, intents):
    from fastapi.testclient import TestClient

    made = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier("knn", k=1),
        progress=False,
    )

    def make(**kw):
        return TestClient(create_app(made, **kw))

    return make


def test_a_new_class_added_through_the_api_is_predicted(client_for):
    client = client_for()
    got = client.post("/predict", json={"texts": ["my card is lost a", "transfer money to my account b"]}).json()
    assert [p["label"] for p in got["predictions"]] == ["card", "transfer"]
    added = client.post("/examples", json={"texts": ["red dog blue cat"], "labels": ["animals"]})
    assert added.status_code == 200 and added.json() == {"ids": [24]}
    assert client.post("/predict", json={"texts": ["red dog blue cat"]}).json()["predictions"][0]["label"] == "animals"
    assert client.get("/labels").json()["labels"]["animals"] == 1
    assert client.delete("/examples/24").json() == {"removed": 24}
    assert client.delete("/examples/24").status_code == 404
    assert client.get("/health").json()["examples"] == 24 and client.get("/health").json()["classifier"] == "knn"
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for s in family.samples
    }
    assert samples[("cea_requests_total", (("route", "POST /predict"), ("status", "200")))] == 2
    assert samples[("cea_requests_total", (("route", "DELETE /examples/{example_id}"), ("status", "404")))] == 1
    assert samples[("cea_request_seconds_total", (("route", "POST /predict"),))] > 0
    assert samples[("cea_examples", ())] == 24


def test_limits_give_413_or_422_not_out_of_memory(client_for):
    client = client_for(max_texts=4, max_chars=50, max_body=2000)
    assert client.post("/predict", json={"texts": ["a"] * 5}).status_code == 422
    assert client.post("/predict", json={"texts": ["a" * 51]}).status_code == 422
    assert client.post("/predict", json={"texts": [" "]}).status_code == 422
    assert client.post("/predict", json={"texts": []}).status_code == 422
    assert (
        client.post(
            "/predict", content=b'{"texts": ["' + b"a" * 3000 + b'"]}', headers={"content-type": "application/json"}
        ).status_code
        == 413
    )
    assert client.post("/examples", json={"texts": ["a b"], "labels": ["x", "y"]}).status_code == 422


def test_changes_need_the_token_when_one_is_set(client_for):
    client = client_for(token="s3cret")
    assert client.post("/examples", json={"texts": ["a b"], "labels": ["x"]}).status_code == 401
    ok = client.post("/examples", json={"texts": ["a b"], "labels": ["x"]}, headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200
    assert client.post("/predict", json={"texts": ["a b"]}).status_code == 200  # reading needs no token


def test_a_request_threshold_answers_unknown_and_health_names_the_bundles(client_for):
    client = client_for()
    assert client.get("/health").json()["unknown_threshold"] is None
    body = {"texts": ["my card is lost a", "red dog blue cat"]}
    free = client.post("/predict", json=body).json()["predictions"]
    assert all(
        "closest" not in p
        and p["evidence"] == pytest.approx(p["score"] * max(p["neighbours"][0]["cosine"], 0), abs=2e-6)
        for p in free
    )
    above = max(p["evidence"] for p in free) + 1e-3  # above every evidence: both texts are turned away
    got = client.post("/predict", json={**body, "threshold": above}).json()["predictions"]
    assert [(p["label"], p["closest"]) for p in got] == [("unknown", p["label"]) for p in free]
    assert client.post("/predict", json={**body, "threshold": -1}).status_code == 422


def test_a_multi_label_bundle_over_http_answers_label_lists_before_and_after_a_restart(tmp_path, tiny_st_dir):
    from fastapi.testclient import TestClient

    texts = [f"my card is lost {'a' * i}" for i in range(1, 7)] + [
        f"what is the capital city {'c' * i}" for i in range(1, 7)
    ]
    labels = [["card"]] * 6 + [["geo"]] * 6
    made = Bundle.create(tmp_path / "m", tiny_st_dir, texts, labels, classifier=Classifier(k=3), progress=False)
    client = TestClient(create_app(made))
    added = client.post(
        "/examples", json={"texts": ["my card is lost in the capital city"], "labels": [["card", "geo"]]}
    )
    assert added.status_code == 200, added.text
    made.head()  # the head that counts the addition, as the background refit installs it
    first = client.post("/predict", json={"texts": ["my card is lost in the capital city"], "k": 1}).json()
    assert {x["label"] for x in first["predictions"][0]["labels"]} == {"card", "geo"}
    assert client.get(f"/examples/{added.json()['ids'][0]}").json()["label"] == ["card", "geo"]
    assert client.get("/labels").json()["labels"] == {"card": 7, "geo": 7}
    again = TestClient(create_app(Bundle.load(made.root)))
    assert again.post("/predict", json={"texts": ["my card is lost in the capital city"], "k": 1}).json() == first


class CountingEncoder:
    """The bundle's encoder, counting its calls."""

    def __init__(self, encoder):
        self.encoder, self.calls = encoder, []

    def encode(self, texts, **kw):
        self.calls.append(list(texts))
        return self.encoder.encode(texts, **kw)


def _concurrently(app, bodies, route="/predict"):
    """POST ``route`` (or each body's own, a list of routes) of each body at once (one event loop, as uvicorn runs the
    app); the responses in order."""
    import asyncio

    import httpx

    async def all_of():
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # a server error is a 500, as uvicorn's
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            routes = [route] * len(bodies) if isinstance(route, str) else route
            return await asyncio.gather(*(client.post(r, json=body) for r, body in zip(routes, bodies)))

    return asyncio.run(all_of())


def test_concurrent_requests_are_answered_from_one_encoder_call_each_with_its_own_rows(tmp_path, tiny_st_dir, intents):
    made = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier(k=2),
        progress=False,
    )
    alone = {
        t: made.predict([t])[0].as_dict()
        for t in ("my card is lost a", "transfer money to my account b", "my card is lost aaa")
    }
    made.encoder = counting = CountingEncoder(made.encoder)
    app = create_app(made, max_wait=0.5)
    bodies = [
        {"texts": ["my card is lost a"]},
        {"texts": ["transfer money to my account b", "my card is lost aaa"]},
        {"texts": ["my card is lost a"], "k": 1},
    ]
    got = [r.json()["predictions"] for r in _concurrently(app, bodies)]
    assert len(counting.calls) == 1 and sorted(counting.calls[0]) == sorted(t for b in bodies for t in b["texts"])
    assert got[0] == [alone["my card is lost a"]]
    assert got[1] == [alone["transfer money to my account b"], alone["my card is lost aaa"]]
    assert got[2][0]["label"] == "card" and len(got[2][0]["neighbours"]) == 1  # its own k
    batch = {
        s.name: s.value for f in text_string_to_metric_families(TestClient(app).get("/metrics").text) for s in f.samples
    }
    assert batch["cea_batch_texts_count"] == 1 and batch["cea_batch_texts_sum"] == 4
    assert batch["cea_queue_wait_seconds_count"] == 3


def test_concurrent_additions_are_one_encoder_call_and_one_record_each_answered_with_its_own_ids(
    tmp_path, tiny_st_dir, intents
):
    made = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier(k=1),
        progress=False,
    )
    made.encoder = counting = CountingEncoder(made.encoder)
    log = tmp_path / "b" / WAL
    before = log.read_bytes().count(b"\n") if log.exists() else 0
    app = create_app(made, max_wait=0.5, commit_wait=0.5)  # the group commit waits for the others: deterministic
    bodies = [
        {"texts": ["red dog blue cat"], "labels": ["animals"]},
        {"texts": ["my card is lost again", "green frog"], "labels": ["card", "animals"]},
        {"texts": ["a bad one"], "labels": ["unknown"]},
    ]
    got = _concurrently(app, bodies, "/examples")
    assert [r.status_code for r in got] == [200, 200, 422]  # the batch failed on the bad label: each alone, then
    assert "'unknown' is the bundle's answer" in got[2].json()["detail"]
    ids = [r.json()["ids"] for r in got[:2]]
    assert len(ids[0]) == 1 and len(ids[1]) == 2 and len(set(ids[0] + ids[1])) == 3
    for example_id, text in zip(ids[0] + ids[1], ["red dog blue cat", "my card is lost again", "green frog"]):
        assert made.get(example_id)["text"] == text
    assert log.read_bytes().count(b"\n") - before == 2  # the two good requests, one record each after the failure
    good = _concurrently(app, bodies[:2], "/examples")
    assert [r.status_code for r in good] == [200, 200]
    assert log.read_bytes().count(b"\n") - before == 3  # both in one record
    assert sorted(map(len, counting.calls[-1:])) == [3]  # and one encoder call


def test_additions_that_queue_during_a_commit_are_committed_together(tmp_path, tiny_st_dir, intents):
    made = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier(k=1),
        progress=False,
    )
    log = tmp_path / "b" / WAL
    before = log.read_bytes().count(b"\n") if log.exists() else 0
    append = made.store.append

    def slow_append(record):  # a slow fsync: the other additions queue meanwhile
        time.sleep(0.3)
        append(record)

    made.store.append = slow_append
    app = create_app(made, max_wait=0.5)  # the default commit_wait: no waiting for more
    bodies = [{"texts": [f"green frog {i}"], "labels": ["animals"]} for i in range(3)]
    got = _concurrently(app, bodies, "/examples")
    assert [r.status_code for r in got] == [200, 200, 200]
    assert 1 <= log.read_bytes().count(b"\n") - before <= 2  # three additions, at most two records
    assert sorted(made.get(r.json()["ids"][0])["text"] for r in got) == [f"green frog {i}" for i in range(3)]


def test_an_additions_texts_are_encoded_in_the_batch_of_concurrent_predictions(tmp_path, tiny_st_dir, intents):
    made = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier("knn", k=1),
        progress=False,
    )
    alone = made.embed(["red dog blue cat"])
    made.encoder = counting = CountingEncoder(made.encoder)
    app = create_app(made, max_wait=0.5)
    got = _concurrently(
        app,
        [
            {"texts": ["my card is lost a"]},
            {"texts": ["red dog blue cat"], "labels": ["animals"]},
            {"texts": ["transfer money to my account b"]},
        ],
        ["/predict", "/examples", "/predict"],
    )
    assert [r.status_code for r in got] == [200, 200, 200]
    assert len(counting.calls) == 1 and sorted(counting.calls[0]) == sorted(
        ["my card is lost a", "red dog blue cat", "transfer money to my account b"]
    )
    assert [r.json()["predictions"][0]["label"] for r in (got[0], got[2])] == ["card", "transfer"]
    (added,) = got[1].json()["ids"]
    assert made.get(added) == {"id": added, "label": "animals", "text": "red dog blue cat"}
    row = made.ids.tolist().index(added)
    assert abs(made.embeddings[row] - alone[0]).max() < 1e-5  # its own row of the shared encode
    after = TestClient(app).post("/predict", json={"texts": ["red dog blue cat"], "k": 1}).json()["predictions"][0]
    assert after["label"] == "animals" and after["neighbours"][0]["id"] == added


def test_a_failing_text_fails_its_own_request_only(tmp_path, tiny_st_dir, intents):
    made = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier(k=2),
        progress=False,
    )

    class Failing(CountingEncoder):
        def encode(self, texts, **kw):
            out = super().encode(texts, **kw)
            if any("poison" in t for t in texts):
                raise RuntimeError("the encoder failed")
            return out

    made.encoder = Failing(made.encoder)
    app = create_app(made, max_wait=0.5)
    good, bad = _concurrently(app, [{"texts": ["my card is lost a"]}, {"texts": ["poison pill"]}])
    assert good.status_code == 200 and good.json()["predictions"][0]["label"] == "card" and bad.status_code == 500
    assert sorted(len(c) for c in made.encoder.calls) == [1, 1, 2]  # the batch failed, then each request alone
    ok = _concurrently(app, [{"texts": ["my card is lost a"]}, {"texts": ["transfer money to my account b"]}])
    assert [r.json()["predictions"][0]["label"] for r in ok] == ["card", "transfer"]


def test_a_new_label_is_predicted_from_the_next_request_while_a_slow_refit_runs(tmp_path, tiny_st_dir, intents):
    made = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier(k=3),
        progress=False,
    )
    entered, release = threading.Event(), threading.Event()

    class Slow:  # the bundle's classifier, held in its fit until the test releases it
        def __getattr__(self, name):
            return getattr(made.classifier, name)

        def fit(self, *args, **kwargs):
            entered.set()
            release.wait(30)
            return made.classifier.fit(*args, **kwargs)

    made.refit.classifier = Slow()
    client = TestClient(create_app(made))
    assert client.post("/examples", json={"texts": ["red dog blue cat"], "labels": ["animals"]}).status_code == 200
    first = client.post("/predict", json={"texts": ["red dog blue cat", "my card is lost a"]}).json()["predictions"]
    assert [p["label"] for p in first] == ["animals", "card"]
    assert entered.wait(10) and made.refit.running  # the refit started by that request is still running
    again = []
    asking = threading.Thread(
        target=lambda: again.extend(
            client.post("/predict", json={"texts": ["transfer money to my account b"]}).json()["predictions"]
        )
    )
    asking.start()
    asking.join(10)  # answered while the refit is held: not held by it
    assert [p["label"] for p in again] == ["transfer"] and not release.is_set() and made.refit.running
    release.set()
    for _ in range(100):  # the first refit installs a head that knows the new label (later ones go on from it)
        if "animals" in made.refit.latest.classes.tolist():
            break
        time.sleep(0.1)
    assert "animals" in made.refit.latest.classes.tolist()
    samples = {s.name: s.value for f in text_string_to_metric_families(client.get("/metrics").text) for s in f.samples}
    assert samples["cea_refit_seconds_count"] >= 1 and samples["cea_refit_seconds_sum"] > 0
    assert (
        samples["cea_change_to_head_seconds_sum"]
        >= samples["cea_refit_seconds_sum"] / samples["cea_refit_seconds_count"]
    )  # a change waits at least a refit for its head


def test_a_slow_write_of_a_change_does_not_hold_predictions(tmp_path, tiny_st_dir, intents):
    made = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier("knn", k=1),
        progress=False,
    )
    append, writing, release = made.store.append, threading.Event(), threading.Event()

    def slow_append(record):
        writing.set()
        release.wait(30)
        append(record)

    made.store.append = slow_append
    adding = threading.Thread(target=made.add, args=(["red dog blue cat"], ["animals"]))
    adding.start()
    assert writing.wait(10)
    answered = []
    asking = threading.Thread(target=lambda: answered.extend(made.predict(["red dog blue cat"])))
    asking.start()
    asking.join(10)  # answered while the write is held: the state before the change
    assert len(answered) == 1 and answered[0].label != "animals" and not release.is_set()
    release.set()
    adding.join()
    assert made.predict(["red dog blue cat"])[0].label == "animals"  # written and applied: from the next request


def test_batch_workers_follow_the_cores_the_process_may_use(monkeypatch):
    """A service pinned to two of many cores (taskset, a container's cpuset) runs two batch workers, not one per core
    of the machine; --workers N share them."""
    import os

    import threadpoolctl
    import torch

    from cea.service.app import service_threads, usable_cores

    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # the test process keeps its threads
    monkeypatch.setattr(threadpoolctl, "threadpool_limits", lambda *a, **kw: None)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert usable_cores() == 2
    assert service_threads(1) == 2
    assert service_threads(2) == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert service_threads(2) == 4


def _suggestions(client, n, until, seconds=5.0):
    """GET /suggest until ``until(suggestions)`` (traffic is kept off the request path)."""
    for _ in range(int(seconds / 0.05)):
        got = client.get("/suggest", params={"n": n})
        if got.status_code == 200 and until(got.json()["suggestions"]):
            break
        time.sleep(0.05)
    return got.json()["suggestions"]


def test_kept_traffic_is_suggested_and_a_suggestion_labelled_by_its_id_leaves_the_queue(client_for, tmp_path):
    client = client_for(keep_traffic=3)
    refused = client.get("/suggest")  # nothing kept yet
    assert refused.status_code == 409 and "keep-traffic" in refused.json()["detail"]
    texts = ["my card is lost zz", "transfer money card yy", "red dog blue cat", "send money to my account xx"]
    client.post("/predict", json={"texts": texts[:2]})
    client.post("/predict", json={"texts": texts[2:]})
    ranked = _suggestions(client, 10, lambda got: len(got) == 4)
    assert sorted(r["text"] for r in ranked) == sorted(texts)
    assert all(set(r) == {"id", "text", "prediction", "runner_up", "score", "reason", "group"} for r in ranked)
    assert [r["score"] for r in ranked] == sorted((r["score"] for r in ranked), reverse=True)
    assert len(client.get("/suggest", params={"n": 1}).json()["suggestions"]) == 1
    first = ranked[0]
    added = client.post("/examples", json={"suggestions": [first["id"]], "labels": ["animals"]})
    assert added.status_code == 200 and added.json() == {"ids": [24]}
    assert client.get("/examples/24").json()["text"] == first["text"]
    assert first["id"] not in {r["id"] for r in client.get("/suggest").json()["suggestions"]}  # out of the queue
    again = client.post("/examples", json={"suggestions": [first["id"]], "labels": ["animals"]})
    assert again.status_code == 404 and first["id"] in again.json()["detail"]
    for body in ({"texts": ["x"], "suggestions": [ranked[1]["id"]], "labels": ["a"]}, {"labels": ["a"]}):
        assert client.post("/examples", json=body).status_code == 422
    refused = client.get("/suggest", params={"n": 0})
    assert refused.status_code == 422 and refused.json()["detail"] == "n: Input should be greater than or equal to 1"
    assert client.get("/health").json()["examples"] == 25  # nothing added by the refused requests
    for i in range(6):
        client.post("/predict", json={"texts": [f"my card is lost {i} times"]})
    latest = _suggestions(client, 100, lambda got: "my card is lost 5 times" in {r["text"] for r in got})
    assert (
        "my card is lost 5 times" in {r["text"] for r in latest} and len(latest) <= 6
    )  # 3 kept, up to 6 between trims
