"""Renewal: a bundle's examples encoded by a fitted encoder, installed as a new generation that every replica loads;
nothing changed meanwhile is lost."""

import json

import numpy as np
import pytest

from cea.bundle import AddRequest, Bundle, PredictRequest
from cea.bundle.renewal import renew
from cea.errors import CeaError
from cea.knn.decision import Classifier
from tests.conftest import build_tiny_bert


@pytest.fixture(scope="module")
def other_bert(tmp_path_factory) -> str:
    """Another tiny BERT (other random weights, 48 dimensions): the encoder a fit hands over."""
    return build_tiny_bert(tmp_path_factory.mktemp("other-bert"), hidden=48, seed=1)


def fitted_bundle(folder, model, live: Bundle, store=None) -> Bundle:
    return Bundle.create(
        folder,
        model,
        list(live.texts),
        list(live.labels),
        progress=False,
        backend="torch",
        classifier=Classifier("linear", k=3),
        store=store,
    )


@pytest.fixture
def live(tmp_path, tiny_st_dir, intents):
    return Bundle.create(
        tmp_path / "live", tiny_st_dir, list(intents["text"]), list(intents["label"]), progress=False, backend="torch"
    )


def test_renewal_installs_the_fitted_encoder_and_keeps_what_changed_meanwhile(live, other_bert, tmp_path):
    replica = Bundle.load(live.root)  # a second process serving the same folder
    fitted = fitted_bundle(tmp_path / "fitted", other_bert, live)
    live.remove([0])
    text = "red dog and blue cat"
    manifest = renew(live, fitted, during=lambda: (live.add([text], ["animals"]), live.relabel([1], ["geo"])))
    assert manifest["generation"] == 1 and manifest["encoder"] == "encoder-1" and manifest["dim"] == 48
    assert manifest["k"] == 3 and (live.root / "encoder-1").is_dir()
    assert (live.root / "encoder").is_dir()  # the first encoder stays: the background fits start from it
    assert live.encoder is fitted.encoder and live.embeddings.shape == (24, 48)
    assert 0 not in live.ids and live.get(1)["label"] == "geo" and live.label_counts["animals"] == 1
    np.testing.assert_allclose(live.embeddings, fitted.embed(live.texts), atol=1e-5)  # the added text too
    assert live.predict([text])[0].label == "animals"
    assert len(replica) == 24 and replica.manifest["encoder"] == "encoder-1"  # its next request loads it
    np.testing.assert_allclose(replica.embed([text]), fitted.embed([text]), atol=1e-5)
    assert replica.predict([text])[0].neighbours[0]["text"] == text
    again = Bundle.load(live.root)  # every file checked against the new manifest's checksums
    assert again.get(1)["label"] == "geo" and len(again) == 24
    assert json.loads((live.root / "manifest.json").read_text())["files"].keys() >= {
        "encoder-1/config.json",
        "encoder/config.json",
    }
    renew(live, fitted_bundle(tmp_path / "fitted-2", other_bert, live))  # a second renewal retires encoder-1
    assert live.manifest["encoder"] == "encoder-2" and not (live.root / "encoder-1").exists()
    assert (live.root / "encoder").is_dir() and Bundle.load(live.root).get(1)["label"] == "geo"


def test_a_text_encoded_before_the_renewal_is_encoded_again_after_it(live, other_bert, tmp_path):
    fitted = fitted_bundle(tmp_path / "fitted", other_bert, live)
    text = "blue cat and red dog"
    version, old = live.encoder_version, live.embed([text])
    renew(live, fitted)
    assert live.encoder_version != version
    live.add_many(
        [AddRequest([text], ["animals"], old, version)]
    )  # the service's batch encoded it with the old encoder
    np.testing.assert_allclose(live.embeddings[-1], fitted.embed([text])[0], atol=1e-5)
    found = live.predict_many([PredictRequest([text], 1)], vectors=old, version=version)[0][0]
    assert found.neighbours[0]["cosine"] == pytest.approx(1.0, abs=1e-4)


def test_renewal_refuses_a_bundle_of_another_kind(live, tiny_st_dir, tmp_path):
    sets = Bundle.create(
        tmp_path / "sets",
        tiny_st_dir,
        ["a card", "a transfer"],
        [["card"], ["card", "transfer"]],
        progress=False,
        backend="torch",
    )
    with pytest.raises(CeaError, match="labels per text"):
        renew(live, sets)
    assert live.manifest["generation"] == 0 and (live.root / "encoder").is_dir()


def test_postgresql_replicas_answer_from_the_renewed_encoder(tmp_path, tiny_st_dir, intents, postgres_url):
    live = Bundle.create(
        tmp_path / f"pg-{tmp_path.name}",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        progress=False,
        backend="torch",
        store=postgres_url,
    )
    replica = Bundle.load(live.root)
    same = build_tiny_bert(tmp_path / "same-size", seed=2)  # a PostgreSQL table keeps its dimensions
    fitted = fitted_bundle(tmp_path / "fitted", same, live)
    try:
        manifest = renew(live, fitted, during=lambda: live.add(["red dog and blue cat"], ["animals"]))
        assert manifest["encoder"].startswith("encoder-") and live.encoder is fitted.encoder
        assert (live.root / "encoder").is_dir()  # the first encoder stays
        assert len(replica) == 25 and replica.manifest["encoder"] == manifest["encoder"]
        np.testing.assert_allclose(replica.embeddings, fitted.embed(replica.texts), atol=1e-5)
        assert replica.predict(["red dog and blue cat"])[0].label == "animals"
        wider = fitted_bundle(tmp_path / "wider", build_tiny_bert(tmp_path / "wide", hidden=48, seed=3), live)
        with pytest.raises(CeaError, match="keeps its dimensions"):
            renew(live, wider)
        assert len(live) == 25 and live.encoder is fitted.encoder
    finally:
        replica.close()
        live.close()
