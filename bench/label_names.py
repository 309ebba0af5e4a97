"""Issue 16, two cheap levers on the frozen encoder's linear head: label names as extra training examples
(banking77's ``lost_or_stolen_card`` -> "lost or stolen card"), and a mixture of the head's and kNN's
class probabilities (weight on dev). banking77, 8 examples per class (samples 0-2) and the full train + dev.

C (1, 10, 100) and the mixture's weight are chosen on dev with train (or the sample) as training data,
then the head is refit on all the references; the few-shot heads train on the 616-text sample only. Embeddings come from ``bench/head_refit.py``'s cache (train, dev, test of banking77, in order).

    OMP_NUM_THREADS=1 python bench/label_names.py --cache b77-frozen.npz
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from cea.data import load_dataset
from cea.data.dataset import few_shot
from cea.encoders import load_encoder
from cea.evaluation.classification import encode
from cea.knn import KNNClassifier, fit_head
from cea.knn.search import normalize

CS = (1.0, 10.0, 100.0)


def accuracy(pred, gold) -> float:
    return round(100 * float(np.mean(pred == gold)), 2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", type=Path, required=True)
    args = parser.parse_args()
    data = np.load(args.cache, allow_pickle=False)
    x, y = data["x"], data["y"]
    ds = load_dataset("banking77")
    n = [len(ds[s]) for s in ("train", "dev", "test")]
    dev, test = slice(n[0], n[0] + n[1]), slice(n[0] + n[1], sum(n))
    row = {t: i for i, t in enumerate(ds["train"]["text"])}
    names = np.unique(y)
    name_x = normalize(encode(load_encoder("all-MiniLM-L6-v2"), [s.replace("_", " ") for s in names]))

    def head_on_dev(xs, ys, sel):
        """C chosen on dev with the rows ``sel`` (train only) as training data, then refit on all of ``xs``."""
        C = max(CS, key=lambda c: accuracy(fit_head(xs[sel], ys[sel], c).predict(x[dev]), y[dev]))
        return fit_head(xs, ys, C)

    table = {}
    sets = {f"8 per class, sample {s}": [row[t] for t in few_shot(ds["train"], 8, s)["text"]] for s in (0, 1, 2)}
    sets["full (train + dev)"] = list(range(n[0] + n[1]))
    for name, idx in sets.items():
        xs, ys = x[idx], y[idx]
        sel = np.asarray(idx) < n[0]  # train rows: what C and the mixture are chosen with
        plain = head_on_dev(xs, ys, sel)
        named = head_on_dev(np.vstack([xs, name_x]), np.concatenate([ys, names]), np.concatenate([sel, [True] * len(names)]))
        head, knn = fit_head(xs[sel], ys[sel], plain.C), KNNClassifier(5, weights="distance").fit(xs[sel], ys[sel])
        mix = {a: head.predict_proba(x[dev]) * a + knn.predict_proba(x[dev]) * (1 - a) for a in (0, .25, .5, .75, 1)}
        a = max(mix, key=lambda w: accuracy(head.classes[mix[w].argmax(1)], y[dev]))
        knn = KNNClassifier(5, weights="distance").fit(xs, ys)
        mixed = plain.classes[(a * plain.predict_proba(x[test]) + (1 - a) * knn.predict_proba(x[test])).argmax(1)]
        table[name] = [accuracy(plain.predict(x[test]), y[test]), accuracy(named.predict(x[test]), y[test]),
                       accuracy(mixed, y[test]), f"C={plain.C:g} / C={named.C:g} / a={a}"]
        print(name, table[name], flush=True)
    print("| references | linear head | + label names | head and kNN-5 mixed | chosen on dev |\n|---|---:|---:|---:|---|")
    for name, r in table.items():
        print(f"| {name} | " + " | ".join(str(v) for v in r) + " |")


if __name__ == "__main__":
    main()
