"""Issue 61: a static encoder distilled from all-MiniLM-L6-v2 (`cea distill`) beside the teacher: accuracy and speed.

    python bench/static.py banking77 [--seeds 0] [--dims 256] [--rows teacher,static,trained,fasttext,model2vec]
    python bench/static.py banking77 --rows distilled-trained --seeds 0,1,2 [--teacher-run RUN]

For one data set, in one process: the teacher's distillate (``cea distill all-MiniLM-L6-v2``, made once under
bench/results/static/), then test accuracy of

* ``frozen + logistic regression``: the teacher's embeddings, C on dev (the baseline row of every table);
* ``teacher bundle``: ``cea bundle all-MiniLM-L6-v2`` on train + dev, its default classifier;
* ``static bundle``: the distillate, frozen, with the bundle's default classifier;
* ``static trained``: ``cea train --model DISTILLATE`` (the default objective trains its token vectors with the
  labels), then a bundle of its encoder;
* row ``distilled-trained`` (issue 61's (c) and (d)): the teacher trained by ``cea train`` defaults (seed 0, kept under
  bench/results/static/teacher-SET, or ``--teacher-run``), its distillate (``cea distill RUN``), frozen with the
  bundle's classifier (``trained teacher's static bundle``) and trained with the labels as above (``trained teacher's
  static trained``); the note names (a), the newest ``cea fit`` record of the set in docs/records/fit.jsonl;
* the peers a user would pick instead: ``fastText`` supervised (fasttext-wheel, its autotune on dev for
  ``--autotune`` seconds) and ``model2vec classifier`` (model2vec's ``StaticModelForClassification`` on the same
  distillate, dev as its validation set);

and the encode texts/s at batch 64 of the teacher and the distillate on the test texts (median of 3 passes each,
side by side, every core). Records per data set: ``docs/records/static.jsonl``, section ``static``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cea.encoders.static import distill  # noqa: E402
from common import R, accuracy, cea, encoded, logreg_on_dev, record, results  # noqa: E402

TEACHER = "all-MiniLM-L6-v2"
DIMS = inspect.signature(distill).parameters["dims"].default  # cea distill's


def bundle_accuracy(model: str, ds, folder: Path) -> float:
    """Test accuracy of a bundle of ``model`` on train + dev with its default classifier."""
    import pandas as pd

    from cea.bundle import Bundle

    frame = pd.concat([ds["train"], ds["dev"]])
    with Bundle.create(folder, model, list(frame["text"]), list(frame["label"].astype(str)), progress=False) as made:
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


def trained_accuracies(dataset: str, static: Path, ds, seeds: list[int], tmp: Path) -> list[float]:
    """``cea train --model STATIC`` (its defaults) per seed, then a bundle of its encoder; test accuracies."""
    out = []
    for seed in seeds:
        run = tmp / f"run-{static.name}-{seed}"
        subprocess.run(
            cea("train", "--dataset", dataset, "--model", static, "--seed", seed, "--output", run),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        out.append(bundle_accuracy(str(run / "model"), ds, tmp / f"trained-{static.name}-{seed}"))
    return out


def fit_record(name: str) -> str:
    """(a): the newest ``cea fit test accuracy, SET`` record in docs/records/fit.jsonl, as a note's words."""
    path = Path(__file__).resolve().parent.parent / "docs" / "records" / "fit.jsonl"
    found = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    found = [r for r in found if r["figure"] == f"cea fit test accuracy, {name}"]
    return f"cea fit {found[-1]['value']} (fit.jsonl, {found[-1]['date']})" if found else "no cea fit record"


def fasttext_accuracy(ds, folder: Path, seconds: int) -> float:
    """fastText supervised, its autotune on dev for ``seconds``; test accuracy."""
    import fasttext

    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev"):
        lines = [
            f"__label__{str(lab).replace(' ', '_')} {' '.join(str(t).split())}"
            for t, lab in zip(ds[split]["text"], ds[split]["label"])
        ]
        (folder / f"{split}.txt").write_text("\n".join(lines) + "\n")
    model = fasttext.train_supervised(
        input=str(folder / "train.txt"),
        autotuneValidationFile=str(folder / "dev.txt"),
        autotuneDuration=seconds,
        thread=1,
        verbose=0,
    )
    found = [
        labels[0].removeprefix("__label__")
        for labels in model.predict([" ".join(str(t).split()) for t in ds["test"]["text"]])[0]
    ]
    return accuracy(found, [str(lab).replace(" ", "_") for lab in ds["test"]["label"]])


def model2vec_accuracy(ds, static: Path, seed: int) -> float:
    """model2vec's classifier on the distillate (dev its validation set); test accuracy."""
    from model2vec.train import StaticModelForClassification

    model = StaticModelForClassification.from_pretrained(path=str(static))
    model.fit(
        list(ds["train"]["text"]),
        list(ds["train"]["label"].astype(str)),
        X_val=list(ds["dev"]["text"]),
        y_val=list(ds["dev"]["label"].astype(str)),
        random_seed=seed,
    )
    return accuracy(model.predict(list(ds["test"]["text"])), ds["test"]["label"].astype(str))


