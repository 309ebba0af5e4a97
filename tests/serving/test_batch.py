"""cea.serving.batch: a corpus predicted batch by batch equals the bundle's predictions of it whole, every input
column kept; the CLI writes it and refuses bad input in one line."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from cea.knn.decision import Classifier
from cea.serving import Bundle
from cea.serving.batch import predict_files


@pytest.fixture
def made(tmp_path, tiny_st_dir, intents):
    return Bundle.create(tmp_path / "b", tiny_st_dir, list(intents["text"]), list(intents["label"]),
                         classifier=Classifier(k=3), progress=False)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_batches_give_the_bundles_own_answers_in_every_format(made, intents, tmp_path, suffix):
    corpus = intents.assign(ticket=range(100, 124)).drop(columns="label")
    corpus.iloc[:10].to_csv(tmp_path / "part-0.csv", index=False)
    corpus.iloc[10:].to_parquet(tmp_path / "part-1.parquet")
    out = tmp_path / f"out{suffix}"
    assert predict_files(made, str(tmp_path / "part-*"), str(out), top=2, rows=4) == 24
    got = (pd.read_parquet(out) if suffix == ".parquet" else pd.read_csv(out) if suffix == ".csv"
           else pd.read_json(out, lines=True))
    whole = made.predict(list(intents["text"]))
    assert got["row"].tolist() == list(range(24)) and got["ticket"].tolist() == list(range(100, 124))
    assert got["label"].tolist() == [p.label for p in whole]
    assert got["score"].tolist() == pytest.approx([p.score for p in whole], abs=1e-5)
    top = [json.loads(t) if isinstance(t, str) else list(t) for t in got["top"]]
    assert [t[0]["label"] for t in top] == got["label"].tolist() and all(len(t) == 2 for t in top)


def cea(*args):
    return subprocess.run([sys.executable, "-m", "cea", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})


def test_the_cli_writes_the_output_and_refuses_bad_input(made, intents, tmp_path):
    intents.rename(columns={"text": "body"}).to_csv(tmp_path / "in.csv", index=False)
    out = tmp_path / "out.jsonl"
    missing = cea("predict", str(made.root), "--input", str(tmp_path / "in.csv"), "--output", str(out))
    assert missing.returncode == 2 and "no column 'text' (it has body, label)" in missing.stderr
    assert "Traceback" not in missing.stderr and not out.exists() and not list(tmp_path.glob(".out*"))
    done = cea("predict", str(made.root), "--input", str(tmp_path / "in.csv"), "--output", str(out),
               "--text-column", "body")
    assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) == 24 and "24 rows in" in done.stderr
    again = cea("predict", str(made.root), "--input", str(tmp_path / "in.csv"), "--output", str(out))
    assert again.returncode == 2 and "--overwrite" in again.stderr
