"""Issue 61: a static encoder distilled from all-MiniLM-L6-v2 (`cea distill`) beside the teacher: accuracy and speed.

    python bench/static.py banking77 [--seeds 0] [--dims 256]

For one data set, in one process: the teacher's distillate (``cea distill all-MiniLM-L6-v2``, made once under
bench/results/static/), then test accuracy of

* ``frozen + logistic regression``: the teacher's embeddings, C on dev (the baseline row of every table);
* ``teacher bundle``: ``cea bundle all-MiniLM-L6-v2`` on train + dev, its default classifier;
* ``static bundle``: the distillate, frozen, with the bundle's default classifier;
* ``static trained``: ``cea train --model DISTILLATE`` (the default objective trains its token vectors with the
  labels), then a bundle of its encoder;

and the encode texts/s at batch 64 of the teacher and the distillate on the test texts (median of 3 passes each,
side by side, every core). Records per data set: ``docs/records/static.jsonl``, section ``static``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import R, accuracy, cea, encoded, logreg_on_dev, record  # noqa: E402

TEACHER = "all-MiniLM-L6-v2"


def bundle_accuracy(model: str, ds, folder: Path) -> float:
    """Test accuracy of a bundle of ``model`` on train + dev with its default classifier."""
    from cea.serving import Bundle

    import pandas as pd

    frame = pd.concat([ds["train"], ds["dev"]])
    with Bundle.create(folder, model, list(frame["text"]), list(frame["label"].astype(str)),
                       progress=False) as made:
        return accuracy([p.label for p in made.predict(list(ds["test"]["text"]))], ds["test"]["label"].astype(str))


def texts_per_second(model, texts: list[str], batch: int = 64) -> float:
    """Median of 3 encodes of ``texts`` at ``batch``, texts/s."""
    model.encode(texts[:batch], batch_size=batch)  # warm
    runs = []
    for _ in range(3):
        started = time.perf_counter()
        model.encode(texts, batch_size=batch)
        runs.append(len(texts) / (time.perf_counter() - started))
    return float(np.median(runs))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--dims", type=int, default=256)
    args = parser.parse_args()
    from cea.data import load_dataset
    from cea.encoders import load_encoder

    name = Path(args.dataset.rstrip("/")).name
    static = R / "static" / f"minilm-{args.dims}"
    if not static.exists():
        subprocess.run(cea("distill", TEACHER, "-o", static, "--dims", args.dims), check=True)
    ds = load_dataset(args.dataset)
    teacher = load_encoder(TEACHER, device="cpu")
    frames = {s: ds[s] for s in ("train", "dev", "test")}
    x, y = encoded(teacher, frames)
    y = {s: v.astype(str) for s, v in y.items()}
    base = accuracy(logreg_on_dev(x, y)[0].predict(x["test"]), y["test"])
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        rows["teacher bundle"] = bundle_accuracy(TEACHER, ds, Path(tmp) / "teacher")
        rows["static bundle"] = bundle_accuracy(str(static), ds, Path(tmp) / "static")
        trained = []
        for seed in [int(s) for s in args.seeds.split(",")]:
            run = Path(tmp) / f"run-{seed}"
            subprocess.run(cea("train", "--dataset", args.dataset, "--model", static, "--seed", seed, "--output", run),
                           check=True, stdout=subprocess.DEVNULL)
            trained.append(bundle_accuracy(str(run / "model"), ds, Path(tmp) / f"trained-{seed}"))
        rows["static trained"] = float(np.mean(trained))
    texts = list(ds["test"]["text"])
    speed = {"teacher": texts_per_second(teacher, texts), "static": texts_per_second(load_encoder(str(static)), texts)}
    print(name, {"frozen + logistic regression": base, **rows}, speed, flush=True)
    for row, value in rows.items():
        record(f"{row}, {name}, test accuracy", value, baseline=base, baseline_is="frozen teacher + logistic "
               "regression, C on dev", unit="% accuracy", section="static",
               note=f"seeds {args.seeds}" if row == "static trained" else f"dims {args.dims}")
    record(f"static encoder encode speed, {name}, batch 64", round(speed["static"]), baseline=round(speed["teacher"]),
           baseline_is="all-MiniLM-L6-v2", unit="texts/s", section="static",
           note=f"{speed['static'] / speed['teacher']:.0f}x; dims {args.dims}")


if __name__ == "__main__":
    main()
