"""Label Studio's ML backend protocol (cea.service.ml_backend) against the JSON of Label Studio 1.23's own requests
(tests/service/label_studio/requests_1.23.json, captured from a running 1.23.2; tokens redacted)."""

import base64
import copy
import json
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from cea.bundle import Bundle
from cea.knn.decision import Classifier
from cea.labelling.suggest import MOST_UNSURE
from cea.service.app import create_app

REQUESTS = json.loads((Path(__file__).parent / "label_studio" / "requests_1.23.json").read_text())["requests"]
DIM = 32  # the tiny BERT's


def axis(*parts) -> np.ndarray:
    """A unit vector from (dimension, weight) pairs."""
    v = np.zeros(DIM, dtype=np.float32)
    for d, w in parts:
        v[d] += w
    return v / np.linalg.norm(v)


# the examples (two a class, each pair apart), and the queries' vectors: the geometry is set here, not by the encoder
EXAMPLES = {
    "hi": ("greet", axis((0, 1))),
    "hi you": ("greet", axis((0, 1), (3, 0.1))),
    "bye": ("bye", axis((1, 1))),
    "bye you": ("bye", axis((1, 1), (4, 0.1))),
    "thx": ("thanks", axis((2, 1))),
    "thx you": ("thanks", axis((2, 1), (5, 0.1))),
}
QUERIES = {
    "hello there": axis((0, 1)),
    "goodbye now": axis((0, 1), (1, 1)),
    "what is this": axis((9, 1)),
    "cheers mate": axis((2, 1), (6, 0.05)),
    "hola": axis((0, 1), (7, 0.02)),
}


@pytest.fixture
def made(tmp_path, tiny_st_dir):
    texts = list(EXAMPLES)
    bundle = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        texts,
        [EXAMPLES[t][0] for t in texts],
        embeddings=np.stack([EXAMPLES[t][1] for t in texts]),
        progress=False,
        classifier=Classifier("knn", k=2, unknown_threshold=0.3),
    )
    known = {**{t: v for t, (_, v) in EXAMPLES.items()}, **QUERIES}
    bundle.embed = lambda batch: np.stack([known[t] for t in batch])
    return bundle


@pytest.fixture
def client(made):
    return TestClient(create_app(made))


def request(name: str, **changes) -> dict:
    body = copy.deepcopy(REQUESTS[name])
    body.update(changes)
    return body


def test_setup_and_health_answer_the_bundles_version(client, made):
    got = client.post("/label-studio/setup", json=request("setup"))
    assert got.status_code == 200 and got.json() == {"model_version": made.version}
    health = client.get("/label-studio/health").json()
    assert health["status"] == "UP" and health["model_version"] == made.version == "6.6"


@pytest.mark.parametrize(
    "config, words",
    [
        ('<View><Text name="text" value="$text"/></View>', "no Choices tag"),
        ('<View><Choices name="c" toName="text"><Choice value="greet"/></Choices></View>', "no Text tag"),
        (
            '<View><Text name="text" value="$text"/><Choices name="c" toName="text"><Choice value="C1"/>'
            '<Choice value="C2"/></Choices></View>',
            "none of the choices (C1, C2)",
        ),  # codes, no hint: nothing to learn
        (
            '<View><Text name="text" value="$text"/><Choices name="a" toName="text"><Choice value="greet"/></Choices>'
            '<Choices name="b" toName="text"><Choice value="bye"/></Choices></View>',
            "a and b",
        ),
        ("<View><Text", "not valid XML"),
    ],
)
def test_a_config_cea_cannot_serve_gets_a_422_naming_what_is_missing(client, config, words):
    got = client.post("/label-studio/setup", json=request("setup", schema=config))
    assert got.status_code == 422 and words in got.json()["detail"]


def test_of_two_choices_tags_the_one_the_bundle_knows_is_served(client):
    config = (
        '<View><Text name="t" value="$body"/><Choices name="mood" toName="t"><Choice value="happy"/></Choices>'
        '<Choices name="intent" toName="t"><Choice value="greet"/><Choice value="bye"/></Choices></View>'
    )
    got = client.post(
        "/label-studio/predict", json={"tasks": [{"id": 1, "data": {"body": "hello there"}}], "label_config": config}
    ).json()["results"][0]
    assert got["result"][0]["from_name"] == "intent" and got["result"][0]["to_name"] == "t"


