"""``cea train`` under torchrun with 2 CPU processes (gloo): one run, written once."""

import json
import os
import socket
import subprocess
import sys


def torchrun(*args):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(port),
            "-m",
            "cea",
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_train_with_two_processes_and_the_datapoint_memory(tiny_bert_dir, intents_csv, tmp_path):
    out = tmp_path / "run"
    proc = torchrun(
        "train",
        "--dataset",
        intents_csv,
        "--model",
        tiny_bert_dir,
        "--objective",
        "cea",
        "--pairs",
        "all",
        "--memory",
        "datapoint",
        "--batch-size",
        "6",
        "--k-per-class",
        "2",
        "--epochs",
        "2",
        "--output",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    # 17 train examples and the 3 labels' names; 2 processes x 6 = 12 a step (the last partial batch dropped): one
    # step per epoch
    assert results["steps"] == 2 and results["n_train"] == 17 + 3
    assert proc.stdout.count("model: ") == 1  # the main process reports, the other stays quiet
    assert results["metrics"]["test"]["knn_accuracy"] == 100.0  # the classes share their words
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
