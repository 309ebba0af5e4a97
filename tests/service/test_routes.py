"""The routes' own pieces: /predict answered past FastAPI's routing, and what it hands back to the app."""

import json

from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from cea.bundle import Bundle
from cea.knn.decision import Classifier
from cea.service.app import create_app
from cea.service.contract import bodies
from cea.service.queues import Queues
from cea.service.routes import DirectPredict


def test_predict_is_answered_without_the_app_and_a_body_that_does_not_validate_goes_to_it(
    tmp_path, tiny_st_dir, intents
):
    made = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier("knn", k=1),
        progress=False,
    )
    queues = Queues(made, max_batch=8, max_wait=0.0, workers=1, max_texts=4, commit_wait=0.0, keep_unknowns=0)
    handed = []

    async def app(scope, receive, send):  # stands for FastAPI: says it answered, and what body it was given
        handed.append((scope["path"], (await receive())["body"]))
        await JSONResponse({"detail": "the app"}, status_code=422)(scope, receive, send)

    Query, _ = bodies(max_texts=4, max_chars=50)
    try:
        client = TestClient(DirectPredict(app, queues, Query))
        got = client.post("/predict", json={"texts": ["my card is lost a", "transfer money to my account b"]})
        assert got.status_code == 200 and got.headers["content-type"] == "application/json"
        assert [p["label"] for p in got.json()["predictions"]] == ["card", "transfer"] and handed == []
        too_many = json.dumps({"texts": ["a"] * 5}).encode()
        refused = client.post("/predict", content=too_many, headers={"content-type": "application/json"})
        assert refused.json() == {"detail": "the app"} and handed == [("/predict", too_many)]  # the body, again
        assert client.get("/health").status_code == 422 and handed[-1] == ("/health", b"")
    finally:
        queues.close()


def test_the_direct_answer_is_the_routes_answer(tmp_path, tiny_st_dir, intents):
    made = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier("knn", k=3),
        progress=False,
    )
    client = TestClient(create_app(made))
    body = {"texts": ["my card is lost a"], "k": 2, "threshold": 0.0}
    direct = client.post("/predict", json=body)  # application/json: answered past the routing
    routed = client.post(
        "/predict", content=json.dumps(body), headers={"content-type": "application/json; charset=utf-8"}
    )  # FastAPI's route
    assert direct.status_code == routed.status_code == 200 and direct.json() == routed.json()
    assert len(direct.json()["predictions"][0]["neighbours"]) == 2
    # a body that does not validate: 422 either way (the direct path hands it to the route)
    for headers in ({"content-type": "application/json"}, {"content-type": "application/json; charset=utf-8"}):
        assert client.post("/predict", content=b'{"texts": []}', headers=headers).status_code == 422