def test_predict_answers_every_task_in_order_with_choices_and_scores(client, made):
    body = request("predict")  # Label Studio's: "hello there", "goodbye now"
    body["tasks"].insert(1, {**body["tasks"][0], "id": 99, "data": {"other": "no text field"}})
    body["tasks"].append({**body["tasks"][0], "id": 100, "data": {"text": "what is this"}})
    got = client.post("/label-studio/predict", json=body)
    assert got.status_code == 200
    results = got.json()["results"]
    assert len(results) == 4
    clear, missing, torn, far = results
    assert clear["result"] == [
        {"from_name": "intent", "to_name": "text", "type": "choices", "value": {"choices": ["greet"]}}
    ]
    assert clear["score"] == pytest.approx(1.0, abs=1e-6) and clear["model_version"] == made.version
    assert missing["result"] == [] and "score" not in missing  # no text: an empty result, the batch answered
    assert torn["score"] == pytest.approx(1 - 1 / MOST_UNSURE, abs=1e-6)  # its two nearest: one greet, one bye
    assert far["result"] == [] and far["score"] < clear["score"]  # none of these: no choice, a lower score
    assert min(results, key=lambda r: r.get("score", 2)) is not clear


def test_an_annotation_is_learned_replaced_replayed_and_removed(client, made):
    before = made.version
    assert client.post(
        "/label-studio/predict",
        json={"tasks": [{"id": 3, "data": {"text": "cheers mate"}}], "label_config": REQUESTS["setup"]["schema"]},
    ).json()["results"][0]["result"][0]["value"]["choices"] == ["thanks"]
    created = request("annotation_created")  # annotation 2 of task 3, "hello there": greet
    got = client.post("/label-studio/webhook", json=created).json()
    assert got["examples"][0]["changed"] and made.label_counts["greet"] == 3 and made.version != before
    assert client.post("/label-studio/webhook", json=created).json()["examples"][0]["changed"] is False  # replayed
    assert len(made) == 7
    updated = request("annotation_updated")  # the same annotation, now thanks
    updated["task"] = {**updated["task"], "data": {"text": "cheers mate"}}
    assert client.post("/label-studio/webhook", json=updated).json()["examples"][0]["changed"]
    assert len(made) == 7 and made.label_counts == {"bye": 2, "greet": 2, "thanks": 3}
    version = made.version
    predicted = client.post(
        "/label-studio/predict",
        json={"tasks": [{"id": 3, "data": {"text": "cheers mate"}}], "label_config": REQUESTS["setup"]["schema"]},
    ).json()
    assert predicted["results"][0]["model_version"] == version
    assert client.post("/label-studio/webhook", json=request("annotations_deleted")).json()["removed"] == 1
    assert len(made) == 6 and made.version not in (before, version)
    again = client.post("/label-studio/webhook", json=request("annotations_deleted"))
    assert again.status_code == 404 and "never learned here" in again.json()["detail"] and len(made) == 6


def test_a_new_label_becomes_a_class_and_a_skipped_annotation_teaches_nothing(client, made):
    created = request("annotation_created")
    created["annotation"] = {
        **created["annotation"],
        "result": [{"from_name": "intent", "to_name": "text", "type": "choices", "value": {"choices": ["small talk"]}}],
    }
    created["task"] = {**created["task"], "data": {"text": "hola"}}
    client.post("/label-studio/webhook", json=created)
    assert made.predict(["hola"])[0].label == "small talk"
    assert client.post("/label-studio/webhook", json=request("annotation_skipped")).json()["examples"][0]["ids"] == []
    assert len(made) == 7


def test_other_events_are_acknowledged_and_change_nothing(client, made):
    version = made.version
    for name in ("project_updated", "tasks_created"):
        got = client.post("/label-studio/webhook", json=request(name))
        assert got.status_code == 200 and got.json()["status"] == "ignored"
    assert len(made) == 6 and made.version == version


