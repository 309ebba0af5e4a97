"""cea.training.tracking: --report-to, read back from TensorBoard's event files and a local MLflow file store."""

import importlib.util

import pytest

from cea.errors import OptionError
from cea.training import TrainConfig, train
from cea.training.tracking import trackers


def test_trackers_are_named_checked_and_installed(monkeypatch, tmp_path):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    assert trackers("none") == [] and trackers("tensorboard,mlflow") == ["tensorboard", "mlflow"]
    with pytest.raises(OptionError, match="must be none, tensorboard, mlflow, wandb or all, got 'comet'"):
        trackers("comet")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(OptionError, match=r"wandb is not installed; pip install 'cea\[track\]'"):
        trackers("wandb")
    assert "wandb" not in trackers("all") and "tensorboard" in trackers("all")


def test_a_tracking_uri_mlflow_refuses_is_said_before_the_run(intents_csv, tiny_st_dir, tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)  # MLflow 3 refuses a file store unless asked
    with pytest.raises(OptionError, match="MLflow refuses its tracking URI file://.*MLFLOW_ALLOW_FILE_STORE=true"):
        train(
            TrainConfig(
                dataset=intents_csv,
                model=tiny_st_dir,
                objective="softmax",
                epochs=1,
                output=str(tmp_path / "run"),
                report_to="mlflow",
            ),
            progress=False,
        )
    assert not (tmp_path / "run").exists()
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    assert trackers("mlflow") == ["mlflow"]


def test_a_run_reports_its_losses_judgements_options_and_test_figures(intents_csv, tiny_st_dir, tmp_path, monkeypatch):
    import mlflow
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())  # a local file store
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 would steer us to a database
    results = train(
        TrainConfig(
            dataset=intents_csv,
            model=tiny_st_dir,
            objective="softmax",
            epochs=2,
            batch_size=6,
            k_per_class=2,
            knn_k=3,
            output=str(tmp_path / "run"),
            report_to="tensorboard,mlflow",
        ),
        progress=False,
    )
    test = results["metrics"]["test"]["knn_accuracy"]
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard")).Reload()
    tags = events.Tags()["scalars"]
    assert "train/loss" in tags and any(t.startswith("eval/") for t in tags)  # the trainer's loss, dev judgements
    assert events.Scalars("test_knn_accuracy")[-1].value == pytest.approx(test)
    found = mlflow.search_runs(experiment_names=["Default"], output_format="list")
    assert len(found) == 1  # one run: the trainer's logging and cea's figures together
    run = found[0].data
    assert run.params["cea.objective"] == "softmax" and run.metrics["test_knn_accuracy"] == pytest.approx(test)
    assert "loss" in run.metrics and mlflow.active_run() is None
