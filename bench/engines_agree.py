"""Issue 107: the same labels from every engine, for every backend: the local engine (``cea predict --output
FILE``), Ray (2 actors, a folder of parts), two Ray nodes of one CPU each, and the HTTP service (``cea serve``,
8 clients sending 1 to 16 texts a request at random, so that each text is batched with others than elsewhere).

    python bench/engines_agree.py STATIC_ENCODER [--texts 40000] [--backends torch,onnx-int8,static]

For each backend, a bundle of banking77's train split (all-MiniLM-L6-v2 in PyTorch, in int8 ONNX; or the static
encoder made by ``cea distill all-MiniLM-L6-v2 -o DIR``) labels a Parquet corpus of ``--texts`` texts of 20 to 40
words (banking77 and clinc150 train texts joined, as bench/batch_predict.py): the share of texts each engine labels
as the local engine does. Records, per backend, the least share over the engines (goal: at least 99.9 %).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_predict import joined  # noqa: E402
from serve_load import start  # noqa: E402

from common import record  # noqa: E402

CLIENTS, MOST = 8, 16  # the service's clients, and the most texts a request sends


def bundle(tmp: Path, backend: str, static: str, env: dict) -> Path:
    folder = tmp / f"bundle-{backend}"
    encoder, chosen = (static, "torch") if backend == "static" else ("all-MiniLM-L6-v2", backend)
    command = [sys.executable, "-m", "cea", "bundle", encoder, "--dataset", "banking77", "--splits", "train"]
    subprocess.run([*command, "-o", str(folder), "--backend", chosen], check=True, stdout=subprocess.DEVNULL, env=env)
    return folder


def cli_labels(folder: Path, corpus: Path, out: Path, env: dict, *extra: str) -> list[str]:
    """``cea predict`` of the corpus into ``out`` (a file, or a folder of parts with ``--engine ray``): labels by id."""
    command = [sys.executable, "-m", "cea", "predict", str(folder), "--input", str(corpus), "--output", str(out)]
    subprocess.run([*command, *extra], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return pd.read_parquet(out, columns=["id", "label"]).sort_values("id")["label"].tolist()


def two_nodes(folder: Path, corpus: Path, out: Path, env: dict) -> list[str]:
    """Two Ray nodes of one CPU each (bench/batch_engines.py's ``--one two-nodes``)."""
    script = str(Path(__file__).resolve().parent / "batch_engines.py")
    subprocess.run(
        [sys.executable, script, "--one", "two-nodes", str(folder), str(corpus), str(out)],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return pd.read_parquet(out, columns=["id", "label"]).sort_values("id")["label"].tolist()


def served(folder: Path, texts: list[str], env: dict, port: int = 8731) -> list[str]:
    """Each text's label from ``cea serve``: CLIENTS threads, each sending its share of the texts in requests of 1 to
    MOST texts drawn at random."""
    import httpx

    proc = start([sys.executable, "-m", "cea", "serve", str(folder), "--port", str(port)], port)
    labels: list[str | None] = [None] * len(texts)
    failed: list[BaseException] = []

    def client(which: int) -> None:
        rng, rows = random.Random(which), list(range(which, len(texts), CLIENTS))
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
                while rows:
                    size = rng.randint(1, MOST)
                    batch, rows = rows[:size], rows[size:]
                    answer = http.post("/predict", json={"texts": [texts[i] for i in batch]})
                    answer.raise_for_status()
                    for i, found in zip(batch, answer.json()["predictions"]):
                        labels[i] = found["label"]
        except Exception as exc:  # noqa: BLE001 - said after the threads end: a thread's exception is not raised
            failed.append(exc)

    try:
        threads = [threading.Thread(target=client, args=(which,)) for which in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
    if failed or None in labels:
        raise SystemExit(f"the service's clients failed: {failed[:1] or 'texts left without a label'}")
    return labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("static", help="a static encoder's folder (cea distill)")
    parser.add_argument("--texts", type=int, default=40_000)
    parser.add_argument("--backends", default="torch,onnx-int8,static")
    args = parser.parse_args()
    from cea.data import load_dataset

    pool = [t for name in ("banking77", "clinc150") for t in load_dataset(name)["train"]["text"]]
    texts = joined(pool, 20, 40, count=args.texts)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus = tmp / "corpus.parquet"
        pd.DataFrame({"id": range(len(texts)), "text": texts}).to_parquet(corpus)
        for backend in args.backends.split(","):
            folder = bundle(tmp, backend, args.static, env)
            manifest = json.loads((folder / "manifest.json").read_text())
            local = cli_labels(folder, corpus, tmp / f"local-{backend}.parquet", env)
            engines = {
                "Ray, 2 actors": cli_labels(
                    folder, corpus, tmp / f"ray-{backend}", env, "--engine", "ray", "--actors", "2"
                ),
                "two Ray nodes": two_nodes(folder, corpus, tmp / f"nodes-{backend}", env),
                "the service": served(folder, texts, env),
            }
            shares = {name: 100 * sum(a == b for a, b in zip(got, local)) / len(local) for name, got in engines.items()}
            print(backend, manifest["backend"], {k: round(v, 3) for k, v in shares.items()}, flush=True)
            least = min(shares, key=shares.get)
            record(
                f"labels as the local engine's, {backend} bundle, {len(texts):,} texts of 20-40 words",
                round(shares[least], 3),
                baseline=99.9,
                baseline_is="the goal",
                unit="% of texts",
                section="batch-predict",
                note="; ".join(f"{name} {share:.3f}" for name, share in shares.items())
                + f"; backend {manifest['backend']}",
            )


if __name__ == "__main__":
    main()
