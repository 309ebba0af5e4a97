"""The ONNX export: fp32 encodes as PyTorch does, int8 stays close; unsupported models are refused."""

import json

import numpy as np
import pytest

from cea.encoders import load_encoder
from cea.encoders.onnx import OnnxEncoder, export_onnx
from cea.errors import CeaError

TEXTS = ["my card is lost", "what is the capital city of the country of the blue river", "pay", "  top up  "]
CALIBRATION = [f"{text} number {i}" for i in range(40) for text in TEXTS]


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tiny_st_dir):
    folder = tmp_path_factory.mktemp("onnx-model")
    model = load_encoder(tiny_st_dir)
    model.save(str(folder))
    written = export_onnx(model, folder, int8=True, calibration=CALIBRATION)
    return model, folder, written


def test_fp32_matches_pytorch_at_other_shapes(exported):
    model, folder, written = exported
    assert sorted(written) == ["fp32", "int8"] and all(p.exists() for p in written.values())
    expected = model.encode(TEXTS, batch_size=3, convert_to_numpy=True)  # batch and length unlike the export's
    got = OnnxEncoder(folder, "fp32").encode(TEXTS, batch_size=3)
    assert got.shape == (4, 32) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_least_cost_passes_tokenise_once_and_encode_as_pytorch(exported):
    from cea.encoders.embeddings import encode

    model, folder, _ = exported
    onnx = OnnxEncoder(folder, "fp32")
    calls, tokenize = [], onnx.tokenizer.__call__
    onnx.tokenizer = lambda texts, **kw: calls.append(list(texts)) or tokenize(texts, **kw)
    texts = TEXTS * 3  # 12 texts of mixed lengths: several passes
    got = encode(onnx, texts, batch_size=8, overhead=1.0)
    assert len(calls) == 1 and len(calls[0]) == 12  # one tokeniser call for every pass
    np.testing.assert_allclose(got, model.encode(texts, convert_to_numpy=True), atol=1e-5)
    np.testing.assert_allclose(got, onnx.encode(texts, batch_size=2), atol=1e-5)  # passes do not change a row
    assert onnx.encode([]).shape == (0, 32)


def test_onnx_passes_keep_to_the_token_budget(exported):
    from types import SimpleNamespace

    _, folder, _ = exported
    onnx = OnnxEncoder(folder, "int8")
    texts = ["word " * n for n in (3, 100, 5, 90, 4, 120, 6)]
    whole = onnx.encode(texts, tokens=10**9)  # one pass of the 7
    shapes, run = [], onnx.session.run
    onnx.session = SimpleNamespace(run=lambda names, feed: shapes.append(feed["input_ids"].shape) or run(names, feed))
    got = onnx.encode(texts, tokens=250)
    assert len(shapes) > 1 and all(rows * width <= 250 or rows == 1 for rows, width in shapes), shapes
    np.testing.assert_allclose(got, whole, atol=1e-6)  # static int8: the passes change no row


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_numpy_pooling_is_the_torch_pooling(pooling):
    import torch

    from cea.encoders.embeddings import _pool
    from cea.encoders.onnx import pool_numpy

    rng = np.random.default_rng(0)
    hidden = rng.normal(size=(3, 5, 4)).astype(np.float32)
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]])
    expected = _pool(torch.from_numpy(hidden), torch.from_numpy(mask), pooling).numpy()
    got = pool_numpy(hidden, mask, pooling)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, atol=1e-6)
    if pooling == "mean":  # the padding is left out: row 1 is the mean of its first two tokens
        np.testing.assert_allclose(got[1], hidden[1, :2].mean(0), atol=1e-6)


def test_int8_is_close_and_keeps_the_nearest_neighbour(exported):
    model, folder, _ = exported
    reference = model.encode(TEXTS, convert_to_numpy=True)
    got = OnnxEncoder(folder, "int8").encode(TEXTS)
    cos = (got * reference).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(reference, axis=1)
    assert cos.min() > 0.95
    assert not np.allclose(got, reference, atol=1e-5)  # it is a different, quantised graph


