"""Explore cea settings for 8-shot banking77 (sample 0): frozen kNN and a few training settings.

    python bench/fewshot_explore.py SETTING...   # e.g. frozen "cea:pairs=all,reduction=balanced,lr=2e-5,epochs=5"
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


from cea.data import load_dataset
from cea.data.dataset import few_shot
from cea.encoders import load_encoder
from cea.knn import KNNClassifier
from cea.training import TrainConfig, train
from cea.training.train import configure

OUT = Path("bench/results/fewshot_explore")


def frozen(sample: int) -> dict:
    ds = load_dataset("banking77")
    frame = few_shot(ds["train"], 8, seed=sample)
    model = load_encoder("all-MiniLM-L6-v2")
    ref, test = model.encode(list(frame["text"]), batch_size=64), model.encode(list(ds["test"]["text"]), batch_size=64)
    return {k: round(100 * float(KNNClassifier(k).fit(ref, frame["label"]).score(test, ds["test"]["label"])), 2)
            for k in (1, 3, 5)}


def run(spec: str, sample: int) -> dict:
    objective, _, rest = spec.partition(":")
    opts = dict(kv.split("=") for kv in rest.split(",") if kv)
    cast = {"lr": float, "epochs": float, "k_per_class": int, "batch_size": int, "knn_k": int, "margin": float}
    opts = {k: cast.get(k, str)(v) for k, v in opts.items()}
    name = spec.replace(":", "_").replace(",", "_").replace("=", "-")
    config = configure(TrainConfig(dataset="banking77", objective=objective, shots=8, shots_seed=sample, seed=sample,
                                   output=str(OUT / f"{name}-s{sample}")), **{"epochs": 10, **opts})
    t0 = time.perf_counter()
    result = train(config, progress=False)
    return {"spec": spec, "sample": sample, "test": result["metrics"]["test"], "train_seconds": result["train_seconds"],
            "wall": round(time.perf_counter() - t0, 1)}


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for spec in sys.argv[1:]:
        row = {"spec": "frozen", "test": frozen(0)} if spec == "frozen" else run(spec, 0)
        print(json.dumps(row), flush=True)
        with open(OUT / "log.jsonl", "a") as fh:
            fh.write(json.dumps(row) + "\n")
