"""cea.reports.card: the model cards of a run and of a bundle, their metadata read back as the hub reads it."""

import json

import yaml

from cea.bundle import Bundle
from cea.reports.card import bundle_card, run_card, write_bundle_card
from cea.training import TrainConfig, train


def _front(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def test_a_run_card_names_the_hub_base_model_and_the_test_figures():
    results = {
        "config": {
            "model": "all-MiniLM-L6-v2",
            "dataset": "banking77",
            "objective": "cea",
            "batch_size": 32,
            "lr": 2e-5,
            "seed": 0,
        },
        "metrics": {"dev": {"knn_accuracy": 93.5}, "test": {"knn_accuracy": 93.94, "linear_accuracy": 94.1}},
        "labels": ["a", "b"],
        "n_train": 9003,
        "steps": 1128,
        "epochs": 4.0,
        "kept_step": 846,
        "train_seconds": 512.3,
    }
    card = run_card(results, "banking77-cea")
    meta = _front(card)
    assert meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2" and meta["datasets"] == ["banking77"]
    metrics = meta["model-index"][0]["results"][0]["metrics"]
    assert {m["type"]: m["value"] for m in metrics} == {"knn_accuracy": 93.94, "linear_accuracy": 94.1}
    assert "| test | 93.94 | 94.10 |" in card and "1128 steps" in card and "step 846" in card
    results["config"]["model"] = "/a/local/folder"
    assert "base_model" not in _front(run_card(results, "x"))  # a local folder is no hub model


def test_train_writes_the_runs_card_and_a_bundle_gets_its_own(tiny_st_dir, intents_csv, intents, tmp_path):
    train(
        TrainConfig(
            dataset=intents_csv,
            model=tiny_st_dir,
            objective="softmax",
            output=str(tmp_path / "run"),
            epochs=1,
            batch_size=6,
            k_per_class=2,
            knn_k=3,
        ),
        progress=False,
    )
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    card = (tmp_path / "run" / "model" / "README.md").read_text()
    assert card == run_card(results, "run") and "`softmax` objective" in card
    Bundle.create(
        tmp_path / "b", str(tmp_path / "run" / "model"), list(intents["text"]), list(intents["label"]), progress=False
    ).close()
    meta = _front((tmp_path / "b" / "README.md").read_text())
    assert meta["library_name"] == "cea" and "model-index" not in meta  # no test figures without cea fit
    (tmp_path / "b" / "fit.json").write_text(
        json.dumps(
            {"dataset": "intents", "test": {"accuracy": 95.5, "macro_f1": 95.1}, "seconds": 12.0, "chosen": "trained"}
        )
    )
    write_bundle_card(tmp_path / "b")
    meta = _front((tmp_path / "b" / "README.md").read_text())
    assert meta["datasets"] == ["intents"] and meta["model-index"][0]["name"] == "b"
    assert {m["type"]: m["value"] for m in meta["model-index"][0]["results"][0]["metrics"]} == {
        "accuracy": 95.5,
        "macro_f1": 95.1,
    }
    assert "by `cea fit` in 12.0 s" in bundle_card(tmp_path / "b")
    assert Bundle.load(tmp_path / "b").predict(["my card is lost a"])[0].label == "card"  # verified with its card
