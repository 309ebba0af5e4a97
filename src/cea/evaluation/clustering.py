"""How well clusters find classes: the new intent discovery figures (bolt-lab / TEXTOIR), in percent as published:

* accuracy: the share of texts whose cluster, under the best one-to-one matching of clusters to classes (the
  Hungarian algorithm by scipy; only this matching is written here), is their class (unmatched clusters': wrong);
* NMI: normalized mutual information (scikit-learn, arithmetic mean of the entropies, as TEXTOIR reports it);
* ARI: the adjusted Rand index (scikit-learn).
"""

from __future__ import annotations

import numpy as np

from ..errors import CeaError


def _check(gold, clusters) -> tuple[np.ndarray, np.ndarray]:
    gold, clusters = np.asarray(gold), np.asarray(clusters)
    if gold.ndim != 1 or gold.shape != clusters.shape or len(gold) == 0:
        raise CeaError(
            f"gold labels and clusters must be two non-empty lists of one length; got {gold.shape} and {clusters.shape}"
        )
    return gold, clusters


def matching(gold, clusters) -> dict:
    """The best one-to-one matching of clusters to gold classes: ``{cluster: class}``."""
    from scipy.optimize import linear_sum_assignment
    from sklearn.metrics.cluster import contingency_matrix

    gold, clusters = _check(gold, clusters)
    classes, groups = np.unique(gold), np.unique(clusters)
    table = contingency_matrix(clusters, gold)  # rows: clusters, columns: classes, both sorted
    rows, cols = linear_sum_assignment(table, maximize=True)

    def plain(v):
        return v.item() if isinstance(v, np.generic) else v

    return {plain(groups[r]): plain(classes[c]) for r, c in zip(rows, cols)}


def clustering_scores(gold, clusters, known=None) -> dict:
    """``accuracy``, ``nmi`` and ``ari`` in percent; with ``known`` (the known classes' names), also the accuracy
    on the texts of known and of new classes under the same matching (``known_accuracy``, ``new_accuracy``)."""
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    gold, clusters = _check(gold, clusters)
    mapped = matching(gold, clusters)
    right = np.array([c in mapped and mapped[c] == g for g, c in zip(gold.tolist(), clusters.tolist())])
    out = {
        "accuracy": 100.0 * right.mean(),
        "nmi": 100.0 * normalized_mutual_info_score(gold, clusters),
        "ari": 100.0 * adjusted_rand_score(gold, clusters),
    }
    if known is not None:
        is_known = np.isin(gold, list(known))
        for name, part in (("known_accuracy", is_known), ("new_accuracy", ~is_known)):
            out[name] = 100.0 * right[part].mean() if part.any() else None
    return {k: (round(float(v), 4) if v is not None else None) for k, v in out.items()}