def test_an_int8_embedding_does_not_depend_on_the_texts_beside_it(exported):
    """Static scales: a text alone, in a batch of short texts and in one of long ones gets the same embedding. The
    same graph quantised dynamically (a scale over each batch) does not."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    _, folder, _ = exported
    short, long = ["pay"] * 7, ["what is the capital city of the country of the blue river " * 3] * 7
    for encoder in (OnnxEncoder(folder, "int8"), _dynamic(folder, quantize_dynamic, QuantType)):
        alone = encoder.encode(TEXTS[:1])[0]
        beside = [encoder.encode(TEXTS[:1] + others, batch_size=8)[0] for others in (short, long)]
        moved = max(float(np.abs(alone - b).max()) for b in beside)  # a random model's rows all but share a
        if encoder.precision == "int8":  # direction: cosines tell them apart less than coordinates do
            assert moved < 1e-6, moved
        else:  # what static scales mend
            assert moved > 2e-5, moved


def _dynamic(folder, quantize_dynamic, QuantType):
    """An encoder of ``folder``'s fp32 graph quantised dynamically, as the int8 file (precision "int8-dynamic")."""
    import shutil

    copy = folder.parent / "dynamic"
    shutil.copytree(folder, copy, dirs_exist_ok=True)
    quantize_dynamic(
        str(copy / "onnx/model.onnx"),
        str(copy / "onnx/model_int8.onnx"),
        weight_type=QuantType.QInt8,
        extra_options={"DefaultTensorType": 1},  # float: the fused ops escape shape inference
    )
    encoder = OnnxEncoder(copy, "int8")
    encoder.precision = "int8-dynamic"
    return encoder


def test_int8_without_texts_to_calibrate_on_is_refused(tmp_path, tiny_st_dir):
    from cea.errors import OptionError

    with pytest.raises(OptionError, match="calibration must hold texts for int8"):
        export_onnx(load_encoder(tiny_st_dir), tmp_path, int8=True)
    assert not (tmp_path / "onnx").exists()


def test_cls_pooling_and_settings(tmp_path, tiny_bert_dir):
    model = load_encoder(tiny_bert_dir, pooling="cls")
    model.save(str(tmp_path))
    export_onnx(model, tmp_path, int8=False)
    settings = json.loads((tmp_path / "onnx" / "settings.json").read_text())
    assert settings["pooling"] == "cls" and settings["dim"] == 32 and not settings["normalize"]
    np.testing.assert_allclose(OnnxEncoder(tmp_path).encode(TEXTS), model.encode(TEXTS), atol=1e-5)
    assert not (tmp_path / "onnx" / "model_int8.onnx").exists()
    with pytest.raises(CeaError, match="model_int8.onnx is missing"):
        OnnxEncoder(tmp_path, "int8")
    with pytest.raises(CeaError, match="unknown ONNX precision 'fp16'"):
        OnnxEncoder(tmp_path, "fp16")


def test_models_it_cannot_export_are_refused(tmp_path, tiny_st_dir):
    from sentence_transformers.models import Dense

    model = load_encoder(tiny_st_dir)
    model.append(Dense(32, 8))
    with pytest.raises(CeaError, match="Transformer -> Pooling -> Dense; use --backend torch"):
        export_onnx(model, tmp_path)
    assert not (tmp_path / "onnx").exists()


def test_an_export_says_nothing_a_user_cannot_act_on(tmp_path, tiny_st_dir, capfd):
    """No tracer warning, no note on aten::index, no onnxruntime note on pre-processing (it would also configure the
    root logger for the whole process)."""
    import logging
    import warnings

    model = load_encoder(tiny_st_dir)
    handlers = list(logging.getLogger().handlers)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # what a user's session shows: every warning but deprecations (cea's own)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        export_onnx(model, tmp_path, int8=True, calibration=CALIBRATION)
    assert [str(w.message)[:80] for w in caught] == []
    assert "pre-processing" not in capfd.readouterr().err and logging.getLogger().handlers == handlers
