"""cea.encoders.static: a static encoder distilled from the tiny BERT loads, probes, trains, bundles and serves."""

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from cea.bundle import Bundle
from cea.encoders import load_encoder
from cea.encoders.build import is_static, num_layers, truncate
from cea.encoders.static import distill
from cea.errors import CeaError
from cea.evaluation.probe import probe
from cea.reports.plots import attention_weights
from cea.service import app
from cea.service.app import create_app
from cea.training import TrainConfig, train


@pytest.fixture(scope="module")
def static_dir(tmp_path_factory, tiny_st_dir):
    return str(distill(tiny_st_dir, tmp_path_factory.mktemp("static") / "m", dims=16))


def test_the_distillate_is_a_static_encoder_of_the_teachers_tokens(static_dir, tiny_st_dir):
    model, teacher = load_encoder(static_dir), load_encoder(tiny_st_dir)
    assert is_static(model) and not is_static(teacher) and num_layers(model) == 0
    got = model.encode(["my card is lost", "my card is lost", "transfer money"])
    assert got.shape == (3, 16) and np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)
    assert np.allclose(got[0], got[1]) and not np.allclose(got[0], got[2])
    assert model[0].embedding.weight.dtype == torch.float32  # trainable vectors
    missing = set(teacher.tokenizer.get_vocab()) - set(model.tokenizer.get_vocab())
    assert missing <= set(teacher.tokenizer.all_special_tokens)  # a vector for every token of the teacher's


def test_probe_gives_one_row_a_static_model_layer_0_mean(static_dir, intents_csv):
    from cea.data import load_dataset

    rows = probe(
        load_dataset(intents_csv),
        [static_dir],
        layers="all",
        poolings=("mean", "cls"),
        k=3,
        progress=False,
        cache=False,
    ).rows
    assert [(r["layer"], r["pooling"]) for r in rows] == [(0, "mean")] and 0 <= rows[0]["accuracy"] <= 100
    cut = probe(
        load_dataset(intents_csv), [static_dir], layers="all", k=3, progress=False, cache=False, max_seq_length=4
    ).rows  # a static encoder reads whole texts: a cut leaves it as it is
    assert cut[0]["accuracy"] == rows[0]["accuracy"]


def test_a_static_encoder_trains_at_its_own_learning_rate_unless_one_is_given(static_dir, tiny_st_dir, intents):
    from cea.data.dataset import TextDataset
    from cea.training.config import STATIC_LR, with_defaults

    ds = TextDataset("intents", {"train": intents, "dev": intents, "test": intents})
    assert with_defaults(TrainConfig(model=static_dir, batch_size=16), ds).lr == STATIC_LR == 0.01
    assert with_defaults(TrainConfig(model="bag:8", batch_size=16), ds).lr == STATIC_LR
    assert with_defaults(TrainConfig(model=static_dir, batch_size=16, lr=0.3), ds).lr == 0.3
    assert with_defaults(TrainConfig(model=tiny_st_dir, batch_size=16), ds).lr < 1e-3  # a transformer's own


def test_training_with_the_labels_moves_its_token_vectors(static_dir, intents_csv, tmp_path):
    result = train(
        TrainConfig(
            dataset=intents_csv,
            model=static_dir,
            output=str(tmp_path / "run"),
            epochs=2,
            batch_size=6,
            k_per_class=2,
            lr=0.05,
            knn_k=3,
        ),
        progress=False,
    )
    before, after = load_encoder(static_dir)[0].embedding.weight, load_encoder(str(tmp_path / "run" / "model"))
    assert is_static(after) and not torch.allclose(before, after[0].embedding.weight)
    assert result["model_fingerprint"] != result["base_model_fingerprint"]
    with pytest.raises(CeaError, match="static encoder already"):  # RUN names its trained encoder: static here
        distill(str(tmp_path / "run"), tmp_path / "again")


def test_a_run_folder_names_its_trained_encoder(tiny_st_dir, tmp_path):
    import shutil

    shutil.copytree(tiny_st_dir, tmp_path / "run" / "model")  # a run of cea train: results.json beside model/
    (tmp_path / "run" / "results.json").write_text("{}")
    made = load_encoder(str(distill(str(tmp_path / "run"), tmp_path / "static", dims=8)))
    assert is_static(made) and made.encode(["my card"]).shape == (1, 8)


def test_a_static_bundle_serves_in_a_process_per_core(static_dir, tiny_st_dir, intents, tmp_path, monkeypatch):
    from cea.bundle import create

    monkeypatch.setattr(create, "AUTO_MIN", 10)  # backend auto measures: nothing to export for a static encoder
    made = Bundle.create(tmp_path / "b", static_dir, list(intents["text"]), list(intents["label"]), progress=False)
    assert made.manifest["backend_choice"]["reason"].startswith("a static encoder")
    with pytest.raises(CeaError, match="no transformer to export"):
        Bundle.create(tmp_path / "c", static_dir, list(intents["text"]), list(intents["label"]), backend="onnx")
    client = TestClient(create_app(made))
    got = client.post("/predict", json={"texts": ["my card is lost a", "what is the capital city of the country c"]})
    assert got.status_code == 200 and [p["label"] for p in got.json()["predictions"]] == ["card", "geo"]
    assert got.headers["content-type"] == "application/json"
    monkeypatch.setattr(app, "usable_cores", lambda: 3)
    assert app.serving_defaults(made) == (3, 0.0)  # a process per core, no wait: the GIL, not the encoder, caps one
    with Bundle.create(
        tmp_path / "t", tiny_st_dir, list(intents["text"]), list(intents["label"]), backend="torch", progress=False
    ) as transformer:
        assert app.serving_defaults(transformer) == (1, app.BATCHING["max_wait"])


def test_bad_input_is_refused(static_dir, tiny_st_dir, tmp_path):
    with pytest.raises(CeaError, match="static encoder already"):
        distill(static_dir, tmp_path / "x")
    with pytest.raises(CeaError, match="not a sentence-transformers or transformers model folder"):
        distill(str(tmp_path), tmp_path / "y")
    with pytest.raises(CeaError, match="exists"):
        distill(tiny_st_dir, tmp_path)
    with pytest.raises(CeaError, match="no transformer blocks to keep"):
        truncate(load_encoder(static_dir), 1)
    with pytest.raises(CeaError, match="no attention to show"):
        attention_weights(load_encoder(static_dir), "my card")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_a_static_encoder_is_encoded_by_its_own_modules_as_sentence_transformers_would(static_dir):
    from cea.encoders.embeddings import encode, static_encode

    model = load_encoder(static_dir)
    texts = ["my card is lost", "transfer money", "zzz unknown tokens qq", "card"] * 3
    expected = model.encode(texts, convert_to_numpy=True)
    assert np.array_equal(static_encode(model, texts), expected)
    assert np.array_equal(static_encode(model, texts, batch_size=5), expected)  # in batches, in order
    assert np.array_equal(encode(model, texts, overhead=50.0), expected)  # no passes cut: nothing is padded
    assert static_encode(model, []).shape == (0, model.get_embedding_dimension())
