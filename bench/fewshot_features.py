"""Issue 16, 8 examples per label: what the frozen encoder's features and unlabelled texts give the linear head.

The bundle's head (logistic regression, C = 10) on the frozen all-MiniLM-L6-v2, with the label names among the
examples as `cea train`'s default uses them, samples 0-2 drawn as ``cea train --shots 8 --shots-seed S`` draws them,
scored on test. Rows:

- features: mean pooling of other layers concatenated with the last (each part on the unit sphere), the [CLS]
  vector beside the mean, standardised features (scikit-learn's StandardScaler, C 0.1 and 1);
- self-training: the rest of the train split as unlabelled text, labelled by the head, the ``per_round`` most
  confident texts of each label added per round and the head refitted (scikit-learn's SelfTrainingClassifier
  takes a global threshold or k best overall, not k best per label, which keeps the rarer labels in).

    OMP_NUM_THREADS=2 python bench/fewshot_features.py banking77
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from cea.data import load_dataset
from cea.data.dataset import few_shot
from cea.data.label_names import name_examples
from cea.encoders import load_encoder
from cea.encoders.embeddings import embed
from cea.knn.search import normalize


def features(emb: dict, keys) -> np.ndarray:
    return np.hstack([normalize(emb[k]) for k in keys])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset")
    parser.add_argument("--shots", type=int, default=8)
    args = parser.parse_args()
    ds = load_dataset(args.dataset)
    model = load_encoder("all-MiniLM-L6-v2")
    texts = list(ds["train"]["text"])
    names = name_examples(ds.labels, "auto")
    emb = {s: embed(model, t, poolings=("mean", "cls"), progress=False)
           for s, t in (("train", texts), ("test", list(ds["test"]["text"])), ("names", list(names["text"])))}
    y = {"train": ds["train"]["label"].to_numpy(), "test": ds["test"]["label"].to_numpy(),
         "names": names["label"].to_numpy()}
    where = {t: i for i, t in enumerate(texts)}
    samples = [np.array([where[t] for t in few_shot(ds["train"], args.shots, s)["text"]]) for s in (0, 1, 2)]

    def head(x, labels, C=10.0):
        return LogisticRegression(C=C, max_iter=3000).fit(x, labels)

    def score(clf, x) -> float:
        return round(100 * float(np.mean(clf.predict(x) == y["test"])), 2)

    def row(what, per_sample):
        print(f"| {what} | {' / '.join(f'{a:.2f}' for a in per_sample)} | {np.mean(per_sample):.2f} |", flush=True)

    print("| features or rule | samples 0 / 1 / 2 | mean |\n|---|---|---:|")
    last = [(6, "mean")]
    for what, keys, C, scale in [("last layer, mean (the bundle's head)", last, 10, False),
                                 ("+ layer 5", last + [(5, "mean")], 10, False),
                                 ("+ layer 4", last + [(4, "mean")], 10, False),
                                 ("layers 3-6", [(k, "mean") for k in (3, 4, 5, 6)], 10, False),
                                 ("layers 0-6", [(k, "mean") for k in range(7)], 10, False),
                                 ("+ [CLS] of the last layer", last + [(6, "cls")], 10, False),
                                 ("standardised, C 0.1", last, 0.1, True),
                                 ("standardised, C 1", last, 1.0, True)]:
        accs = []
        for idx in samples:
            x = np.vstack([features(emb["train"], keys)[idx], features(emb["names"], keys)])
            t = features(emb["test"], keys)
            if scale:
                scaler = StandardScaler().fit(x)
                x, t = scaler.transform(x), scaler.transform(t)
            accs.append(score(head(x, np.concatenate([y["train"][idx], y["names"]]), C), t))
        row(what, accs)

    x_all, x_test = normalize(emb["train"][(6, "mean")]), normalize(emb["test"][(6, "mean")])
    x_names = normalize(emb["names"][(6, "mean")])
    for per_round, rounds in [(8, 1), (16, 1), (32, 1), (8, 3), (8, 6)]:
        accs, right = [], []
        for idx in samples:
            pool = np.setdiff1d(np.arange(len(texts)), idx)
            x, labels = np.vstack([x_all[idx], x_names]), np.concatenate([y["train"][idx], y["names"]])
            clf = head(x, labels)
            given = np.full(len(pool), -1)  # the index of the label a pool text was given, -1: not taken
            for _ in range(rounds):
                proba = clf.predict_proba(x_all[pool])
                guess, confidence = proba.argmax(1), proba.max(1)
                confidence[given >= 0] = -1
                for c in range(len(clf.classes_)):
                    candidates = np.flatnonzero((guess == c) & (confidence >= 0))
                    given[candidates[np.argsort(-confidence[candidates])][:per_round]] = c
                taken = np.flatnonzero(given >= 0)
                clf = head(np.vstack([x, x_all[pool[taken]]]), np.concatenate([labels, clf.classes_[given[taken]]]))
            accs.append(score(clf, x_test))
            right.append(100 * np.mean(clf.classes_[given[taken]] == y["train"][pool[taken]]))
        row(f"self-training, {per_round} a label x {rounds} round(s) (pseudo-labels right: {np.mean(right):.1f}%)",
            accs)


if __name__ == "__main__":
    main()