def parse() -> argparse.Namespace:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--seeds", default="0")
    parser.add_argument(
        "--dims",
        type=int,
        default=DIMS,
        help="cea distill --dims; a value other than its default is named in the figures",
    )
    parser.add_argument("--rows", default="teacher,static,trained,fasttext,model2vec")
    parser.add_argument("--autotune", type=int, default=120, help="fastText's autotune seconds")
    parser.add_argument("--teacher-run", help="distilled-trained: this cea train run as the trained teacher")
    return parser.parse_args()


def trained_teacher_distillate(args: argparse.Namespace, name: str) -> Path:
    """The distillate of the trained teacher (``--teacher-run``, else cea train defaults at seed 0), each made once."""
    run = Path(args.teacher_run or R / "static" / f"teacher-{name}")
    if results(run) is None:
        subprocess.run(
            cea("train", "--dataset", args.dataset, "--seed", 0, "--output", run), check=True, stdout=subprocess.DEVNULL
        )
    distilled = R / "static" / f"minilm-{args.dims}-{run.name}"
    if not distilled.exists():
        subprocess.run(cea("distill", run, "-o", distilled, "--dims", args.dims), check=True)
    return distilled


def row_accuracies(args: argparse.Namespace, name: str, ds, static: Path) -> tuple[dict, dict]:
    """Each asked row's test accuracy (a seeded row's: the mean over the seeds), and each seeded row's per seed."""
    rows, asked, seeds = {}, args.rows.split(","), [int(s) for s in args.seeds.split(",")]
    per_seed = {}
    with tempfile.TemporaryDirectory() as tmp:
        if "teacher" in asked:
            rows["teacher bundle"] = bundle_accuracy(TEACHER, ds, Path(tmp) / "teacher")
        if "static" in asked:
            rows["static bundle"] = bundle_accuracy(str(static), ds, Path(tmp) / "static")
        if "trained" in asked:
            per_seed["static trained"] = trained_accuracies(args.dataset, static, ds, seeds, Path(tmp))
            rows["static trained"] = float(np.mean(per_seed["static trained"]))
        if "distilled-trained" in asked:
            distilled = trained_teacher_distillate(args, name)
            rows["trained teacher's static bundle"] = bundle_accuracy(str(distilled), ds, Path(tmp) / "distilled")
            per_seed["trained teacher's static trained"] = trained_accuracies(
                args.dataset, distilled, ds, seeds, Path(tmp)
            )
            rows["trained teacher's static trained"] = float(np.mean(per_seed["trained teacher's static trained"]))
        if "fasttext" in asked:
            rows["fastText supervised"] = fasttext_accuracy(ds, Path(tmp) / "fasttext", args.autotune)
        if "model2vec" in asked:
            per_seed["model2vec classifier"] = [model2vec_accuracy(ds, static, s) for s in seeds]
            rows["model2vec classifier"] = float(np.mean(per_seed["model2vec classifier"]))
    return rows, per_seed


def row_notes(args: argparse.Namespace, name: str, per_seed: dict) -> dict:
    """The records' notes of the rows that need more than their dims: seeds, autotune, the trained teacher, (a)."""
    notes = {row: f"seeds {args.seeds}: {' / '.join(f'{v:.2f}' for v in values)}" for row, values in per_seed.items()}
    notes |= {
        "fastText supervised": f"autotune {args.autotune} s on dev, 1 thread",
        "trained teacher's static bundle": f"teacher: cea train defaults, seed 0; dims {args.dims}",
    }
    if "trained teacher's static trained" in notes:
        notes["trained teacher's static trained"] += f"; (a) {fit_record(name)}"
    return notes


def main():
    args = parse()
    import torch

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
    rows, per_seed = row_accuracies(args, name, ds, static)
    texts, speed = list(ds["test"]["text"]), None
    if {"teacher", "static"} & set(args.rows.split(",")):  # the peers alone: the speed is another run's record
        speed = {
            "teacher": texts_per_second(teacher, texts),
            "static": texts_per_second(load_encoder(str(static)), texts),
        }
    print(name, {"frozen + logistic regression": base, **rows}, speed, flush=True)
    notes = row_notes(args, name, per_seed)
    shown = name if args.dims == DIMS else f"{name} at {args.dims} dims"
    for row, value in rows.items():
        record(
            f"{row}, {shown}, test accuracy",
            round(value, 2),
            baseline=base,
            baseline_is="frozen teacher + logistic regression, C on dev",
            unit="% accuracy",
            section="static",
            note=notes.get(row, f"dims {args.dims}"),
        )
    if speed:
        record(
            f"static encoder encode speed, {shown}, batch 64",
            round(speed["static"]),
            baseline=round(speed["teacher"]),
            baseline_is="all-MiniLM-L6-v2",
            unit="texts/s",
            section="static",
            note=f"{speed['static'] / speed['teacher']:.0f}x; dims {args.dims}; {torch.get_num_threads()} thread(s)",
        )


if __name__ == "__main__":
    main()
