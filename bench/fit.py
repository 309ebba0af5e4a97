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
from pathlib import Path

from common import accuracy_f1, cea, logreg_on_dev, results, timed


def logreg(dataset: str) -> dict:
    """The baseline: the frozen encoder's last layer, C on dev, refitted on train + dev, scored on test."""
    from cea.data import load_dataset
    from cea.encoders import embed, load_encoder, num_layers
    from cea.knn.search import normalize

    ds = load_dataset(dataset)
    model = load_encoder("all-MiniLM-L6-v2")
    last = num_layers(model)
    x = {s: normalize(embed(model, list(ds[s]["text"]), [last], ["mean"], progress=False)[(last, "mean")])
         for s in ("train", "dev", "test")}
    y = {s: ds[s]["label"].to_numpy() for s in x}
    clf, c, dev = logreg_on_dev(x, y, max_iter=2000)
    test = accuracy_f1(clf.predict(x["test"]), y["test"]).split(" / ")
    return {"C": c, "dev_accuracy": round(100 * dev, 2), "accuracy": float(test[0]), "macro_f1": float(test[1])}


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
    record["fit_wall_seconds"] = timed(cea("fit", d, "-o", out / f"{d}-bundle", "--work", out / f"{d}-fit"))
    record["fit"] = json.loads((out / f"{d}-fit" / "fit.json").read_text())
    if not args.skip_manual:
        record["manual_wall_seconds"] = timed(cea("train", "--dataset", d, "--output", out / f"{d}-manual"))
        record["manual"] = results(out / f"{d}-manual")["metrics"]["test"]
    (out / f"{d}.json").write_text(json.dumps(record, indent=1))
    print(json.dumps({k: v for k, v in record.items() if k != "fit"}, indent=1))
    print(json.dumps({k: record["fit"][k] for k in ("chosen", "layer", "classifier", "C", "knn_share", "k", "weights", "test",
                                                "skipped", "seconds")}))


if __name__ == "__main__":
    main()
