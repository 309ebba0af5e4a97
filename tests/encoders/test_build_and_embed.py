import numpy as np
import pytest
import torch

from cea.encoders import (
    EmbeddingStore,
    embed,
    encode_layers,
    forget_fingerprint,
    load_encoder,
    model_fingerprint,
    num_layers,
    text_fingerprint,
)
from cea.encoders.embeddings import CACHED_FINGERPRINT
from cea.errors import CeaError

TEXTS = ["what is my card", "transfer money to my account now please", "the dog", "who is the red cat ?"]


def _reference_hidden(model, texts):
    """Hidden states and mask straight from transformers, one text at a time (no padding), on the
    model's own device (a CUDA GPU where there is one), back on the CPU."""
    tok, auto = model.tokenizer, model[0].auto_model
    out = []
    with torch.no_grad():
        for text in texts:
            enc = tok([text], return_tensors="pt").to(model.device)
            out.append([h.cpu() for h in auto(**enc, output_hidden_states=True).hidden_states])
    return out


def test_every_layer_from_one_pass_matches_transformers(tiny_bert_dir):
    model = load_encoder(tiny_bert_dir)
    assert num_layers(model) == 2
    got = encode_layers(model, TEXTS, [0, 1, 2], ["mean", "cls"], batch_size=3, progress=False)
    for i, hidden in enumerate(_reference_hidden(model, TEXTS)):
        for layer in range(3):
            np.testing.assert_allclose(got[(layer, "mean")][i], hidden[layer][0].mean(0).numpy(), atol=1e-5)
            np.testing.assert_allclose(got[(layer, "cls")][i], hidden[layer][0][0].numpy(), atol=1e-5)


def test_last_layer_mean_equals_sentence_transformers_encode(tiny_st_dir):
    model = load_encoder(tiny_st_dir)
    got = encode_layers(model, TEXTS, [2], ["mean"], progress=False)[(2, "mean")]
    np.testing.assert_allclose(got, model.encode(TEXTS), atol=1e-5)


def test_cls_pooling_and_truncation(tiny_bert_dir):
    full = load_encoder(tiny_bert_dir)
    layer1 = encode_layers(full, TEXTS, [1], ["cls"], progress=False)[(1, "cls")]
    cut = load_encoder(tiny_bert_dir, pooling="cls", layers=1)
    assert num_layers(cut) == 1 and cut[0].auto_model.config.num_hidden_layers == 1
    np.testing.assert_allclose(cut.encode(TEXTS), layer1, atol=1e-5)
    with pytest.raises(CeaError, match="choose 1..2"):
        load_encoder(tiny_bert_dir, layers=3)
    with pytest.raises(CeaError, match="unknown pooling"):
        load_encoder(tiny_bert_dir, pooling="max-ish")


def test_the_store_answers_the_second_time(tiny_bert_dir, tmp_path, monkeypatch):
    from cea.encoders import store as store_mod

    model = load_encoder(tiny_bert_dir)
    first = embed(model, TEXTS, [0, 2], ["mean"], cache=EmbeddingStore(tmp_path / "emb"), progress=False)
    calls = []
    real = store_mod.encode_layers
    monkeypatch.setattr(store_mod, "encode_layers", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    store = EmbeddingStore(tmp_path / "emb")  # another process's: read from disk
    again = embed(model, TEXTS, [0, 2], ["mean"], cache=store, progress=False)
    assert calls == []
    np.testing.assert_array_equal(first[(2, "mean")], again[(2, "mean")])
    embed(model, TEXTS[::-1], [0, 1, 2], ["mean"], cache=store, progress=False)
    assert calls == [[1]]  # only the missing layer is encoded; the texts reordered are found
    assert list((tmp_path / "emb" / f"{model_fingerprint(model)}-L1-mean").glob("part-*.npz"))


def test_fingerprint_follows_the_weights(tiny_bert_dir):
    a, b = load_encoder(tiny_bert_dir), load_encoder(tiny_bert_dir)
    assert model_fingerprint(a) == model_fingerprint(b)
    with torch.no_grad():
        b[0].auto_model.embeddings.word_embeddings.weight[5, 0] += 1.0
    assert model_fingerprint(b) == model_fingerprint(a)  # kept on the model: not computed again
    forget_fingerprint(b)
    assert model_fingerprint(a) != model_fingerprint(b)
    assert text_fingerprint(["ab", "c"]) != text_fingerprint(["a", "bc"])


def test_the_kept_fingerprint_is_named_in_one_module_only():
    """model_fingerprint keeps it on the model and forget_fingerprint drops it: no other module touches it."""
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "cea"
    naming = sorted(str(p.relative_to(src)) for p in src.rglob("*.py") if CACHED_FINGERPRINT in p.read_text())
    assert naming == ["encoders/embeddings.py"]


def test_bad_model_names(tmp_path, monkeypatch):
    from cea.encoders import catalog

    with pytest.raises(CeaError, match="not a sentence-transformers or transformers model folder"):
        load_encoder(str(tmp_path))
    with pytest.raises(CeaError, match="model folder not found"):
        load_encoder("./no/such/model")
    monkeypatch.setattr("cea.data.hub.hub_reachable", lambda: False)
    with pytest.raises(CeaError, match="did you mean all-MiniLM-L6-v2"):
        catalog.resolve_model("all-MiniLM-L6")
