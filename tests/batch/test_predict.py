"""cea.batch.predict: a corpus predicted batch by batch equals the bundle's predictions of it whole, every input
column kept; the CLI writes it and refuses bad input in one line."""

import json
import os
import re
import subprocess
import sys

import pandas as pd
import pytest

from cea.batch.predict import predict_files, predict_folder
from cea.bundle import Bundle
from cea.errors import CeaError
from cea.knn.decision import Classifier


@pytest.fixture
def made(tmp_path, tiny_st_dir, intents):
    return Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier(k=3),
        progress=False,
    )


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_batches_give_the_bundles_own_answers_in_every_format(made, intents, tmp_path, suffix):
    corpus = intents.assign(ticket=range(100, 124)).drop(columns="label")
    corpus.iloc[:10].to_csv(tmp_path / "part-0.csv", index=False)
    corpus.iloc[10:].to_parquet(tmp_path / "part-1.parquet")
    out = tmp_path / f"out{suffix}"
    assert predict_files(made, str(tmp_path / "part-*"), str(out), top=2, rows=4) == 24
    got = (
        pd.read_parquet(out)
        if suffix == ".parquet"
        else pd.read_csv(out)
        if suffix == ".csv"
        else pd.read_json(out, lines=True)
    )
    whole = made.predict(list(intents["text"]))
    assert got["row"].tolist() == list(range(24)) and got["ticket"].tolist() == list(range(100, 124))
    assert got["label"].tolist() == [p.label for p in whole]
    assert got["score"].tolist() == pytest.approx([p.score for p in whole], abs=1e-5)
    top = [json.loads(t) if isinstance(t, str) else list(t) for t in got["top"]]
    assert [t[0]["label"] for t in top] == got["label"].tolist() and all(len(t) == 2 for t in top)


def test_batch_work_bounds_the_primitive_cache_and_hands_it_to_its_actors(made, intents, tmp_path, monkeypatch):
    """oneDNN keeps a primitive per input shape, up to 1,024 by default: a corpus's passes of every length grew the peak
    RSS with the corpus. Batch prediction sets a small cache before its first encode (one the user set stays)."""
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    intents.to_csv(tmp_path / "in.csv", index=False)
    predict_files(made, str(tmp_path / "in.csv"), str(tmp_path / "out.parquet"))
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "8"
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")
    done = predict_folder(made.root, str(tmp_path / "in.csv"), tmp_path / "parts")
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "64" and sum(d["rows"] for d in done) == 24


