"""cea.sharing: push and pull through huggingface_hub's own request layer, answered by a hub held in memory (the real
one is not reachable from the test machines); a bundle logged as an MLflow pyfunc model to a local file store, loaded
back and asked, and through spark_udf on a local Spark."""

import base64
import hashlib
import json
from urllib.parse import unquote, urlparse

import httpx
import pandas as pd
import pytest

from cea.bundle import Bundle
from cea.errors import CeaError
from cea.sharing import log_bundle, pull, pulled, push

SHA = "1" * 40


class FakeHub:
    """The hub's routes that create_repo, upload_folder and snapshot_download call, over repos in memory."""

    def __init__(self):
        self.repos, self.private = {}, {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path, method = unquote(urlparse(str(request.url)).path), request.method
        if path == "/api/repos/create":
            body = json.loads(request.content)
            rid = f"{body['organization']}/{body['name']}"
            self.repos.setdefault(rid, {})
            self.private[rid] = body.get("visibility") == "private"
            return httpx.Response(200, json={"url": f"https://huggingface.co/{rid}"})
        if path == "/api/validate-yaml":  # the model card's metadata, as the hub reads it
            import yaml

            meta = yaml.safe_load(json.loads(request.content)["content"].split("---\n")[1])
            return httpx.Response(200 if isinstance(meta, dict) else 400, json={"errors": [], "warnings": []})
        if path.startswith("/api/models/"):
            rid, _, rest = path[len("/api/models/") :].partition("/")
            rid = rid + "/" + rest.split("/")[0]
            action = rest.split("/")[1]
            if rid not in self.repos:
                return httpx.Response(404, headers={"X-Error-Code": "RepoNotFound"}, json={"error": "not found"})
            if action == "preupload":
                files = json.loads(request.content)["files"]
                return httpx.Response(
                    200,
                    json={
                        "files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]
                    },
                )
            if action == "commit":
                for line in request.content.decode().splitlines():
                    item = json.loads(line)
                    if item["key"] == "file":
                        self.repos[rid][item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                return httpx.Response(
                    200, json={"commitUrl": f"https://huggingface.co/{rid}/commit/{SHA}", "commitOid": SHA}
                )
            if action == "revision":
                return httpx.Response(
                    200, json={"id": rid, "sha": SHA, "siblings": [{"rfilename": p} for p in self.repos[rid]]}
                )
            if action == "tree":
                return httpx.Response(
                    200,
                    json=[
                        {"type": "file", "path": p, "size": len(d), "oid": hashlib.sha1(d).hexdigest()}
                        for p, d in self.repos[rid].items()
                    ],
                )
        if "/resolve/" in path:
            rid, rest = path.lstrip("/").split("/resolve/")
            data = self.repos[rid][rest.split("/", 1)[1]]
            return httpx.Response(
                200,
                content=b"" if method == "HEAD" else data,
                headers={
                    "ETag": f'"{hashlib.sha1(data).hexdigest()}"',
                    "X-Repo-Commit": SHA,
                    "Content-Length": str(len(data)),
                },
            )
        return httpx.Response(500, json={"error": f"{method} {path} is not part of the fake"})


@pytest.fixture
def hub(monkeypatch, tmp_path):
    import huggingface_hub
    from huggingface_hub.utils import _http

    fake = FakeHub()
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    monkeypatch.setenv("CEA_CACHE", str(tmp_path / "cache"))
    huggingface_hub.set_client_factory(lambda: httpx.Client(transport=httpx.MockTransport(fake)))
    yield fake
    huggingface_hub.set_client_factory(_http.default_client_factory)


def test_a_bundle_goes_up_without_its_kept_traffic_and_comes_back_verified(hub, tiny_st_dir, intents, tmp_path):
    made = Bundle.create(tmp_path / "b", tiny_st_dir, list(intents["text"]), list(intents["label"]), progress=False)
    made.add(["red dog blue cat"], ["animals"])  # in the log, not yet compacted: it travels too
    made.store.keep([{"text": "private", "prediction": "card", "embedding": made.embed(["x"])[0]}], 10, "traffic")
    made.close()
    assert push(tmp_path / "b", "team/bank", private=True).endswith("/team/bank") and hub.private["team/bank"]
    sent = set(hub.repos["team/bank"])
    assert "manifest.json" in sent and "README.md" in sent and "wal.jsonl" in sent
    assert not {"traffic.jsonl", "lock", "traffic.lock"} & sent
    again = Bundle.load(pull("team/bank", tmp_path / "pulled"))
    assert again.predict(["red dog blue cat"])[0].label == "animals" and len(again) == len(intents) + 1
    assert not (tmp_path / "pulled" / ".cache").exists()
    assert pulled("hub:team/bank").parent.name == "hub"  # cea serve hub:ORG/NAME: pulled into the cache, then reused


def test_a_pulled_bundle_that_does_not_verify_is_not_kept(hub, tiny_st_dir, intents, tmp_path):
    Bundle.create(tmp_path / "b", tiny_st_dir, list(intents["text"]), list(intents["label"]), progress=False).close()
    push(tmp_path / "b", "team/bank")
    name = next(p for p in hub.repos["team/bank"] if p.startswith("gen-0/"))
    hub.repos["team/bank"][name] += b"tampered"
    with pytest.raises(CeaError, match="does not verify"):
        pull("team/bank", tmp_path / "pulled")
    assert not (tmp_path / "pulled").exists() and not list(tmp_path.glob(".pulled.*"))


def test_a_run_pushes_its_trained_encoder_and_bad_input_is_refused(hub, tiny_st_dir, tmp_path):
    import shutil

    shutil.copytree(tiny_st_dir, tmp_path / "run" / "model")
    (tmp_path / "run" / "results.json").write_text("{}")
    push(tmp_path / "run", "team/encoder")
    assert "modules.json" in hub.repos["team/encoder"] and "results.json" not in hub.repos["team/encoder"]
    for call, message in (
        (lambda: push(tmp_path / "run", "no-slash"), "not a hub repo id"),
        (lambda: push(tmp_path, "team/x"), "neither a bundle"),
        (lambda: pull("team/missing", tmp_path / "m"), "no such repo"),
        (lambda: pull("team/encoder", tmp_path / "run"), "exists"),
    ):
        with pytest.raises(CeaError, match=message):
            call()


def test_a_logged_bundle_loads_back_and_predicts_a_frame_of_texts(tiny_st_dir, intents, tmp_path, monkeypatch):
    import mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    made = Bundle.create(tmp_path / "b", tiny_st_dir, list(intents["text"]), list(intents["label"]), progress=False)
    made.store.keep(
        [{"text": "private traffic", "prediction": "card", "embedding": made.embed(["x"])[0]}], 10, "traffic"
    )
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
        udf = mlflow.pyfunc.spark_udf(
            spark, info.model_uri, result_type="label string, score double, evidence double", env_manager="local"
        )
        got = frame.withColumn("p", udf("text")).select("id", "p.label", "p.score").toPandas().sort_values("id")
    finally:
        spark.stop()
    assert got["label"].tolist() == want and got["score"].between(0, 1).all()
