"""The HTTP service through FastAPI's test client: predict, grow, limits, tokens."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cea.serving import Bundle
from cea.serving.app import create_app


@pytest.fixture
def client_for(tmp_path, tiny_st_dir, intents):
    from fastapi.testclient import TestClient

    made = Bundle.create(tmp_path / "b", tiny_st_dir, list(intents["text"]), list(intents["label"]), k=1,
                         classifier="knn", progress=False)

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
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(client.get("/metrics").text) for s in family.samples}
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
    assert client.post("/predict", content=b'{"texts": ["' + b"a" * 3000 + b'"]}',
                       headers={"content-type": "application/json"}).status_code == 413
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
    assert all("closest" not in p and p["evidence"] == pytest.approx(p["score"] * max(p["neighbours"][0]["cosine"], 0),
                                                                      abs=2e-6) for p in free)
    above = max(p["evidence"] for p in free) + 1e-3  # above every evidence: both texts are turned away
    got = client.post("/predict", json={**body, "threshold": above}).json()["predictions"]
    assert [(p["label"], p["closest"]) for p in got] == [("unknown", p["label"]) for p in free]
    assert client.post("/predict", json={**body, "threshold": -1}).status_code == 422


def test_a_multi_label_bundle_over_http_answers_label_lists_before_and_after_a_restart(tmp_path, tiny_st_dir):
    from fastapi.testclient import TestClient

    texts = [f"my card is lost {'a' * i}" for i in range(1, 7)] + [f"what is the capital city {'c' * i}" for i in range(1, 7)]
    labels = [["card"]] * 6 + [["geo"]] * 6
    made = Bundle.create(tmp_path / "m", tiny_st_dir, texts, labels, k=3, progress=False)
    client = TestClient(create_app(made))
    added = client.post("/examples", json={"texts": ["my card is lost in the capital city"], "labels": [["card", "geo"]]})
    assert added.status_code == 200, added.text
    made.head()  # the head that counts the addition, as the background refit installs it
    first = client.post("/predict", json={"texts": ["my card is lost in the capital city"], "k": 1}).json()
    assert {x["label"] for x in first["predictions"][0]["labels"]} == {"card", "geo"}
    assert client.get(f"/examples/{added.json()['ids'][0]}").json()["label"] == ["card", "geo"]
    assert client.get("/labels").json()["labels"] == {"card": 7, "geo": 7}
    again = TestClient(create_app(Bundle.load(made.root)))
    assert again.post("/predict", json={"texts": ["my card is lost in the capital city"], "k": 1}).json() == first