def test_start_training_refits_the_head_before_any_prediction_asks(tmp_path, tiny_st_dir):
    """A bundle with a linear head learns "what is this" as a new label; no prediction follows (a prediction would
    start the refit itself); START_TRAINING alone refits the head, whose answer for that text changes."""
    import threading

    texts = list(EXAMPLES)
    headed = Bundle.create(
        tmp_path / "h",
        tiny_st_dir,
        texts,
        [EXAMPLES[t][0] for t in texts],
        embeddings=np.stack([EXAMPLES[t][1] for t in texts]),
        progress=False,
        classifier=Classifier("linear", C=10.0),
    )
    known = {**{t: v for t, (_, v) in EXAMPLES.items()}, **QUERIES}
    headed.embed = lambda batch: np.stack([known[t] for t in batch])
    client, query = TestClient(create_app(headed)), QUERIES["what is this"][None]
    before = headed.serving_head()
    assert before is not None and "small talk" not in before.classes
    refitted = threading.Event()
    headed.on_refit = lambda seconds, lags: refitted.set()
    created = request("annotation_created")
    created["annotation"] = {
        **created["annotation"],
        "result": [{"from_name": "intent", "to_name": "text", "type": "choices", "value": {"choices": ["small talk"]}}],
    }
    created["task"] = {**created["task"], "data": {"text": "what is this"}}
    assert client.post("/label-studio/webhook", json=created).json()["examples"][0]["changed"]
    assert not refitted.wait(0.5)  # learned through the neighbours: the head waits for a prediction or a training
    assert client.post("/label-studio/webhook", json=request("start_training")).json()["status"] == "ok"
    assert refitted.wait(30), "START_TRAINING did not refit the head"
    after = headed.serving_head()
    assert "small talk" in after.classes
    assert before.predict(query)[0] != "small talk" and after.predict(query)[0] == "small talk"


