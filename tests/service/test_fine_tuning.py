"""Background fits (cea.service.fine_tuning): cea fit on the annotations, judged on those held back, swapped in where
better; what changed meanwhile kept; a failed or stopped fit leaves the live bundle serving and says why."""

import copy
import json
import os
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from cea.bundle import Bundle
from cea.bundle.create import write_bundle
from cea.errors import CeaError
from cea.service import fine_tuning
from cea.service.app import create_app
from cea.service.fine_tuning import ANNOTATION, BackgroundFit, held_back, run_fit
from cea.service.judging import Scored
from tests.conftest import build_tiny_bert

REQUESTS = json.loads((Path(__file__).parent / "label_studio" / "requests_1.23.json").read_text())["requests"]
TOPICS = {"greet": "hi hello the", "bye": "bye now and", "thanks": "thank you for"}


@pytest.fixture(scope="module")
def other_bert(tmp_path_factory) -> str:
    return build_tiny_bert(tmp_path_factory.mktemp("other-bert"), hidden=48, seed=1)


@pytest.fixture
def live(tmp_path, tiny_st_dir):
    return Bundle.create(
        tmp_path / "live",
        tiny_st_dir,
        [f"{t} {t}" for t in TOPICS.values()],
        list(TOPICS),
        progress=False,
        backend="torch",
    )


def annotation(number: int, label: str | None = None) -> dict:
    """Label Studio's ANNOTATION_CREATED of annotation ``number`` (task ``number``), its text one of ``label``'s."""
    label = label or list(TOPICS)[number % 3]
    body = copy.deepcopy(REQUESTS["annotation_created"])
    body["annotation"] = {
        **body["annotation"],
        "id": number,
        "task": number,
        "result": [{"from_name": "intent", "to_name": "text", "type": "choices", "value": {"choices": [label]}}],
    }
    text = f"{TOPICS[label]} {'abcdefgh'[number % 8]} {number}"
    body["task"] = {**body["task"], "id": number, "data": {"text": text}}
    return body


def fit_with(model: str, release: threading.Event | None = None, seen: list | None = None):
    """A stand-in for run_fit: a bundle of the fit's data with ``model``, after ``release`` is set."""

    def fit(data, output, work, budget, start_from, on_line, on_start):
        frame = pd.read_csv(data / "train.csv")
        if seen is not None:
            seen.extend([frame, pd.read_csv(data / "test.csv"), start_from])
        on_line("[3/5] training")
        if release is not None:
            assert release.wait(60)
        write_bundle(output, model, list(frame["text"]), list(frame["label"]), progress=False, backend="torch")

    return fit


def scoring(accuracy_of, gold_probability: float = 0.5):
    """A stand-in for fine_tuning.scored: the first ``accuracy_of(bundle)`` percent of the held-back texts right, each
    gold label given ``gold_probability``."""

    def scored(bundle, references, labels, queries, gold):
        right = np.arange(len(gold)) < round(len(gold) * accuracy_of(bundle) / 100)
        return Scored(right, np.full(len(gold), gold_probability))

    return scored


def annotated(client, count: int) -> None:
    for number in range(1, count + 1):
        assert client.post("/label-studio/webhook", json=annotation(number)).status_code == 200


def test_a_fifth_of_the_annotations_is_held_back_the_same_way_everywhere():
    keys = [f"{ANNOTATION}3:{n}" for n in range(2000)]
    share = sum(map(held_back, keys)) / len(keys)
    assert 0.17 < share < 0.23 and [held_back(k) for k in keys] == [held_back(k) for k in keys]
    assert not held_back(None) and not held_back("label-name:greet")


