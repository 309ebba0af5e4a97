"""The one kNN judge: metrics, predictions and neighbours on a fixture small enough to check by hand;
what a run saves beside results.json and who reads it instead of encoding again."""

import json

import numpy as np
import pytest

from cea.errors import CeaError
from cea.evaluation.classification import knn_evaluate

ANGLES = np.array([0.0, 0.1, 0.25, 1.5, 1.6, 3.0])  # unit vectors on a circle
REFS = np.stack([np.cos(ANGLES), np.sin(ANGLES)], 1)
LABELS = np.array(["a", "a", "b", "c", "c", "b"])


def test_metrics_predictions_and_neighbours_by_hand():
    q = np.array([0.04, 1.56, 2.9])
    result = knn_evaluate(
        REFS,
        LABELS,
        np.stack([np.cos(q), np.sin(q)], 1),
        np.array(["a", "b", "b"]),
        k=3,
        reference_ids=[10, 11, 12, 13, 14, 15],
    )
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


def test_a_run_keeps_its_final_embeddings_and_analyze_reads_them(intents_csv, tiny_bert_dir, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import cea.encoders.store as store_mod
    from cea.cli import _register, app
    from cea.data import load_dataset
    from cea.encoders import load_encoder
    from cea.encoders.store import run_store
    from cea.evaluation.classification import evaluate_encoder
    from cea.training import TrainConfig, train

    run = tmp_path / "run"
    result = train(
        TrainConfig(
            dataset=intents_csv,
            model=tiny_bert_dir,
            objective="softmax",
            output=str(run),
            batch_size=6,
            k_per_class=2,
            max_steps=2,
            knn_k=3,
            label_names="off",
        ),
        progress=False,
    )
    ds = load_dataset(intents_csv)

    def no_encoding(*args, **kwargs):
        raise AssertionError("encoded although the run kept its embeddings")

    monkeypatch.setattr(store_mod, "encode_texts", no_encoding)
    store = run_store(run / "model")
    assert store.root == run / "embeddings"
    model = load_encoder(str(run / "model"))
    judged = evaluate_encoder(
        model,
        ds["train"]["text"],
        ds["train"]["label"].to_numpy(),
        {"test": (ds["test"]["text"], ds["test"]["label"].to_numpy())},
        3,
        store=store,
    )
    assert round(100 * judged["test"].accuracy, 2) == result["metrics"]["test"]["knn_accuracy"]
    _register()
    out = CliRunner().invoke(
        app,
        [
            "analyze",
            str(run / "model"),
            "--dataset",
            intents_csv,
            "--k",
            "3",
            "--map",
            "none",
            "--output",
            str(tmp_path / "an"),
        ],
    )
    assert out.exit_code == 0, out.output
    analysis = json.loads((tmp_path / "an" / "analysis.json").read_text())
    counts = ds["test"]["label"].value_counts()  # cohesion needs two texts of a label
    assert set(analysis["cohesion"]["per_label"]) == set(counts[counts > 1].index) != set()


def test_open_set_scores_on_a_hand_worked_example():
    from cea.evaluation.classification import open_set_scores

    gold = ["a", "a", "b", "unknown", "unknown"]
    predicted = ["a", "unknown", "b", "unknown", "a"]
    # F1: a 1/2 (precision 1/2, recall 1/2), b 1, unknown 1/2 (precision 1/2, recall 1/2): mean 2/3
    assert open_set_scores(predicted, gold) == {
        "open_accuracy": 60.0,
        "open_macro_f1": 66.67,
        "known_accuracy": 66.67,
        "unknown_recall": 50.0,
        "unknown_precision": 50.0,
    }


def test_rare_labels_are_judged_apart_on_a_hand_worked_example():
    from cea.evaluation.classification import rare_labels, scores

    rare = rare_labels(["a"] * 9 + ["b"] * 5 + ["c"] * 4 + ["d"])  # fewer than 5 training texts: c, d
    assert rare == ["c", "d"]
    gold, predicted = ["a", "a", "b", "c", "c", "d"], ["a", "c", "b", "c", "a", "a"]
    # F1: a 0.4 (precision 1/3, recall 1/2), b 1, c 0.5 (precision 1/2, recall 1/2), d 0: macro 1.9 / 4 = 47.5;
    # the rare labels' (c, d): 0.5 / 2 = 25
    assert scores(predicted, gold, rare) == {"accuracy": 50.0, "macro_f1": 47.5, "rare_f1": 25.0}
    assert scores(predicted, gold) == {"accuracy": 50.0, "macro_f1": 47.5}  # rare not asked for: not given
    assert scores(["a", "b"], ["a", "b"], rare)["rare_f1"] is None  # no rare label to judge


class _Table:
    """An encoder whose embeddings are given: text -> vector."""

    def __init__(self, vectors):
        self.vectors = vectors

    def encode(self, texts, batch_size=64, convert_to_numpy=True):
        return np.array([self.vectors[t] for t in texts], np.float32)


def test_open_set_evaluation_calibrates_on_the_first_split_and_flags_texts_far_from_every_class():
    from sklearn.linear_model import LogisticRegression

    from cea.evaluation.classification import evaluate_encoder

    rng = np.random.default_rng(0)
    vectors, refs, dev, test = {}, [], [], []
    for name, axis in (("a", 0), ("b", 1)):
        for i in range(30):
            v = rng.normal(0, 0.15, 4)
            v[axis] += 1
            vectors[f"{name}{i}"] = v
            (refs if i < 20 else dev if i < 25 else test).append((f"{name}{i}", name))
    vectors["far"] = np.array([0.0, 0.0, 1.0, 0.0])  # orthogonal to both classes: its nearest cosine is about 0
    test.append(("far", "unknown"))
    model = _Table(vectors)
    split = lambda rows: ([t for t, _ in rows], np.array([y for _, y in rows]))  # noqa: E731
    result = evaluate_encoder(
        model, *split(refs), {"dev": split(dev), "test": split(test)}, k=3, retrieval=(), linear=True, unknown_rate=0.1
    )
    # the threshold, computed independently: scikit-learn's head on unit vectors, times the nearest cosine
    unit = lambda rows: np.array([vectors[t] / np.linalg.norm(vectors[t]) for t, _ in rows])  # noqa: E731
    head = LogisticRegression(C=10, max_iter=3000).fit(unit(refs), [y for _, y in refs])
    strength = head.predict_proba(unit(dev)).max(1) * (unit(dev) @ unit(refs).T).max(1)
    assert result["test"].open["unknown_threshold"] == pytest.approx(np.quantile(strength, 0.1), abs=1e-5)
    assert result["dev"].open == {"unknown_threshold": result["test"].open["unknown_threshold"]}
    opened = result["test"].metrics()
    assert opened["unknown_recall"] == opened["unknown_precision"] == 100.0
    assert opened["known_accuracy"] == 100.0 and opened["open_accuracy"] == 100.0
