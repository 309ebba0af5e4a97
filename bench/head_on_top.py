"""Issue 16, the classifier on top: the same embeddings judged by kNN (k = 5; k and vote chosen on dev),
by a logistic regression (C chosen on dev), and by the two mixed (a * head + (1 - a) * kNN class
probabilities, a from 0, 0.25, ..., 1 on dev), for the frozen encoder and trained ones.

Every classifier is chosen on dev with train as references / training data, then refit (or given
references) on train + dev and scored on test, so the rows are comparable with each other and with the
frozen + logistic regression baseline of sections 13 and issue 16. With ``--shots N`` train keeps N
examples per label (``--shots-seed``) and is the only training data / references: dev chooses k, the
vote and C, and is not added back.

    OMP_NUM_THREADS=2 python bench/head_on_top.py banking77 all-MiniLM-L6-v2 RUN_A/model RUN_B/model
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score

from cea.data import load_dataset
from cea.data.dataset import subsample
from cea.encoders import load_encoder
from cea.evaluation.classification import choose_vote, encode
from cea.knn import KNNClassifier
from cea.knn.search import normalize


def scores(pred, gold) -> str:
    return f"{100 * np.mean(pred == gold):.2f} / {100 * f1_score(gold, pred, average='macro'):.2f}"


def judge(model_path: str, ds, few: bool = False) -> dict:
    model = load_encoder(model_path)
    x = {s: normalize(encode(model, ds[s]["text"])) for s in ("train", "dev", "test")}
    y = {s: ds[s]["label"].to_numpy() for s in x}
    both_x, both_y = (x["train"], y["train"]) if few else (np.vstack([x["train"], x["dev"]]),
                                                           np.concatenate([y["train"], y["dev"]]))
    row = {"model": model_path}
    row["knn-5"] = scores(KNNClassifier(5).fit(both_x, both_y).predict(x["test"]), y["test"])
    vote, _ = choose_vote(x["train"], y["train"], x["dev"], y["dev"])
    row["knn, k and vote on dev"] = (scores(KNNClassifier(vote["k"], weights=vote["weights"]).fit(both_x, both_y)
                                            .predict(x["test"]), y["test"]) + f" (k={vote['k']}, {vote['weights']})")
    dev = {}
    for c in (0.1, 1.0, 10.0, 100.0):
        dev[c] = np.mean(LogisticRegression(C=c, max_iter=3000).fit(x["train"], y["train"]).predict(x["dev"]) == y["dev"])
    c = max(dev, key=dev.get)
    t0 = time.perf_counter()
    head = LogisticRegression(C=c, max_iter=3000).fit(both_x, both_y)
    row["logreg, C on dev"] = scores(head.predict(x["test"]), y["test"]) + f" (C={c:g}, fit {time.perf_counter() - t0:.1f} s)"
    # the head's and kNN's class probabilities mixed, a * head + (1 - a) * kNN, with a on dev (train-only fits)
    knn = KNNClassifier(vote["k"], weights=vote["weights"])
    small = LogisticRegression(C=c, max_iter=3000).fit(x["train"], y["train"])
    knn.fit(x["train"], y["train"])
    mix = {a: np.mean(small.classes_[(a * small.predict_proba(x["dev"]) + (1 - a) * knn.predict_proba(x["dev"]))
                                     .argmax(1)] == y["dev"]) for a in (0.0, 0.25, 0.5, 0.75, 1.0)}
    a = max(mix, key=mix.get)
    knn.fit(both_x, both_y)
    mixed = head.classes_[(a * head.predict_proba(x["test"]) + (1 - a) * knn.predict_proba(x["test"])).argmax(1)]
    row["mixed, a on dev"] = scores(mixed, y["test"]) + f" (a={a:g})"
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset")
    parser.add_argument("models", nargs="+")
    parser.add_argument("--shots", type=int)
    parser.add_argument("--shots-seed", type=int, default=0)
    args = parser.parse_args()
    ds = load_dataset(args.dataset)
    if args.shots:
        ds = subsample(ds, args.shots, seed=args.shots_seed)
    rows = [judge(m, ds, few=bool(args.shots)) for m in args.models]
    print(json.dumps(rows, indent=1))
    keys = [k for k in rows[0] if k != "model"]
    print("| model | " + " | ".join(keys) + " |\n|---|" + "---:|" * len(keys))
    for r in rows:
        print(f"| {r['model']} | " + " | ".join(r[k] for k in keys) + " |")


if __name__ == "__main__":
    main()
