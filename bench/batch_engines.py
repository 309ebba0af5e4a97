"""Issue 77: the engines of batch prediction side by side on this machine: the local engine, Ray (a pool of actors
on a Ray started here), Spark (``mlflow.pyfunc.spark_udf`` on ``local[2]``), and two Ray nodes of one CPU each.

    python bench/batch_engines.py STATIC_ENCODER [--model all-MiniLM-L6-v2] [--texts 50000] [--static-texts 1000000]

Builds two bundles of banking77's train split (the transformer ``--model`` and the static encoder made by ``cea
distill all-MiniLM-L6-v2 -o DIR``), a Parquet corpus of banking77 and clinc150 train texts (numbered so that no two
are the same), and runs ``cea.batch.predict.predict_folder`` on each engine in a process of its own, one after
another: wall time from the start of the process (Ray's start and the actors' bundle loads included), texts/s, and
each part's seconds reading, predicting and writing. Checks that every engine's labels equal the local engine's.
Records Ray's texts/s against the local engine's for both bundles (goal: at least 0.85x), Spark's texts/s for the
static bundle, and the larger node's share of the texts on the two-node cluster (goal: 40-60 %).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import record  # noqa: E402


def one(engine: str, bundle: str, corpus: str, out: str) -> dict:
    """Run one engine in this process; its wall time and per-part seconds."""
    started = time.perf_counter()
    if engine == "spark":
        return spark(bundle, corpus, out, started)
    from cea.batch.predict import predict_folder

    if engine == "two-nodes":
        from ray.cluster_utils import Cluster

        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        started = time.perf_counter()
        try:
            done = predict_folder(bundle, corpus, out, engine="ray", address=cluster.address)
        finally:
            cluster.shutdown()
    else:
        done = predict_folder(bundle, corpus, out, engine=engine)
    parts = pd.DataFrame(done)
    return {
        "wall_s": time.perf_counter() - started,
        "rows": int(parts["rows"].sum()),
        "parts": len(parts),
        "actors_s": {k: round(float(parts[k].sum()), 1) for k in ("read_s", "work_s", "write_s")},
        "shares": parts.groupby("node")["rows"].sum().div(parts["rows"].sum()).round(4).tolist(),
    }


def spark(bundle: str, corpus: str, out: str, started: float) -> dict:
    import mlflow
    from pyspark.sql import SparkSession

    from cea.sharing import log_bundle

    with mlflow.start_run():
        uri = log_bundle(bundle).model_uri
    started = time.perf_counter()  # from Spark's start: MLflow's logging is done once, not per corpus
    session = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    udf = mlflow.pyfunc.spark_udf(
        session, uri, result_type="label string, score double, evidence double", env_manager="local"
    )
    frame = session.read.parquet(corpus)
    frame.withColumn("p", udf("text")).select("id", "p.label", "p.score").write.parquet(out)
    session.stop()
    return {"wall_s": time.perf_counter() - started, "rows": len(pd.read_parquet(out, columns=["id"]))}


def labels(out: str) -> list:
    return pd.read_parquet(out, columns=["id", "label"]).sort_values("id")["label"].tolist()


def run(engine: str, bundle: Path, corpus: Path, tmp: Path, env: dict) -> dict:
    out = tmp / f"out-{engine}-{bundle.name}"
    proc = subprocess.run(
        [sys.executable, __file__, "--one", engine, str(bundle), str(corpus), str(out)],
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode:
        raise SystemExit(f"{engine} on {bundle.name} failed:\n{proc.stderr[-3000:]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    got["texts_s"] = round(got["rows"] / got["wall_s"], 1)
    got["labels"] = labels(str(out))
    print(engine, bundle.name, {k: v for k, v in got.items() if k != "labels"}, flush=True)
    return got


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        print(json.dumps(one(*sys.argv[2:6])))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("static", help="a static encoder's folder (cea distill)")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--texts", type=int, default=50_000, help="the transformer bundle's corpus")
    parser.add_argument("--static-texts", type=int, default=1_000_000, help="the static bundle's corpus")
    args = parser.parse_args()
    from cea.data import load_dataset

    texts = [t for name in ("banking77", "clinc150") for t in load_dataset(name)["train"]["text"]]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "MLFLOW_ALLOW_FILE_STORE": "true"}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env["MLFLOW_TRACKING_URI"] = (tmp / "mlruns").as_uri()
        runs = {}
        for name, model, size, engines in (
            ("static", args.static, args.static_texts, ("local", "ray", "spark", "two-nodes")),
            ("transformer", args.model, args.texts, ("local", "ray")),
        ):
            bundle, corpus = tmp / name, tmp / f"corpus-{name}.parquet"
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "cea",
                    "bundle",
                    model,
                    "--dataset",
                    "banking77",
                    "--splits",
                    "train",
                    "-o",
                    str(bundle),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                env=env,
            )
            pd.DataFrame(
                {"id": range(size), "text": [f"{texts[i % len(texts)]} #{i // len(texts)}" for i in range(size)]}
            ).to_parquet(corpus)
            runs[name] = {engine: run(engine, bundle, corpus, tmp, env) for engine in engines}
            local = runs[name]["local"]
            for engine, got in runs[name].items():
                assert got["labels"] == local["labels"], f"{engine} answered otherwise than the local engine"
    for name, label, size in (("transformer", args.model, args.texts), ("static", "static", args.static_texts)):
        ray, local = runs[name]["ray"], runs[name]["local"]
        record(
            f"cea predict --engine ray, {label} bundle, {size:,} texts",
            ray["texts_s"],
            baseline=local["texts_s"],
            baseline_is="the local engine",
            unit="texts/s",
            section="batch-predict",
            note=f"{ray['texts_s'] / local['texts_s']:.2f}x (goal 0.85x); 2 actors x 1 thread, start included",
        )
    spark_run, local = runs["static"]["spark"], runs["static"]["local"]
    record(
        f"Spark spark_udf (local[2]), static bundle, {args.static_texts:,} texts",
        spark_run["texts_s"],
        baseline=local["texts_s"],
        baseline_is="the local engine",
        unit="texts/s",
        section="batch-predict",
        note=f"{spark_run['texts_s'] / local['texts_s']:.2f}x; Spark's start included, MLflow's logging not",
    )
    two = runs["static"]["two-nodes"]
    record(
        f"two Ray nodes of 1 CPU, static bundle, {args.static_texts:,} texts: larger node's share",
        round(100 * max(two["shares"]), 1),
        baseline=60,
        baseline_is="the goal's bound",
        unit="% of texts",
        section="batch-predict",
        note=f"{len(two['shares'])} nodes, {two['texts_s']:.0f} texts/s",
    )
    for name in runs:
        for engine, got in runs[name].items():
            if "actors_s" in got:
                print(f"{name} {engine}: actors' seconds reading / predicting / writing {got['actors_s']}")


if __name__ == "__main__":
    main()
