"""The loop in the service: group the texts a bundle answered ``unknown``, and add a group as a class.

A service started with ``cea serve --keep-unknowns N`` keeps the latest texts it turned away in the bundle's store.
:func:`group_unknowns` encodes them with the bundle's encoder and groups them by average linkage, cut at the cosine
distance at which a sample of the bundle's examples (:data:`PER_CLASS` per label) group most like their labels
(:func:`cea.discover.groups.calibrated_threshold`). A group is ``known`` where its texts lie within that distance of
a known class's examples, else ``new``; the estimate counts new groups of at least :data:`NEW_MIN` texts and
:data:`NEW_SHARE` of the kept ones. The groups go beside the bundle (``unknown-groups.json`` and a page with a map);
:func:`accept_group` adds a group's texts as examples of a label, at once, and forgets them. Why not
:func:`cea.discover.discover`'s anchored k-means: among thousands of examples it put the few kept texts of hidden
classes inside known ones, where the calibrated cut found them apart (docs/discover.md, the loop in the service).

Usage
    >>> found = group_unknowns("banking-bundle")                       # doctest: +SKIP
    >>> accept_group("banking-bundle", group=found["groups"][0]["id"], label="crypto")  # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

import numpy as np

from ..bundle import Bundle
from ..bundle.examples import encode
from ..errors import CeaError, OptionError
from ..paths import read_json, write_json
from ..reports.html import groups_page
from ..reports.plots import embedding_map
from . import AUTO, CENTRAL
from .groups import calibrated_threshold, distinctive_words, linkage_groups, sample_per_class

GROUPS, PAGE = "unknown-groups.json", "unknown-groups.html"
FORMAT = "cea.discover.unknowns/1"
PER_CLASS = 30  # examples of each label that calibrate the cut
NEW_MIN, NEW_SHARE = 5, 0.02  # a new group counts in the estimate from this many texts and this share of the kept


def group_unknowns(
    bundle_dir: str | Path, clusters: int | str = AUTO, seed: int = 0, page: bool = True, say=None
) -> dict:
    """Group the texts ``bundle_dir``'s store keeps as answered unknown, cut at the calibrated distance (``"auto"``) or
    into ``clusters`` groups; returns what it writes to ``unknown-groups.json``, new groups first, largest first."""
    say = say or (lambda line: None)
    bundle_dir = Path(bundle_dir)
    bundle = Bundle.load(bundle_dir, verify=False)
    try:
        if bundle.multi_label:
            raise CeaError(
                "cea discover groups the unknowns of a bundle with one label per example; this one holds label lists"
            )
        kept = bundle.store.kept()
        if len(kept) < 2:
            raise CeaError(
                f"{bundle_dir} keeps {len(kept)} texts answered unknown; serve it with cea serve "
                "--keep-unknowns N and group them once it has turned some away"
            )
        if clusters != AUTO and (
            isinstance(clusters, bool) or not isinstance(clusters, (int, np.integer)) or not 1 <= clusters <= len(kept)
        ):
            raise OptionError(
                "clusters", f"must be auto or a whole number from 1 to the {len(kept)} kept texts; got {clusters!r}"
            )
        texts = [u["text"] for u in kept]
        vectors = encode(bundle.encoder, texts, overhead=bundle.pass_overhead)
        labels = np.asarray(bundle.labels, dtype=object)
        sample = sample_per_class(labels, PER_CLASS, seed)
        known_x, known_labels = np.asarray(bundle.embeddings[sample], dtype=np.float32), labels[sample]
    finally:
        bundle.close()
    threshold, ari = calibrated_threshold(known_x, known_labels)
    say(
        f"{len(sample)} examples of {len(set(known_labels.tolist()))} labels group best cut at cosine distance "
        f"{threshold:.3f} (adjusted Rand index {ari:.3f})"
    )
    found = linkage_groups(vectors, threshold=threshold) if clusters == AUTO else linkage_groups(vectors, n=clusters)
    groups = _describe(texts, vectors, found, known_x, known_labels, threshold)
    for group in groups:
        group["members"] = [kept[i]["id"] for i in group.pop("rows")]
    least = max(NEW_MIN, NEW_SHARE * len(kept))
    estimate = {
        "method": "threshold",
        "threshold": round(threshold, 4),
        "known_ari": round(ari, 4),
        "new_groups": sum(g["kind"] == "new" and g["size"] >= least for g in groups),
    }
    say(f"{len(kept)} texts in {len(groups)} groups; {estimate['new_groups']} new ones of at least {least:g} texts")
    payload = {
        "format": FORMAT,
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "n_unknowns": len(kept),
        "n_clusters": len(groups),
        "estimate": estimate,
        "groups": groups,
    }
    write_json(bundle_dir / GROUPS, payload)
    if page:
        member_group = {m: g["id"] for g in groups for m in g["members"]}
        _page(bundle_dir, payload, vectors, np.array([member_group[u["id"]] for u in kept]))
    return payload


def _describe(
    texts: list[str], x: np.ndarray, found: np.ndarray, known_x: np.ndarray, known_labels: np.ndarray, threshold: float
) -> list[dict]:
    """One dict per group of ``found``: new or known (its texts' mean cosine distance to a known class's examples within
    ``threshold``), size, central texts, words, nearest known class and its ``rows``; new first, largest first."""
    classes = sorted(set(known_labels.tolist()))
    onehot = (known_labels[:, None] == np.asarray(classes, dtype=object)[None, :]).astype(np.float64)
    onehot /= onehot.sum(0, keepdims=True)
    ids = np.unique(found)
    words = distinctive_words([[texts[i] for i in np.flatnonzero(found == c)] for c in ids])
    groups = []
    for c in ids:
        rows = np.flatnonzero(found == c)
        centre = x[rows].mean(0)
        centre /= max(float(np.linalg.norm(centre)), 1e-12)
        central = rows[np.argsort(-(x[rows] @ centre), kind="stable")[:CENTRAL]]
        distance = ((1.0 - x[rows] @ known_x.T) @ onehot).mean(0)  # mean cosine distance to each class's examples
        j = int(distance.argmin())
        own = classes[j] if distance[j] <= threshold else None
        groups.append(
            {
                "kind": "known" if own is not None else "new",
                "known_class": own,
                "size": len(rows),
                "labelled": 0,
                "central_texts": [texts[i] for i in central],
                "words": words[c],
                "nearest_known": {"label": classes[j], "similarity": round(1.0 - float(distance[j]), 4)},
                "rows": rows.tolist(),
            }
        )
    groups.sort(key=lambda g: (g["kind"] != "new", -g["size"], g["rows"][0]))
    return [{"id": i, **g} for i, g in enumerate(groups)]


def _page(bundle_dir: Path, payload: dict, vectors: np.ndarray, clusters: np.ndarray) -> Path:
    """``BUNDLE/unknown-groups.html``: the kept texts on a map (t-SNE), coloured by group, and the groups' table."""
    name = {g["id"]: f"{g['id']}: {g['known_class'] or 'new'}" for g in payload["groups"]}
    note = (
        f"{payload['n_unknowns']} texts answered unknown, {len(payload['groups'])} groups "
        f"({sum(g['kind'] == 'new' for g in payload['groups'])} new); accept one with "
        f"cea discover {bundle_dir} --accept GROUP --label NAME"
    )
    with tempfile.TemporaryDirectory() as tmp:
        image = (
            embedding_map(
                vectors,
                np.array([name[c] for c in clusters]),
                Path(tmp) / "map.png",
                perplexity=min(30.0, (len(vectors) - 1) / 3),
                title="texts answered unknown",
            )
            if len(vectors) >= 5
            else None
        )  # fewer points make no map
        return groups_page(
            bundle_dir / PAGE, f"Texts {bundle_dir.name} answered unknown", payload["groups"], image, note
        )


