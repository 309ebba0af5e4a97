"""cea.mlflow: a bundle logged as an MLflow pyfunc model to a local file store, loaded back and asked."""

import pandas as pd
import pytest

from cea.errors import CeaError
from cea.mlflow import log_bundle
from cea.serving import Bundle


def test_a_logged_bundle_loads_back_and_predicts_a_frame_of_texts(tiny_st_dir, intents, tmp_path, monkeypatch):
    import mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    made = Bundle.create(tmp_path / "b", tiny_st_dir, list(intents["text"]), list(intents["label"]), progress=False)
    made.store.keep([{"text": "private traffic", "prediction": "card", "embedding": made.embed(["x"])[0]}], 10,
                    "traffic")
    made.close()
    with mlflow.start_run():
        info = log_bundle(tmp_path / "b")
    model = mlflow.pyfunc.load_model(info.model_uri)
    got = model.predict(pd.DataFrame({"text": ["my card is lost a", "what is the capital city of the country c"]}))
    assert list(got["label"]) == ["card", "geo"] and list(got.columns) == ["label", "score", "evidence"]
    logged = next((tmp_path / "mlruns").rglob("manifest.json")).parent  # the bundle, as the model's artifact
    assert (logged / "wal.jsonl").exists() and not (logged / "traffic.jsonl").exists()  # the kept traffic stays
    assert not list((tmp_path / "mlruns").rglob("*.pkl"))  # a model from code: nothing pickled


def test_a_folder_that_is_no_bundle_is_refused(tmp_path):
    with pytest.raises(CeaError):
        log_bundle(tmp_path)


def test_a_logged_bundle_predicts_a_spark_column_through_spark_udf(tiny_st_dir, intents, tmp_path, monkeypatch):
    pytest.importorskip("pyspark", reason="Spark's Python API: pip install pyspark")
    import shutil

    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17 (apt install openjdk-17-jre-headless)")
    import mlflow
    from pyspark.sql import SparkSession

    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    made = Bundle.create(tmp_path / "b", tiny_st_dir, list(intents["text"]), list(intents["label"]), progress=False)
    want = [p.label for p in made.predict(list(intents["text"]))]
    made.close()
    with mlflow.start_run():
        info = log_bundle(tmp_path / "b")
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        frame = spark.createDataFrame(intents.assign(id=range(len(intents))).drop(columns="label"))
        udf = mlflow.pyfunc.spark_udf(spark, info.model_uri, result_type="label string, score double, evidence double",
                                      env_manager="local")
        got = frame.withColumn("p", udf("text")).select("id", "p.label", "p.score").toPandas().sort_values("id")
    finally:
        spark.stop()
    assert got["label"].tolist() == want and got["score"].between(0, 1).all()