def test_a_better_fit_is_swapped_in_with_a_change_posted_during_it(live, other_bert, tmp_path, monkeypatch):
    release, seen = threading.Event(), []
    monkeypatch.setattr(fine_tuning, "scored", scoring(lambda bundle: 50.0 if bundle is live else 100.0))
    app = create_app(
        live, fine_tune={"work": tmp_path / "fits", "first": 0, "fit": fit_with(other_bert, release, seen)}
    )
    client, trainer = TestClient(app), app.state.trainer
    annotated(client, 60)
    held = sum(held_back(f"{ANNOTATION}3:{n}") for n in range(1, 61))
    assert held >= fine_tuning.MIN_HELD
    version = live.version
    got = client.post("/label-studio/webhook", json=REQUESTS["start_training"]).json()
    assert got["fit"] == "started" and got["job"] == trainer.job
    assert client.post("/label-studio/job_status", json={"job": got["job"]}).json()["job_status"] == "started"
    assert client.post("/label-studio/job_status", json={"job": "fit-other"}).status_code == 410
    training = client.get("/health").json()["training"]
    assert training["state"] == "training" and training["stage"] == "[3/5] training"
    late = annotation(61, "bye")  # acknowledged while the fit runs
    assert client.post("/label-studio/webhook", json=late).json()["examples"][0]["changed"]
    release.set()
    trainer.wait(60)
    last = client.get("/health").json()["training"]["last"]
    assert last["outcome"] == "swapped" and last["generation"] == 1 and last["held_back"] == held
    assert last["annotations"] == 60 and len(seen[0]) == 3 + 60 - held  # held-back annotations never trained on
    held_texts = {annotation(n)["task"]["data"]["text"] for n in range(1, 61) if held_back(f"{ANNOTATION}3:{n}")}
    assert set(seen[1]["text"]) == held_texts and not held_texts & set(seen[0]["text"])  # cea fit's test split
    assert live.manifest["encoder"] == "encoder-1" and live.embeddings.shape[1] == 48
    assert late["task"]["data"]["text"] in live.texts and len(live) == 64
    assert live.predict([late["task"]["data"]["text"]])[0].neighbours[0]["cosine"] == pytest.approx(1.0, abs=1e-4)
    assert 'cea_fits_total{outcome="swapped"} 1.0' in client.get("/metrics").text
    status = client.post("/label-studio/job_status", json={"job": got["job"]}).json()
    assert status["job_status"] == "finished" and status["outcome"] == "swapped" and status["decided_by"] == "accuracy"
    assert status["fitted_accuracy"] == 100.0 and "the live bundle" in status["why"]
    assert live.version == f"{live.next_id}.64.1" and live.version.rsplit(".", 1)[0] != version  # fresh predictions
    assert trainer.start()  # the next fit starts from the bundle's first encoder, not from the fitted encoder-1
    trainer.wait(60)
    assert seen[2] == seen[5] == str(live.root / "encoder") and live.manifest["encoder"] == "encoder-2"


def test_a_fit_no_better_on_the_held_back_annotations_is_not_swapped(live, other_bert, tmp_path, monkeypatch):
    monkeypatch.setattr(fine_tuning, "scored", scoring(lambda bundle: 70.0))
    trainer = BackgroundFit(live, tmp_path / "fits", first=0, fit=fit_with(other_bert))
    annotated(TestClient(create_app(live)), 60)
    assert trainer.start()
    trainer.wait(60)
    assert trainer.last["outcome"] == "kept" and "the live bundle 68.42%" in trainer.last["why"]  # 13 of 19
    assert trainer.last["decided_by"] == "log-probability"  # a tie: equal log-probabilities keep the live bundle
    assert live.manifest["generation"] == 0 and live.embeddings.shape[1] == 32


def test_the_fits_are_judged_with_the_label_names_as_each_would_serve(live, other_bert, tmp_path, monkeypatch):
    judged = []

    def scored(bundle, refs, labels, queries, gold):
        judged.append((len(refs), list(labels), len(queries)))
        return Scored(np.ones(len(gold), bool), np.full(len(gold), 0.5))

    monkeypatch.setattr(fine_tuning, "scored", scored)
    assert live.name_labels({"weather": ["weather", "rain forecast"]}) == ["weather"]
    trainer = BackgroundFit(live, tmp_path / "fits", first=0, fit=fit_with(other_bert))
    annotated(TestClient(create_app(live)), 60)
    assert trainer.start()
    trainer.wait(60)
    held = trainer.last["held_back"]
    assert trainer.last["trained_on"] == 3 + 60 - held  # the names are not trained on (cea fit adds its own)
    for refs, labels, queries in judged:  # the live bundle, then the fitted one: the same references
        assert refs == 3 + 60 - held + 2 and labels.count("weather") == 2 and queries == held


