"""How ``cea discover`` finds groups: the known classes' centroids and within-class whitening, k-means anchored at
those centroids (new centres by k-means++), the number of groups estimated, and the words that set a group apart;
for a bundle's texts answered unknown, average-linkage groups cut where the known classes' own texts group best
(:func:`calibrated_threshold`, :func:`linkage_groups`). The run around them (encoding, naming the groups, the
protocol, the files) is :mod:`cea.discover.run` and :mod:`cea.discover.unknowns`.
"""

from __future__ import annotations

import numpy as np

from ..defaults import DISCOVER_ESTIMATES as ESTIMATES, DISCOVER_OVER as OVER
from ..errors import CeaError, OptionError

# chosen on the protocol's settings (docs/decisions.md#discover): draws of the new centres; a labelled text's weight
N_INIT = 10
LABELLED_WEIGHT = 1.0
TIE = 0.005  # scores this close to the best count's are as good (estimate_clusters)
WORDS = 8  # distinctive words kept per group


def plus_plus(x: np.ndarray, centres: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` more centres drawn from the rows of ``x`` by k-means++ (Arthur and Vassilvitskii, 2007), the given
    ``centres`` counting as drawn: scikit-learn's ``kmeans_plusplus`` cannot continue from the known centroids."""
    chosen = [c for c in np.asarray(centres, dtype=np.float64).reshape(-1, x.shape[1])]
    nearest = np.full(len(x), np.inf)
    for c in chosen:
        nearest = np.minimum(nearest, ((x - c) ** 2).sum(1))
    for _ in range(k):
        if not chosen or not np.isfinite(nearest).all() or nearest.sum() <= 0:
            pick = int(rng.integers(len(x)))
        else:
            pick = int(rng.choice(len(x), p=nearest / nearest.sum()))
        chosen.append(x[pick].astype(np.float64))
        nearest = np.minimum(nearest, ((x - x[pick]) ** 2).sum(1))
    return np.asarray(chosen[len(chosen) - k :]) if k else np.zeros((0, x.shape[1]))


def known_centroids(x: np.ndarray, labels: list, known: list[str]) -> np.ndarray:
    """Each known class's centroid: the unit-length mean of its labelled texts' embeddings."""
    labels = np.asarray([lab if lab is not None else "" for lab in labels], dtype=object)
    out = np.stack([x[labels == k].mean(0) for k in known]) if known else np.zeros((0, x.shape[1]))
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def within_class_whitening(x: np.ndarray, labels: list) -> np.ndarray | None:
    """Centred embeddings times the inverse square root of the labelled texts' within-class covariance (Ledoit-Wolf
    shrunk: few labelled texts in many dimensions), back on the unit sphere (LDA's whitening, no dimension dropped, so
    new classes keep the directions the known ones do not use); None under two known classes of two labelled texts."""
    from sklearn.covariance import LedoitWolf

    names = np.asarray([lab if lab is not None else "" for lab in labels], dtype=object)
    classes = [x[names == name] for name in sorted(set(names.tolist()) - {""})]
    offsets = [rows - rows.mean(0) for rows in classes if len(rows) >= 2]
    if len(offsets) < 2:
        return None
    values, vectors = np.linalg.eigh(LedoitWolf().fit(np.concatenate(offsets)).covariance_)
    z = (x - x.mean(0)) @ (vectors / np.sqrt(np.maximum(values, 1e-12))) @ vectors.T
    return (z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def anchored_kmeans(
    x: np.ndarray,
    anchors: np.ndarray,
    k: int,
    seed: int = 0,
    n_init: int = N_INIT,
    sample_weight: np.ndarray | None = None,
    over: float = OVER,
):
    """Cluster the rows of ``x`` into ``k`` groups with scikit-learn's ``KMeans``, starting from ``anchors`` (the known
    classes' centroids) plus k-means++ centres (:func:`plus_plus`), the least (weighted) inertia of ``n_init`` draws.
    ``sample_weight``: each row's weight. ``over``: draw ``round(over * k)`` clusters first, keep the anchored and
    the largest new ones (:func:`keep_largest`) and run again from them. Returns ``(cluster of each row, centres)``."""
    from sklearn.cluster import KMeans

    if k < len(anchors):
        raise CeaError(f"{k} clusters cannot hold the {len(anchors)} known classes; ask for at least {len(anchors)}")
    if not float(over) >= 1:
        raise OptionError("over", f"must be at least 1 (1: no clusters drawn beyond k); got {over!r}")
    drawn = min(len(x), max(k + 1, round(over * k))) if over > 1 and k > len(anchors) else k
    best = None
    for draw in range(max(1, n_init)):
        new = plus_plus(x, anchors, drawn - len(anchors), np.random.default_rng([seed, draw]))
        init = np.concatenate([anchors, new]) if drawn > len(anchors) else anchors
        fit = KMeans(n_clusters=drawn, init=init, n_init=1, random_state=seed).fit(x, sample_weight=sample_weight)
        if best is None or fit.inertia_ < best.inertia_:
            best = fit
    if drawn > k:
        init = keep_largest(best.labels_, best.cluster_centers_, len(anchors), k, sample_weight)
        best = KMeans(n_clusters=k, init=init, n_init=1, random_state=seed).fit(x, sample_weight=sample_weight)
    return best.labels_, best.cluster_centers_


def keep_largest(
    assigned: np.ndarray, centres: np.ndarray, n_anchors: int, k: int, sample_weight: np.ndarray | None = None
) -> np.ndarray:
    """The first ``n_anchors`` centres (the known classes') and the ``k - n_anchors`` new ones that hold the most
    (weighted) rows: a class k-means split between two centres comes out under several, and the smallest, the
    splinters, are the ones to drop (as DeepAligned, Zhang et al. 2021, does; scikit-learn's ``KMeans`` cannot)."""
    sizes = np.bincount(assigned, weights=sample_weight, minlength=len(centres))
    new = np.arange(n_anchors, len(centres))
    kept = new[np.argsort(-sizes[new], kind="stable")[: k - n_anchors]]
    return np.concatenate([centres[:n_anchors], centres[kept]])


def estimate_clusters(
    x: np.ndarray,
    labels: list,
    known: list[str],
    low: int | None = None,
    high: int | None = None,
    method: str = "labelled",
    seed: int = 0,
    say=None,
) -> dict:
    """Estimate how many clusters the texts form (known and new classes together): plain k-means at candidate counts
    between ``low`` and ``high`` (a geometric grid, then a finer one around the best), each scored by ``method``:

    * ``labelled`` (the default where texts are labelled): the adjusted Rand index of the labelled texts' clusters
      against their classes, highest where the clusters are as fine as the known classes;
    * ``silhouette``: the mean silhouette (cosine, on a fixed sample of at most 4,000 texts), which needs no labels.

    Where several counts score within ``TIE`` of the best, the labelled texts cannot tell them apart, and
    ``labelled`` takes the tied count of the best silhouette (docs/discover.md). ``sizes`` does too, but not above
    the count the known classes' sizes imply at the finest tied count (the clusters holding labelled texts plus the
    other texts over the known clusters' mean size: the known classes are a random draw, sized as the new ones).

    Returns ``{"clusters": chosen count, "method": ..., "scores": {count: score}, "tied": [counts]}`` (where several
    counts tied, the silhouette of each in ``"tie_scores"`` and the count its clusters imply in ``"tie_implied"``)."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score, silhouette_score

    is_labelled = np.array([lab is not None for lab in labels])
    say = say or (lambda line: None)
    if method in ("labelled", "sizes") and len({lab for lab in labels if lab is not None}) < 2:
        method = "silhouette"  # fewer than two known classes cannot tell merged from split
    if method not in ESTIMATES:
        raise OptionError("estimate", f"must be one of {', '.join(ESTIMATES)}, got {method!r}")
    n = len(x)
    low = max(2, len(known) + 1 if low is None else low)
    high = min(n - 1, max(low + 1, high if high is not None else max(4 * len(known), int(2 * np.sqrt(n)))))
    gold = np.asarray([lab for lab in labels if lab is not None], dtype=object)
    sample = np.random.default_rng(seed).choice(n, min(n, 4000), replace=False)
    scores: dict[int, float] = {}
    fits: dict[int, np.ndarray] = {}  # each count's clusters, for the choice among tied counts
    by_labels = method != "silhouette"

    def silhouette(k: int) -> float:
        return float(silhouette_score(x[sample], fits[k][sample], metric="cosine"))

    def implied(k: int) -> float:  # known clusters + the other clusters' texts / the known clusters' mean size
        sizes = np.bincount(fits[k], minlength=k)
        holding = np.unique(fits[k][is_labelled])
        return len(holding) + (n - sizes[holding].sum()) / sizes[holding].mean()

    def score(k: int) -> float:
        if k not in scores:
            fits[k] = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(x).labels_
            scores[k] = float(adjusted_rand_score(gold, fits[k][is_labelled])) if by_labels else silhouette(k)
            say(f"  {k} clusters: {'labelled' if by_labels else method} score {scores[k]:.4f}")
        return scores[k]

    def plateau() -> list[int]:  # the counts that score as well as the best (ties: the labelled texts often
        top = max(scores.values())  # come out perfectly clustered over a range of counts)
        return [k for k in sorted(scores) if scores[k] >= top - TIE]

    for k in sorted({round(v) for v in np.geomspace(low, high, 10)}):
        score(k)
    for _ in range(2):  # refine between the scored counts on either side of the best ones
        ks, best = sorted(scores), plateau()
        left = max([k for k in ks if k < best[0]], default=best[0])
        right = min([k for k in ks if k > best[-1]], default=best[-1])
        for k in sorted({round(v) for v in np.linspace(left, right, 8)}):
            score(k)
    tied = plateau()
    found = {
        "method": method,
        "low": low,
        "high": high,
        "tied": [int(k) for k in tied],
        "scores": {int(k): round(v, 5) for k, v in sorted(scores.items())},
    }
    chosen = round((tied[0] + tied[-1]) / 2)  # the silhouette's own ties: the middle of them
    if by_labels and len(tied) > 1:  # the labelled texts cannot tell these apart
        found["tie_scores"] = {int(k): round(silhouette(k), 5) for k in tied}
        found["tie_implied"] = {int(k): round(implied(k), 1) for k in tied}
        upto = f" up to {implied(tied[-1]):.0f} (the known classes' sizes)" if method == "sizes" else ""
        say(f"  {len(tied)} counts tie ({tied[0]}-{tied[-1]}); the silhouette chooses among them{upto}")
        bound = found["tie_implied"][tied[-1]] if method == "sizes" else np.inf
        chosen = max([k for k in tied if k <= bound] or tied[:1], key=lambda k: (found["tie_scores"][k], -k))
    return {"clusters": int(chosen), **found}


def sample_per_class(labels, per: int, seed: int = 0) -> np.ndarray:
    """Rows of at most ``per`` texts of each label (drawn by ``seed``), in label order."""
    labels = np.asarray(labels, dtype=object)
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:per] for c in sorted(set(labels.tolist()))])


def calibrated_threshold(x: np.ndarray, labels, steps: int = 300) -> tuple[float, float]:
    """The cosine distance at which average-linkage clustering of the known classes' texts ``x`` best matches their
    ``labels``: ``(threshold, adjusted Rand index there)``; cutting other texts' tree there groups them as finely as the
    known classes are. SciPy builds the tree and scikit-learn scores the cuts; neither chooses a cut from labelled texts
    of other groups, hence this function. ``steps``: the cuts tried, spread over the tree's heights."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from sklearn.metrics import adjusted_rand_score

    labels = np.asarray(labels, dtype=object)
    if len(set(labels.tolist())) < 2 or len(x) < 3:
        raise CeaError("a threshold needs texts of at least two known classes; add examples of a second class")
    tree = linkage(np.asarray(x, dtype=np.float64), method="average", metric="cosine")
    heights = np.unique(tree[:, 2])
    cuts = heights[np.unique(np.linspace(0, len(heights) - 1, steps).astype(int))]
    score, threshold = max((adjusted_rand_score(labels, fcluster(tree, t, "distance")), float(t)) for t in cuts)
    return threshold, float(score)


def linkage_groups(x: np.ndarray, threshold: float | None = None, n: int | None = None) -> np.ndarray:
    """Each unit row's average-linkage group (cosine; from 0), cut at ``threshold`` (a distance) or into ``n``."""
    from scipy.cluster.hierarchy import fcluster, linkage

    if (threshold is None) == (n is None):
        raise ValueError("give threshold or n")
    if len(x) < 2:
        return np.zeros(len(x), dtype=int)
    tree = linkage(np.asarray(x, dtype=np.float64), method="average", metric="cosine")
    cut = fcluster(tree, threshold, "distance") if n is None else fcluster(tree, n, "maxclust")
    return np.unique(cut, return_inverse=True)[1]


def distinctive_words(texts_by_group: list[list[str]], top: int = WORDS) -> list[list[str]]:
    """The words that set each group apart, by class-based TF-IDF (c-TF-IDF, BERTopic, Grootendorst 2022): a word weighs
    its frequency in the group times ``log(1 + A / f)`` (``A``: the average words per group, ``f``: the word's frequency
    over all groups). scikit-learn counts the words; its ``TfidfTransformer`` weighs by document frequency, which over
    a few large documents (groups) cannot tell a group's words from the others', hence the weighting here."""
    from sklearn.feature_extraction.text import CountVectorizer

    docs = [" ".join(texts) for texts in texts_by_group]
    try:
        vectorizer = CountVectorizer(stop_words="english", token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z]+\b")
        counts = vectorizer.fit_transform(docs).toarray().astype(np.float64)
    except ValueError:  # no word at all (empty vocabulary)
        return [[] for _ in docs]
    words = vectorizer.get_feature_names_out()
    per_group = counts.sum(1, keepdims=True)
    weight = counts / np.maximum(per_group, 1) * np.log1p(per_group.mean() / np.maximum(counts.sum(0), 1))
    return [[str(words[j]) for j in np.argsort(-row, kind="stable")[:top] if row[j] > 0] for row in weight]