@pytest.mark.parametrize(
    "body, words",
    [
        (b"not json", "not JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"annotation": {}}', "action: Field required"),
        (
            json.dumps({"action": "ANNOTATION_CREATED", "project": REQUESTS["annotation_created"]["project"]}).encode(),
            '"annotation" and "task"',
        ),
        (json.dumps({"action": "ANNOTATIONS_DELETED"}).encode(), '"annotations"'),
    ],
)
def test_a_malformed_webhook_is_refused_and_changes_nothing(client, made, body, words):
    got = client.post("/label-studio/webhook", content=body, headers={"content-type": "application/json"})
    assert got.status_code == 422 and words in got.json()["detail"] and len(made) == 6


def test_two_labels_for_a_single_label_bundle_are_refused(client, made):
    created = request("annotation_created")
    created["annotation"] = {
        **created["annotation"],
        "result": [
            {"from_name": "intent", "to_name": "text", "type": "choices", "value": {"choices": ["greet", "bye"]}}
        ],
    }
    got = client.post("/label-studio/webhook", json=created)
    assert got.status_code == 422 and 'choice="single"' in got.json()["detail"] and len(made) == 6


def test_the_webhook_follows_the_token_as_a_bearer_or_basic_auth(made):
    client = TestClient(create_app(made, token="s3cret"))
    created = request("annotation_created")
    assert client.post("/label-studio/webhook", json=created).status_code == 401
    assert client.post("/label-studio/predict", json=request("predict")).status_code == 200  # reading: open
    basic = base64.b64encode(b"label-studio:s3cret").decode()
    assert (
        client.post("/label-studio/webhook", json=created, headers={"Authorization": f"Basic {basic}"}).status_code
        == 200
    )
    assert (
        client.post(
            "/label-studio/webhook", json=request("annotations_deleted"), headers={"Authorization": "Bearer s3cret"}
        ).status_code
        == 200
    )


def test_every_replica_knows_an_annotations_examples(made, tmp_path):
    other = Bundle.load(made.root, verify=False)
    other.embed = made.embed
    made.set_examples("label-studio:3:2", ["hola"], ["greet"])
    assert other.remove_sources(["label-studio:3:2"]) == (["label-studio:3:2"], [])
    assert len(made) == 6 and made.version == other.version
    made.set_examples("label-studio:3:5", ["hola"], ["bye"])
    made.compact()  # the key survives a new generation
    again = Bundle.load(made.root, verify=False)
    assert again.sources.count("label-studio:3:5") == 1
    assert again.set_examples("label-studio:3:5", ["hola"], ["bye"]) is None  # the same: nothing changes


def test_the_service_limits_hold_a_long_text_is_cut_and_a_large_body_refused(made):
    client = TestClient(create_app(made, max_chars=11, max_body=4000))
    got = client.post(
        "/label-studio/predict",
        json={
            "tasks": [{"id": 1, "data": {"text": "hello there, and more"}}],
            "label_config": REQUESTS["setup"]["schema"],
        },
    )
    assert got.status_code == 200 and got.json()["results"][0]["result"][0]["value"]["choices"] == ["greet"]
    many = request("predict", tasks=REQUESTS["predict"]["tasks"] * 10)  # Label Studio's tasks: about 500 bytes each
    assert client.post("/label-studio/predict", json=many).status_code == 413


NEW_PROJECT = (
    '<View><Text name="text" value="$text"/><Choices name="intent" toName="text" choice="single">'
    '<Choice value="lost_card" hint="my card is gone"/><Choice value="moneyTransfer" alias="xfer"/>'
    '<Choice value="C3"/></Choices></View>'
)


@pytest.fixture
def empty(tmp_path, tiny_st_dir):
    """An empty bundle (no data set: a new project's start) whose encoder puts texts of cards on one axis, of money
    on another, and anything else on a third."""
    bundle = Bundle.create(
        tmp_path / "e", tiny_st_dir, [], [], classifier=Classifier("knn", k=1), progress=False, label_names="auto"
    )

    def embed(texts):
        return np.stack(
            [
                axis((0, 1), (3, 0.1 * len(t)))
                if "card" in t
                else axis((1, 1), (4, 0.1 * len(t)))
                if "money" in t or "xfer" in t
                else axis((2, 1))
                for t in texts
            ]
        )

    bundle.embed = embed
    return bundle


def test_a_new_project_starts_from_an_empty_bundle_and_its_label_config(empty):
    """Each Choice becomes a class, its name's words, hint and alias its first examples (marked as names, never as
    annotations); pre-annotations come from the first task, in Label Studio's words (an alias where a choice has
    one); a code with no hint waits for its first annotation."""
    client = TestClient(create_app(empty))
    assert (
        client.post(
            "/label-studio/predict", json={"tasks": [{"id": 1, "data": {"text": "my card"}}], "label_config": "<View>"}
        ).status_code
        == 422
    )
    assert len(empty) == 0
    got = client.post("/label-studio/setup", json=request("setup", schema=NEW_PROJECT))
    assert got.status_code == 200 and got.json()["model_version"] == empty.version == "4.4"
    assert sorted(zip(empty.texts, empty.labels, empty.sources)) == [
        ("lost card", "lost_card", "label-name:lost_card"),
        ("money transfer", "moneyTransfer", "label-name:moneyTransfer"),
        ("my card is gone", "lost_card", "label-name:lost_card"),
        ("xfer", "moneyTransfer", "label-name:moneyTransfer"),
    ]
    tasks = [{"id": 1, "data": {"text": "a card went missing"}}, {"id": 2, "data": {"text": "money to mum"}}]
    answered = client.post("/label-studio/predict", json={"tasks": tasks, "label_config": NEW_PROJECT}).json()
    assert [r["result"][0]["value"]["choices"] for r in answered["results"]] == [["lost_card"], ["xfer"]]
    created = request("annotation_created")
    created["annotation"]["result"][0]["value"]["choices"] = ["xfer"]  # Label Studio writes the alias
    created["task"] = {**created["task"], "data": {"text": "send money home"}}
    created["project"] = {**created["project"], "label_config": NEW_PROJECT}
    assert client.post("/label-studio/webhook", json=created).json()["examples"][0]["changed"]
    assert (
        empty.label_counts == {"lost_card": 2, "moneyTransfer": 3}
        and client.post("/label-studio/setup", json=request("setup", schema=NEW_PROJECT)).json()["model_version"]
        == "5.5"
    )
    coded = request("annotation_created")  # the code, named by nobody, learned from its first annotation
    coded["annotation"] = {**coded["annotation"], "id": 9}
    coded["annotation"]["result"] = [{**coded["annotation"]["result"][0], "value": {"choices": ["C3"]}}]
    coded["task"] = {**coded["task"], "data": {"text": "something else"}}
    coded["project"] = {**coded["project"], "label_config": NEW_PROJECT}
    assert client.post("/label-studio/webhook", json=coded).json()["examples"][0]["changed"]
    assert empty.label_counts["C3"] == 1 and empty.sources[-1].endswith(":9")


def test_an_empty_bundle_with_codes_for_choices_answers_nothing_until_it_learns(empty):
    client = TestClient(create_app(empty))
    codes = (
        NEW_PROJECT.replace(' hint="my card is gone"', "")
        .replace(' alias="xfer"', "")
        .replace("lost_card", "L1")
        .replace("moneyTransfer", "L2")
    )
    assert client.post("/label-studio/setup", json=request("setup", schema=codes)).status_code == 200
    answered = client.post(
        "/label-studio/predict", json={"tasks": [{"id": 1, "data": {"text": "a card"}}], "label_config": codes}
    ).json()
    assert answered["results"] == [{"result": [], "model_version": "0.0"}] and len(empty) == 0
    two = codes.replace("</View>", '<Choices name="mood" toName="text"><Choice value="happy"/></Choices></View>')
    got = client.post("/label-studio/setup", json=request("setup", schema=two))
    assert got.status_code == 422 and "keep one Choices tag" in got.json()["detail"] and len(empty) == 0