def test_a_failed_fit_leaves_the_live_bundle_serving_and_says_why(live, tmp_path):
    def failing(*args):
        raise CeaError("cea fit exited with 2: error: every label has a single example")

    said = []
    trainer = BackgroundFit(live, tmp_path / "fits", first=0, fit=failing, on_end=said.append)
    assert trainer.start()  # no annotation yet: none held back, no fit run
    trainer.wait(60)
    assert trainer.last["outcome"] == "kept" and "fewer than 10 to judge a fit on: none ran" in trainer.last["why"]
    annotated(TestClient(create_app(live)), 60)
    assert trainer.start()
    trainer.wait(60)
    assert said[-1] == trainer.last and trainer.last["outcome"] == "failed" and trainer.state == "idle"
    assert "every label has a single example" in trainer.last["why"]
    assert live.predict(["bye now and bye now and"])[0].label == "bye" and live.manifest["generation"] == 0


def test_no_fit_runs_where_no_label_has_two_annotations_to_train_on(live, tmp_path):
    ran = []
    trainer = BackgroundFit(live, tmp_path / "fits", first=0, fit=lambda *args: ran.append(args))
    client = TestClient(create_app(live))
    for number in range(1, 61):  # every annotation of a label of its own
        label = f"label {number}"
        body = annotation(number)
        body["annotation"]["result"][0]["value"]["choices"] = [label]
        assert client.post("/label-studio/webhook", json=body).status_code == 200
    assert trainer.start()
    trainer.wait(60)
    assert not ran and trainer.last["outcome"] == "kept" and "no label has two annotations" in trainer.last["why"]
    assert trainer.last["held_back"] >= fine_tuning.MIN_HELD


def test_the_fits_start_as_the_annotations_double(live, other_bert, tmp_path, monkeypatch):
    started = []
    app = create_app(live, fine_tune={"work": tmp_path / "fits", "fit": fit_with(other_bert), "first": 4})
    trainer, client = app.state.trainer, TestClient(app)
    monkeypatch.setattr(trainer, "start", lambda: started.append(trainer.annotations()) or False)
    annotated(client, 9)
    assert started == [4, 5, 6, 7, 8, 9]  # none ran: each annotation from the 4th asks again
    trainer.fitted_at = 4  # a fit started at 4 annotations: the next at 8
    started.clear()
    for number in range(10, 12):
        client.post("/label-studio/webhook", json=annotation(number))
    assert started == [10, 11]
    trainer.fitted_at = 11
    client.post("/label-studio/webhook", json=annotation(12))
    assert started == [10, 11]
    other = BackgroundFit(live, tmp_path / "fits", first=4)  # another worker of the same bundle
    (live.root / "training.json").write_text('{"annotations": 7}')  # its last fit started at 7
    monkeypatch.setattr(other, "start", lambda: started.append(-other.annotations()) or False)
    assert not other.changed() and started == [10, 11]  # 12 < 14
    client.post("/label-studio/webhook", json=annotation(13))
    client.post("/label-studio/webhook", json=annotation(14))
    assert not other.changed() and started == [10, 11, -14]  # 14 annotations: twice 7, it asks to start
    off = create_app(live)
    assert (
        TestClient(off)
        .post("/label-studio/webhook", json=REQUESTS["start_training"])
        .json()["fit"]
        .startswith("not run here")
    )


def test_cea_fit_runs_in_a_process_of_its_own_and_a_stopped_one_says_so(live, tmp_path):
    """The real run_fit: cea fit on the bundle's annotations, judged, its figures said; then one stopped midway."""
    client = TestClient(create_app(live))
    annotated(client, 60)
    lines = []
    trainer = BackgroundFit(live, tmp_path / "fits", budget=60, first=0, on_end=lines.append)
    assert trainer.start() and not trainer.start()  # one fit at a time
    trainer.wait(300)
    last = trainer.last
    assert last["outcome"] in ("swapped", "kept") and {"live_accuracy", "fitted_accuracy"} <= last.keys(), last
    assert list((tmp_path / "fits").glob("fit-*/bundle/fit.json"))
    stopped = BackgroundFit(live, tmp_path / "again", budget=60, first=0, fit=_slow_fit)
    assert stopped.start()
    assert _started.wait(60)
    assert os.getpriority(os.PRIO_PROCESS, stopped.process.pid) >= fine_tuning.NICE  # below the service's
    stopped.stop()
    assert stopped.last["outcome"] == "failed" and "stopped by signal 15" in stopped.last["why"]


_started = threading.Event()


def _slow_fit(data, output, work, budget, model, on_line, on_start):
    """run_fit of a process that outlives any test (``sleep``), told started."""

    def started(process):
        on_start(process)
        _started.set()

    run_fit(data, output, work, budget, model, on_line, started, command=["sleep", "600"])