def accept_group(bundle_dir: str | Path, group: int | list[int], label: str, say=None) -> list[int]:
    """Add the kept texts of ``group`` (an id of the last :func:`group_unknowns`, or several) to the bundle as examples
    of ``label`` and forget them; returns the new examples' ids. ``say`` is told of each group marked as another
    known class, which may mix that class's texts in: a person should read them."""
    bundle_dir = Path(bundle_dir)
    if not (bundle_dir / GROUPS).exists():
        raise CeaError(f"{bundle_dir} has no grouped unknowns; run cea discover {bundle_dir} first")
    payload = read_json(bundle_dir / GROUPS, (FORMAT,), f"run cea discover {bundle_dir} again")
    wanted = [int(g) for g in (group if isinstance(group, (list, tuple)) else [group])]
    found = {g["id"]: g for g in payload["groups"]}
    missing = [str(g) for g in wanted if g not in found]
    if missing or not wanted:
        raise CeaError(
            f"no group {', '.join(missing) or '(none given)'} among the last grouping's "
            f"{', '.join(str(g) for g in found)}; see {bundle_dir / PAGE}"
        )
    chosen = [found[g] for g in dict.fromkeys(wanted)]
    if not str(label).strip():
        raise CeaError("the label is empty; name the class the group's texts are")
    bundle = Bundle.load(bundle_dir, verify=False)
    try:
        kept = {u["id"]: u["text"] for u in bundle.store.kept()}
        members = [i for g in chosen for i in g["members"] if i in kept]
        if not members:
            names = ", ".join(str(g["id"]) for g in chosen)
            raise CeaError(f"group {names}'s texts were accepted or dropped since; run cea discover {bundle_dir} again")
        ids = bundle.add([kept[i] for i in members], [label] * len(members))
        bundle.store.forget(members)
    finally:
        bundle.close()
    for g in chosen:
        if g["kind"] == "known" and g["known_class"] != label and say is not None:
            say(
                f"group {g['id']} was marked {g['known_class']!r} (its texts lie within that class, similarity "
                f"{g['nearest_known']['similarity']:.2f}); its {g['size']} texts are now {label!r}: if some are "
                f"{g['known_class']!r}, remove them (DELETE /examples/ID)"
            )
    return ids