def cea(*args):
    return subprocess.run(
        [sys.executable, "-m", "cea", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


def test_the_cli_writes_the_output_and_refuses_bad_input(made, intents, tmp_path):
    intents.rename(columns={"text": "body"}).to_csv(tmp_path / "in.csv", index=False)
    out = tmp_path / "out.jsonl"
    missing = cea("predict", str(made.root), "--input", str(tmp_path / "in.csv"), "--output", str(out))
    assert missing.returncode == 2 and "no column 'text' (it has body, label)" in missing.stderr
    assert "Traceback" not in missing.stderr and not out.exists() and not list(tmp_path.glob(".out*"))
    done = cea(
        "predict", str(made.root), "--input", str(tmp_path / "in.csv"), "--output", str(out), "--text-column", "body"
    )
    assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) == 24 and "24 rows in" in done.stderr
    again = cea("predict", str(made.root), "--input", str(tmp_path / "in.csv"), "--output", str(out))
    assert again.returncode == 2 and "--overwrite" in again.stderr


def _parts(folder):
    return pd.read_parquet(folder).sort_values("row").reset_index(drop=True)


def test_a_folder_of_parts_equals_the_file_and_an_existing_one_is_refused(made, intents, tmp_path):
    intents.drop(columns="label").to_json(tmp_path / "in.jsonl", orient="records", lines=True)
    file = tmp_path / "one.parquet"
    predict_files(made, str(tmp_path / "in.jsonl"), str(file), top=2)
    done = predict_folder(made.root, str(tmp_path / "in.jsonl"), tmp_path / "out", top=2, rows=5)
    assert sorted(d["part"] for d in done) == list(range(5)) and sum(d["rows"] for d in done) == 24
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"part-0000{i}.parquet" for i in range(5)]
    pd.testing.assert_frame_equal(_parts(tmp_path / "out"), pd.read_parquet(file))
    with pytest.raises(CeaError, match="output .*out exists; pass overwrite=True"):
        predict_folder(made.root, str(tmp_path / "in.jsonl"), tmp_path / "out")
    with pytest.raises(CeaError, match="no column 'body'"):
        predict_folder(made.root, str(tmp_path / "in.jsonl"), tmp_path / "out", text_column="body", overwrite=True)
    assert len(list((tmp_path / "out").iterdir())) == 5  # the failed run left the old folder and nothing beside it
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_the_ray_engine_equals_the_local_one(made, intents, tmp_path):
    pytest.importorskip("ray", reason="pip install 'cea[ray]'")
    pd.concat([intents] * 5).drop(columns="label").to_csv(tmp_path / "in.csv", index=False)
    local = predict_folder(made.root, str(tmp_path / "in.csv"), tmp_path / "local", rows=16, top=2)
    ray = predict_folder(made.root, str(tmp_path / "in.csv"), tmp_path / "ray", rows=16, top=2, engine="ray", actors=2)
    assert {d["node"] for d in local} == {"local"} and len({d["node"] for d in ray}) == 1
    assert sorted(d["part"] for d in ray) == list(range(8))
    got, want = _parts(tmp_path / "ray"), _parts(tmp_path / "local")
    assert got["label"].tolist() == want["label"].tolist() and got["row"].tolist() == list(range(120))
    assert got["score"].to_numpy() == pytest.approx(want["score"].to_numpy(), abs=1e-5)
    with pytest.raises(CeaError, match="^in.csv has no column 'body' \\(it has text\\)") as caught:  # an actor's
        predict_folder(made.root, str(tmp_path / "in.csv"), tmp_path / "bad", text_column="body", engine="ray")
    assert "\n" not in str(caught.value) and type(caught.value) is CeaError  # the worker's own error, one line
    assert not (tmp_path / "bad").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_ray_refusals_name_the_fix(made, intents, tmp_path, monkeypatch):
    intents.to_csv(tmp_path / "in.csv", index=False)
    with pytest.raises(CeaError, match="address and actors go with engine ray"):
        predict_folder(made.root, str(tmp_path / "in.csv"), tmp_path / "o", actors=2)
    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed
    with pytest.raises(CeaError, match="pip install 'cea\\[ray\\]'"):
        predict_folder(made.root, str(tmp_path / "in.csv"), tmp_path / "o", engine="ray")
    monkeypatch.undo()
    pytest.importorskip("ray", reason="pip install 'cea[ray]'")
    with pytest.raises(CeaError, match="address 127.0.0.1:9 does not answer"):
        predict_folder(made.root, str(tmp_path / "in.csv"), tmp_path / "o", engine="ray", address="127.0.0.1:9")
    assert not (tmp_path / "o").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_two_nodes_of_one_cpu_each_share_the_parts_through_the_cli(made, intents, tmp_path):
    pytest.importorskip("ray", reason="pip install 'cea[ray]'")
    from ray.cluster_utils import Cluster

    pd.concat([intents] * 100).drop(columns="label").to_parquet(tmp_path / "in.parquet")  # 200 parts of 12
    predict_folder(made.root, str(tmp_path / "in.parquet"), tmp_path / "local", rows=12)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        done = cea(
            "predict",
            str(made.root),
            "--input",
            str(tmp_path / "in.parquet"),
            "--output",
            str(tmp_path / "ray"),
            "--engine",
            "ray",
            "--address",
            cluster.address,
            "--batch-rows",
            "12",
        )
    finally:
        cluster.shutdown()
    assert done.returncode == 0, done.stderr[-3000:]
    shares = re.findall(r"node\s+\w+:\s+(\d+)%", done.stderr)
    assert re.search(r"2,?400 rows in 200 parts", done.stderr)
    # both nodes took parts; how evenly is a timing (bench/batch_engines.py records it on real work): Ray Data queues
    # parts on the actor beside their blocks, the driver's node, and an actor that loads later gets fewer
    assert len(shares) == 2, shares  # a node is named where it did rows
    got, want = _parts(tmp_path / "ray"), _parts(tmp_path / "local")
    assert got["label"].tolist() == want["label"].tolist() and got["row"].tolist() == list(range(2400))
    assert got["score"].to_numpy() == pytest.approx(want["score"].to_numpy(), abs=1e-5)
