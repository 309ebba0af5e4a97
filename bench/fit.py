"""Issue 17: ``cea fit`` with the default budget beside the manual path, and the frozen encoder with a
tuned logistic regression as the baseline row.

For one catalog data set, in one process on this machine:

* ``fit``: ``cea fit D -o OUT/D-bundle --work OUT/D-fit`` (defaults: all-MiniLM-L6-v2, 15 min budget);
  its wall time, choices and test figures come from ``fit.json`` (train and dev as references, k and
  vote chosen on dev);
* ``manual``: what the README's commands give a user who does not tune anything: ``cea train --dataset D``
  (the default objective, 1 epoch, kNN with k = 5 on train) and its wall time;
* ``logreg``: the frozen encoder's last layer (mean pooling) with scikit-learn's ``LogisticRegression``,
  C chosen on dev from 0.1 to 100, refit on train and dev, scored on test.

    OMP_NUM_THREADS=1 python bench/fit.py banking77 --out /work/runs/fit   # one data set per core
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def logreg(dataset: str) -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    from cea.data import load_dataset
    from cea.encoders import embed, load_encoder, num_layers
    from cea.knn.search import normalize

    ds = load_dataset(dataset)
    model = load_encoder("all-MiniLM-L6-v2")
    last = num_layers(model)
    x = {s: normalize(embed(model, list(ds[s]["text"]), [last], ["mean"], progress=False)[(last, "mean")])
         for s in ("train", "dev", "test")}
    y = {s: ds[s]["label"].to_numpy() for s in x}
    scores = {}
    for c in (0.1, 1.0, 10.0, 100.0):
        clf = LogisticRegression(C=c, max_iter=2000).fit(x["train"], y["train"])
        scores[c] = float(np.mean(clf.predict(x["dev"]) == y["dev"]))
    c = max(scores, key=scores.get)
    clf = LogisticRegression(C=c, max_iter=2000).fit(np.vstack([x["train"], x["dev"]]),
                                                     np.concatenate([y["train"], y["dev"]]))
    pred = clf.predict(x["test"])
    return {"C": c, "dev_accuracy": round(100 * scores[c], 2), "accuracy": round(100 * float(np.mean(pred == y["test"])), 2),
            "macro_f1": round(100 * float(f1_score(y["test"], pred, average="macro")), 2)}


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return round(time.perf_counter() - t0, 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset")
    parser.add_argument("--out", default="bench/results/fit")
    parser.add_argument("--skip-manual", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    d = args.dataset
    record = {"dataset": d, "logreg": logreg(d)}
    record["fit_wall_seconds"] = timed([sys.executable, "-m", "cea", "fit", d, "-o", str(out / f"{d}-bundle"),
                                        "--work", str(out / f"{d}-fit")])
    record["fit"] = json.loads((out / f"{d}-fit" / "fit.json").read_text())
    if not args.skip_manual:
        record["manual_wall_seconds"] = timed([sys.executable, "-m", "cea", "train", "--dataset", d,
                                               "--output", str(out / f"{d}-manual")])
        record["manual"] = json.loads((out / f"{d}-manual" / "results.json").read_text())["metrics"]["test"]
    (out / f"{d}.json").write_text(json.dumps(record, indent=1))
    print(json.dumps({k: v for k, v in record.items() if k != "fit"}, indent=1))
    print(json.dumps({k: record["fit"][k] for k in ("chosen", "layer", "classifier", "C", "knn_share", "k", "weights", "test",
                                                "skipped", "seconds")}))


if __name__ == "__main__":
    main()
