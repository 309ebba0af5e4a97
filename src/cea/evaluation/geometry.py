"""What the embedding space looks like per class (the "classification vs metric learning" study's measures):

* cohesion of a label: the mean cosine between two of its embeddings; the average is over labels of two or more;
* separation: the cosine between class centroids, mean and maximum over pairs, and each label's nearest centroid;
* imbalance indicators for a chosen set of small labels: their cohesion, the mean cosine of their centroids to the
  large labels' centroids, and the mean cosine between their centroids (lower: told apart).

Pair means are computed from sums: over ordered pairs of unit vectors the cosines sum to ``|sum of vectors|^2 - n``.
"""

from __future__ import annotations

import numpy as np

from ..errors import CeaError


def _unit(embeddings) -> np.ndarray:
    x = np.asarray(embeddings, dtype=np.float64)
    if x.ndim != 2 or len(x) == 0:
        raise CeaError(f"expected a non-empty 2-d array of embeddings, got shape {x.shape}")
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _groups(labels) -> dict:
    labels = np.asarray(labels)
    return {label: np.flatnonzero(labels == label) for label in sorted(set(labels.tolist()), key=str)}


def cohesion(embeddings, labels) -> dict:
    """``{"per_label": {label: mean pair cosine}, "mean": average over labels}`` (labels of 1 skipped)."""
    x = _unit(embeddings)
    sums = {label: (x[rows].sum(0), len(rows)) for label, rows in _groups(labels).items() if len(rows) >= 2}
    per_label = {label: float((total @ total - n) / (n * (n - 1))) for label, (total, n) in sums.items()}
    if not per_label:
        raise CeaError("cohesion needs a label with at least two examples")
    return {"per_label": per_label, "mean": float(np.mean(list(per_label.values())))}


def centroids(embeddings, labels) -> tuple[list, np.ndarray]:
    """Label names and their centroids (means of the unit-length embeddings)."""
    x = _unit(embeddings)
    groups = _groups(labels)
    return list(groups), np.stack([x[rows].mean(0) for rows in groups.values()])


def separation(embeddings, labels) -> dict:
    """Cosine between class centroids: mean and max over label pairs, nearest other label per label."""
    names, c = centroids(embeddings, labels)
    if len(names) < 2:
        raise CeaError("separation needs at least two labels")
    sims = _unit(c) @ _unit(c).T
    off = ~np.eye(len(names), dtype=bool)
    masked = np.where(off, sims, -np.inf)
    nearest = {names[i]: {"label": names[j], "cosine": float(masked[i, j])} for i, j in enumerate(masked.argmax(1))}
    return {"mean": float(sims[off].mean()), "max": float(sims[off].max()), "nearest": nearest}


def imbalance_indicators(embeddings, labels, small) -> dict:
    """Seed 003's three indicators for the labels in ``small`` against all the others."""
    names, c = centroids(embeddings, labels)
    small = list(dict.fromkeys(small))
    if missing := [s for s in small if s not in names]:
        raise CeaError(
            f"small label(s) {', '.join(map(str, missing))} not in the data; "
            f"labels are e.g. {', '.join(map(str, names[:5]))}"
        )
    is_small = np.array([n in small for n in names])
    if is_small.all():
        raise CeaError("every label is marked small; leave some large ones to compare with")
    coh = cohesion(embeddings, labels)["per_label"]
    small_coh = [coh[s] for s in small if s in coh]
    sims = _unit(c) @ _unit(c).T
    block = sims[np.ix_(is_small, is_small)]
    return {
        "small_labels": small,
        "small_cohesion": float(np.mean(small_coh)) if small_coh else float("nan"),
        "small_to_large": float(sims[np.ix_(is_small, ~is_small)].mean()),
        "small_to_small": float(block[~np.eye(len(block), dtype=bool)].mean()) if len(block) >= 2 else float("nan"),
    }


def smallest_labels(labels, n: int) -> list:
    """The ``n`` labels with the fewest examples (ties by name)."""
    counts = {label: len(rows) for label, rows in _groups(labels).items()}
    return sorted(counts, key=lambda label: (counts[label], str(label)))[:n]


def analyze(embeddings, labels, small=None) -> dict:
    """Cohesion, separation and (with ``small``) the imbalance indicators, in one dict."""
    out = {
        "n": int(len(labels)),
        "labels": int(len(set(np.asarray(labels).tolist()))),
        "cohesion": cohesion(embeddings, labels),
        "separation": separation(embeddings, labels),
    }
    if small:
        out["imbalance"] = imbalance_indicators(embeddings, labels, small)
    return out
