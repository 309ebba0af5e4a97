"""Issue 18, texts with several labels: the frozen encoder and trained ones (run folders' models) judged as
`cea train` judges a multi-label run (cea.evaluation.multilabel: the kNN vote per label and cea's logistic
regression per label, C = 10, each with its threshold chosen on dev), beside the simple baseline, scikit-learn's
one-vs-rest logistic regression on the frozen embeddings with C and the probability threshold chosen on dev.

    OMP_NUM_THREADS=1 python bench/multilabel.py banking77-multi --runs 'bench/results/multi-*'
    # a trained run: cea train --dataset banking77-multi --objective cea --seed 0 --output bench/results/multi-cea-s0

The trained runs' figure is a record (``docs/records/multilabel.jsonl``): the head's micro-F1 against the
baseline's.
"""

from __future__ import annotations

import argparse
import glob
import json
import time
from pathlib import Path

from cea.data import load_dataset
from cea.encoders import load_encoder
from cea.encoders.embeddings import encode
from cea.evaluation.multilabel import multilabel_evaluate, multilabel_scores
from cea.knn.labelsets import THRESHOLDS, binarize, choose_labels
from common import record, results, table

KEYS = ("micro_f1", "macro_f1", "subset_accuracy")


def logistic_baseline(x: dict, sets: dict) -> dict:
    """One-vs-rest logistic regression (scikit-learn), C and threshold on dev, refit on train, scored on test."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    classes = sorted({label for labels in sets["train"] for label in labels})
    y = binarize(sets["train"], classes)
    best = None
    for c in (0.1, 1.0, 10.0, 100.0):
        model = OneVsRestClassifier(LogisticRegression(C=c, max_iter=3000)).fit(x["train"], y)
        proba = model.predict_proba(x["dev"])
        for t in THRESHOLDS:
            f1 = multilabel_scores(choose_labels(proba, classes, t), sets["dev"])["micro_f1"]
            if best is None or f1 > best[0]:
                best = (f1, c, t, model)
    _, c, t, model = best
    test = multilabel_scores(choose_labels(model.predict_proba(x["test"]), classes, t), sets["test"])
    return {
        "model": f"frozen + logistic regression per label (C={c:g}, threshold {t:g}; baseline)",
        **{k: test[k] for k in KEYS},
    }


def judged(model_path: str, label: str, ds) -> tuple[list[dict], dict, dict]:
    """The product's judge (kNN vote and logistic regression per label) of one encoder, on test."""
    model = load_encoder(model_path)
    x = {s: encode(model, ds[s]["text"]) for s in ("train", "dev", "test")}
    sets = {s: list(ds[s]["labels"]) for s in x}
    result = multilabel_evaluate(
        x["train"], sets["train"], {s: (x[s], sets[s]) for s in ("dev", "test")}, k=5, linear=True
    )
    rows = [
        {
            "model": f"{label}, kNN-5 per label (threshold {result.threshold:g})",
            **{k: result.scores["test"][k] for k in KEYS},
        },
        {
            "model": f"{label}, logistic regression per label (threshold {result.linear.threshold:g})",
            **{k: result.linear.scores["test"][k] for k in KEYS},
        },
    ]
    return rows, x, sets


def trained(patterns: list[str]) -> list[tuple[str, str, float]]:
    """(model folder, label, training seconds) of every finished run."""
    out = []
    for folder in sorted(p for pattern in patterns for p in glob.glob(pattern)):
        r = results(folder)
        if r is not None:
            c = r["config"]
            label = (
                f"{c['objective']} ({c['sampler']} batches), {c['epochs']:g} epoch(s), lr {c['lr']:g}, seed {c['seed']}"
            )
            out.append((str(Path(folder) / "model"), label, r["train_seconds"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--runs", nargs="*", default=[])
    args = parser.parse_args()
    ds = load_dataset(args.dataset)
    rows, x, sets = judged(args.model, "frozen", ds)
    t0 = time.perf_counter()
    rows.insert(0, logistic_baseline(x, sets))
    rows[0]["fit_seconds"] = round(time.perf_counter() - t0, 1)
    for folder, label, seconds in trained(args.runs):
        for row in judged(folder, label, ds)[0]:
            rows.append({**row, "train_seconds": seconds})
    print(json.dumps(rows))
    table(
        ["model", "micro-F1", "macro-F1", "subset accuracy", "train s"],
        [
            [
                r["model"],
                f"{r['micro_f1']:.2f}",
                f"{r['macro_f1']:.2f}",
                f"{r['subset_accuracy']:.2f}",
                r.get("train_seconds", "-"),
            ]
            for r in rows
        ],
    )
    heads = [r for r in rows[1:] if "train_seconds" in r and "logistic regression per label" in r["model"]]
    if heads:
        record(
            f"multi-label micro-F1, {args.dataset}",
            round(sum(r["micro_f1"] for r in heads) / len(heads), 2),
            baseline=round(rows[0]["micro_f1"], 2),
            unit=f"% micro-F1, mean of {len(heads)} runs",
            section="multi-label",
            baseline_is="frozen one-vs-rest logistic regression",
            note=f"the bundle's head per label; macro-F1 {sum(r['macro_f1'] for r in heads) / len(heads):.2f}",
        )


if __name__ == "__main__":
    main()
