"""The one kNN judge: metrics, predictions and neighbours on a fixture small enough to check by hand;
what a run saves beside results.json and who reads it instead of encoding again."""

import json

import numpy as np
import pytest

from cea.errors import CeaError
from cea.evaluation.classification import FORMAT, knn_evaluate, saved_predictions
from cea.paths import read_json

ANGLES = np.array([0.0, 0.1, 0.25, 1.5, 1.6, 3.0])  # unit vectors on a circle
REFS = np.stack([np.cos(ANGLES), np.sin(ANGLES)], 1)
LABELS = np.array(["a", "a", "b", "c", "c", "b"])


def test_metrics_predictions_and_neighbours_by_hand():
    q = np.array([0.04, 1.56, 2.9])
    result = knn_evaluate(REFS, LABELS, np.stack([np.cos(q), np.sin(q)], 1), np.array(["a", "b", "b"]), k=3,
                          reference_ids=[10, 11, 12, 13, 14, 15])
    # 0.04: rows 0, 1, 2 (a, a, b) -> a; 1.56: rows 4, 3 then 2 (c, c, b) -> c; 2.9: rows 5, 4, 3 -> c
    assert result.predicted.tolist() == ["a", "c", "c"]
    assert result.neighbours[0].tolist() == [10, 11, 12] and result.neighbours[1].tolist() == [14, 13, 12]
    assert result.neighbours[2].tolist() == [15, 14, 13]
    np.testing.assert_allclose(result.cosines[2], np.cos(np.array([0.1, 1.3, 1.4])), atol=1e-6)
    metrics = result.metrics()
    assert metrics["knn_accuracy"] == pytest.approx(33.33)
    # gold b is among the 3 nearest labels of the last two queries, a among the first's
    assert metrics["knn_top_k_accuracy"] == 100.0
    # macro-F1 over a, b, c: a 1.0, b 0.0, c 0.0
    assert metrics["knn_macro_f1"] == pytest.approx(33.33)


def test_leave_one_out_and_retrieval():
    result = knn_evaluate(REFS, LABELS, k=1)
    # each reference's nearest other one: 1, 0, 1, 4, 3, 4 -> a, a, a, c, c, c
    assert result.predicted.tolist() == ["a", "a", "a", "c", "c", "c"]
    assert result.accuracy == pytest.approx(4 / 6)
    q = np.array([[1.0, 0.0]])
    scored = knn_evaluate(REFS, LABELS, q, np.array(["b"]), k=1, retrieval=True)
    assert scored.retrieval["top1_accuracy"] == 0.0 and scored.retrieval["top3_accuracy"] == 100.0
    assert scored.retrieval["mrr"] == pytest.approx(100 / 3, abs=0.01)
    with pytest.raises(CeaError, match="3 labels"):
        knn_evaluate(REFS, LABELS, q, np.array(["a", "b", "c"]), k=1)


def test_predictions_round_trip(tmp_path):
    q = np.stack([np.cos([0.05, 1.55]), np.sin([0.05, 1.55])], 1).astype(np.float32)
    result = knn_evaluate(REFS, LABELS, q, np.array(["a", "c"]), k=2, keep_embeddings=True)
    result.save(tmp_path)
    data = read_json(tmp_path / "predictions.json", FORMAT, "rerun")
    assert data["predicted"] == ["a", "c"] and data["gold"] == ["a", "c"] and data["k"] == 2
    assert data["neighbours"] == result.neighbours.tolist()
    np.testing.assert_array_equal(np.load(tmp_path / "test_embeddings.npy"), q)
    (tmp_path / "predictions.json").write_text(json.dumps({"format": "cea.predictions/9"}))
    with pytest.raises(CeaError, match="cea.predictions/9"):
        read_json(tmp_path / "predictions.json", FORMAT, "rerun")


def test_a_run_writes_its_test_predictions_and_analyze_reads_them(intents_csv, tiny_bert_dir, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import cea.encoders
    from cea.cli import _register, app
    from cea.data import load_dataset
    from cea.training import TrainConfig, train

    run = tmp_path / "run"
    result = train(TrainConfig(dataset=intents_csv, model=tiny_bert_dir, objective="softmax", output=str(run),
                               batch_size=6, k_per_class=2, max_steps=2, knn_k=3), progress=False)
    ds = load_dataset(intents_csv)
    saved = saved_predictions(run / "model", ds, "test", 3)
    assert saved is not None and len(saved["predicted"]) == len(ds["test"]) == len(saved["embeddings"])
    accuracy = 100 * np.mean(np.array(saved["predicted"]) == ds["test"]["label"].to_numpy())
    assert round(accuracy, 2) == result["metrics"]["test"]["knn_accuracy"]
    assert saved_predictions(run / "model", ds, "test", 5) is None  # another k: not the same question
    assert saved_predictions(run / "model", ds, "dev", 3) is None

    def no_encoding(*args, **kwargs):
        raise AssertionError("analyze encoded although the run saved its test embeddings")

    monkeypatch.setattr(cea.encoders, "load_encoder", no_encoding)
    _register()
    out = CliRunner().invoke(app, ["analyze", str(run / "model"), "--dataset", intents_csv, "--k", "3",
                                   "--map", "none", "--output", str(tmp_path / "an")])
    assert out.exit_code == 0, out.output
    analysis = json.loads((tmp_path / "an" / "analysis.json").read_text())
    counts = ds["test"]["label"].value_counts()  # cohesion needs two texts of a label
    assert set(analysis["cohesion"]["per_label"]) == set(counts[counts > 1].index) != set()
