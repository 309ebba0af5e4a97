"""Similarity runs end to end on a tiny random BERT: scored pairs, sentences, triplet rows, MLM,
and the layer sweep."""

import json
import random

import pandas as pd
import pytest

from cea.errors import CeaError
from cea.training import TrainConfig, train
from cea.training.sweep import sweep_layers

WORDS = "bank card money account transfer lost city capital river dog cat red blue country".split()


@pytest.fixture
def pairs_csv(tmp_path):
    rng = random.Random(0)
    rows = []
    for _ in range(60):
        a = rng.sample(WORDS, 4)
        shared = rng.randint(0, 4)  # the score follows the words two texts share
        b = a[:shared] + rng.sample([w for w in WORDS if w not in a], 4 - shared)
        rows.append((" ".join(a), " ".join(b), 5.0 * shared / 4))
    path = tmp_path / "pairs.csv"
    pd.DataFrame(rows, columns=["text1", "text2", "score"]).to_csv(path, index=False)
    return str(path)


@pytest.fixture
def sentences_txt(tmp_path):
    rng = random.Random(1)
    path = tmp_path / "sentences.txt"
    path.write_text("\n".join(" ".join(rng.sample(WORDS, 5)) for _ in range(40)))
    return str(path)


def _config(data, model, out, **kw):
    return TrainConfig(**{**dict(dataset=data, model=model, output=str(out), batch_size=8, lr=1e-3, epochs=1), **kw})


def test_cosine_regression_reports_spearman_and_selects_the_best_epoch(pairs_csv, tiny_st_dir, tmp_path):
    first = train(
        _config(pairs_csv, tiny_st_dir, tmp_path / "a", objective="cosine-regression", epochs=2, select="best"),
        progress=False,
    )
    second = train(
        _config(pairs_csv, tiny_st_dir, tmp_path / "b", objective="cosine-regression", epochs=2, select="best"),
        progress=False,
    )
    assert first["kind"] == "pairs" and first["metrics"] == second["metrics"]
    assert set(first["metrics"]) == {"dev", "test"} and set(first["metrics"]["test"]) == {"spearman", "pearson"}
    assert len(first["dev_history"]) == 2 and all(h["dev_spearman"] > 0.5 for h in first["dev_history"])
    best = max(h["dev_spearman"] for h in first["dev_history"])
    assert first["metrics"]["dev"]["spearman"] == pytest.approx(100 * best, abs=0.01)
    assert first["metrics"]["test"]["spearman"] > 50  # the scores follow the words the texts share
    from sentence_transformers import SentenceTransformer

    assert SentenceTransformer(str(tmp_path / "a" / "model"), device="cpu").encode(["red dog"]).shape == (1, 32)


@pytest.mark.parametrize("objective", ["simcse", "micse"])
def test_unlabelled_sentences_judged_on_a_scored_set(sentences_txt, pairs_csv, tiny_st_dir, tmp_path, objective):
    result = train(
        _config(
            sentences_txt,
            tiny_st_dir,
            tmp_path / objective,
            objective=objective,
            eval_dataset=pairs_csv,
            train_limit=20,
            limit_seed=3,
        ),
        progress=False,
    )
    assert result["kind"] == "sentences" and result["n_train"] == 20
    assert set(result["metrics"]["test"]) == {"spearman", "pearson"}
    assert result["steps"] == 2  # 20 sentences, batch 8, last partial batch dropped


def test_sentences_without_an_evaluation_set(sentences_txt, tiny_st_dir, tmp_path):
    with pytest.raises(CeaError, match="--select best needs a dev evaluation"):
        train(_config(sentences_txt, tiny_st_dir, tmp_path / "x", objective="simcse", select="best"), progress=False)
    result = train(_config(sentences_txt, tiny_st_dir, tmp_path / "mlm", objective="mlm"), progress=False)
    assert result["metrics"] == {} and (tmp_path / "mlm" / "model" / "model.safetensors").exists()
    # the adapted encoder is where the next objective starts
    follow = train(
        _config(sentences_txt, str(tmp_path / "mlm" / "model"), tmp_path / "next", objective="simcse"), progress=False
    )
    assert follow["base_model_fingerprint"] == result["model_fingerprint"] != result["base_model_fingerprint"]


def test_triplet_rows_train_with_margin_05(tmp_path, tiny_st_dir):
    rng = random.Random(2)
    rows = []
    for _ in range(40):  # positive: the anchor's words reordered; negative: none of them
        words = rng.sample(WORDS, 8)
        rows.append(
            {
                "anchor": " ".join(words[:4]),
                "positive": " ".join(rng.sample(words[:4], 4)),
                "negative": " ".join(words[4:]),
            }
        )
    path = tmp_path / "triplets.jsonl"
    pd.DataFrame(rows).to_json(path, orient="records", lines=True)
    result = train(_config(str(path), tiny_st_dir, tmp_path / "t", objective="triplet"), progress=False)
    assert result["kind"] == "triplets" and result["config"]["options"]["margin"] == 0.5
    assert result["metrics"]["dev"]["triplet_accuracy"] == result["metrics"]["test"]["triplet_accuracy"] == 100.0


@pytest.mark.parametrize(
    "objective, data, message",
    [
        ("cosine-regression", "labelled", "needs scored pairs"),
        ("cea", "pairs", "needs labelled texts"),
        ("supcon", "pairs", "needs labelled texts"),
    ],
)
def test_objective_and_data_must_fit(objective, data, message, pairs_csv, intents_csv, tiny_st_dir, tmp_path):
    dataset = pairs_csv if data == "pairs" else intents_csv
    with pytest.raises(CeaError, match=message):
        train(_config(dataset, tiny_st_dir, tmp_path / "x", objective=objective), progress=False)


def test_sweep_layers_keeps_the_best_depth_and_reuses_runs(pairs_csv, tiny_st_dir, tmp_path):
    base = _config(pairs_csv, tiny_st_dir, tmp_path / "unused", objective="cosine-regression")
    summary = sweep_layers(base, None, [0, 1], tmp_path / "sweep", progress=False)
    assert summary["layers"] == [1, 2] and set(summary["frozen"]) == {"0", "1", "2"}
    best = summary["best_layer"]
    assert summary["fine_tuned"][str(best)]["dev"] == max(v["dev"] for v in summary["fine_tuned"].values())
    assert len(summary["best_test"]) == 2 and summary["best_test"][0] == summary["fine_tuned"][str(best)]["test"]
    assert (tmp_path / "sweep" / "layer_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert saved["best_test_mean"] == summary["best_test_mean"]
    results = tmp_path / "sweep" / f"layer-{best}" / "seed-1" / "results.json"
    stamp = results.stat().st_mtime_ns
    again = sweep_layers(base, None, [0, 1], tmp_path / "sweep", progress=False)
    assert again["best_test"] == summary["best_test"] and results.stat().st_mtime_ns == stamp
    with pytest.raises(CeaError, match="outside the model's 2 blocks"):
        sweep_layers(base, [3], [0], tmp_path / "bad", progress=False)
