"""Issue 60: `cea check` against cleanlab on flipped labels.

    OMP_NUM_THREADS=1 python bench/label_issues.py banking77 [--noise 0.05,0.1,0.2] [--seeds 0,1,2] [--shares 0,0.3]

Flips a share of train's labels (drawn with the seed), uniformly to another class or towards the class each class is
confused with most (its centroid nearest in the frozen encoder's space), encodes train once with all-MiniLM-L6-v2
(cached in bench/results/label-issues/), and flags texts with `cea check`'s :func:`cea.labelling.check.check_labels`
(the bundle's classifier out of fold, its probabilities mixed with the neighbours' vote by each of ``--shares``) and
with cleanlab's ``find_label_issues`` on out-of-fold probabilities of scikit-learn's ``LogisticRegression`` on the
same embeddings (the baseline the issue names). Records precision, recall and F1 of the flags against the flips,
mean over the seeds, per (set, noise, kind): ``docs/records/label_issues.jsonl``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import R, record  # noqa: E402


def flip(labels: np.ndarray, share: float, kind: str, centroids: dict, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(noisy labels, flipped rows)``: ``share`` of the rows get another class, at random or the nearest one."""
    rng = np.random.default_rng(seed)
    classes = np.array(sorted(centroids))
    rows = rng.choice(len(labels), int(round(share * len(labels))), replace=False)
    noisy = labels.copy()
    if kind == "uniform":
        for i in rows:
            noisy[i] = rng.choice(classes[classes != labels[i]])
    else:
        unit = np.stack([centroids[c] for c in classes])
        unit /= np.linalg.norm(unit, axis=1, keepdims=True)
        sims = unit @ unit.T
        np.fill_diagonal(sims, -np.inf)
        nearest = dict(zip(classes, classes[sims.argmax(1)]))
        noisy[rows] = [nearest[labels[i]] for i in rows]
    return noisy, rows


def cleanlab_flags(embeddings: np.ndarray, labels: np.ndarray, seed: int) -> np.ndarray:
    """cleanlab's own recipe: out-of-fold probabilities of a logistic regression, then ``find_label_issues``."""
    from cleanlab.filter import find_label_issues
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    classes, given = np.unique(labels, return_inverse=True)
    probs = cross_val_predict(
        LogisticRegression(max_iter=1000),
        embeddings,
        given,
        method="predict_proba",
        cv=StratifiedKFold(5, shuffle=True, random_state=seed),
    )
    return find_label_issues(given, probs, filter_by="prune_by_noise_rate")


def scores(flagged: np.ndarray, flips: np.ndarray) -> tuple[float, float, float]:
    truth = np.zeros(len(flagged), bool)
    truth[flips] = True
    hit = (flagged & truth).sum()
    precision, recall = hit / max(flagged.sum(), 1), hit / max(truth.sum(), 1)
    return precision, recall, 2 * precision * recall / max(precision + recall, 1e-9)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--noise", default="0.05,0.1,0.2")
    parser.add_argument("--kinds", default="uniform,confusable")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--shares", default="0.5", help="cea check's --knn-share values")
    args = parser.parse_args()
    from cea.bundle.examples import encode
    from cea.data import load_dataset
    from cea.encoders import load_encoder
    from cea.labelling.check import check_labels

    ds = load_dataset(args.dataset)
    name = Path(args.dataset.rstrip("/")).name
    texts, labels = list(ds["train"]["text"]), ds["train"]["label"].astype(str).to_numpy()
    cache = R / "label-issues" / f"{name}-train.npy"
    if cache.exists():
        embeddings = np.load(cache)
    else:
        embeddings = encode(load_encoder("all-MiniLM-L6-v2", device="cpu"), texts)
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, embeddings)
    centroids = {c: embeddings[labels == c].mean(0) for c in np.unique(labels)}
    seeds = [int(s) for s in args.seeds.split(",")]
    for kind in args.kinds.split(","):
        for share in [float(x) for x in args.noise.split(",")]:
            found = {"cleanlab": []} | {f"cea {s}": [] for s in args.shares.split(",")}
            for seed in seeds:
                noisy, flips = flip(labels, share, kind, centroids, seed)
                found["cleanlab"].append(scores(cleanlab_flags(embeddings, noisy, seed), flips))
                for s in args.shares.split(","):
                    rows = check_labels(texts, noisy, embeddings, knn_share=float(s), seed=seed).issues["row"]
                    flagged = np.zeros(len(noisy), bool)
                    flagged[rows.to_numpy()] = True
                    found[f"cea {s}"].append(scores(flagged, flips))
                print(kind, share, seed, {k: np.round(v[-1], 3).tolist() for k, v in found.items()}, flush=True)
            base = float(np.mean([f for _, _, f in found["cleanlab"]]))
            for method, got in found.items():
                if method == "cleanlab":
                    continue
                p, r, f = (float(np.mean(x)) for x in zip(*got))
                record(
                    f"label issues found, {name}, {share:.0%} flipped {kind}, knn share {method[4:]}",
                    round(100 * f, 1),
                    baseline=round(100 * base, 1),
                    baseline_is="cleanlab on out-of-fold logistic regression",
                    unit="F1 x 100",
                    section="label-issues",
                    note=f"precision {100 * p:.1f}, recall {100 * r:.1f}; seeds {args.seeds}",
                )


if __name__ == "__main__":
    main()
