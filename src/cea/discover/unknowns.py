"""The loop in the service: group the texts a bundle answered ``unknown``, and add a group as a class.

A service started with ``keep_unknowns`` (``cea serve --keep-unknowns N``) keeps the latest texts it turned away in
the bundle's store, where its replicas share them (:meth:`cea.serving.store.Store.keep_unknowns`; ``GET
/unknowns`` lists them). :func:`group_unknowns` groups them with :func:`cea.discover.discover`, the bundle's live
examples as the known classes (their stored embeddings; the kept texts encoded by the bundle's encoder), and writes
the groups beside the bundle (``BUNDLE/unknown-groups.json``, each with the ids of its texts) and a page with a map
(``BUNDLE/unknown-groups.html``). A group is new, or a known class the texts were turned away from (a threshold
too strict for them). :func:`accept_group` adds one group's texts as examples of a label, at once (a service
serving the bundle predicts it from its next request), and forgets them.

Usage
    >>> found = group_unknowns("banking-bundle")                       # doctest: +SKIP
    >>> accept_group("banking-bundle", group=found["groups"][0]["id"], label="crypto")  # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

import numpy as np

from ..errors import CeaError
from ..paths import read_json, write_json
from . import AUTO, discover

GROUPS, PAGE = "unknown-groups.json", "unknown-groups.html"
FORMAT = "cea.discover.unknowns/1"


def group_unknowns(bundle_dir: str | Path, clusters: int | str = AUTO, seed: int = 0, page: bool = True,
                   say=None) -> dict:
    """Group the texts ``bundle_dir``'s store keeps as answered unknown (see the module docstring); returns what it
    writes to ``BUNDLE/unknown-groups.json``: the groups that hold kept texts, largest new ones first."""
    from ..serving import Bundle
    from ..serving.examples import encode

    bundle_dir = Path(bundle_dir)
    bundle = Bundle.load(bundle_dir, verify=False)
    try:
        if bundle.multi_label:
            raise CeaError("cea discover groups the unknowns of a bundle with one label per example; this one holds "
                           "label lists")
        kept = bundle.store.unknowns()
        if len(kept) < 2:
            raise CeaError(f"{bundle_dir} keeps {len(kept)} texts answered unknown; serve it with cea serve "
                           "--keep-unknowns N and group them once it has turned some away")
        texts = [u["text"] for u in kept]
        vectors = encode(bundle.encoder, texts, overhead=bundle.pass_overhead)
        known_texts, known_labels, known_vectors = list(bundle.texts), list(bundle.labels), bundle.embeddings
    finally:
        bundle.close()
    found = discover(known_texts + texts, known_labels + [None] * len(texts),
                     embeddings=np.vstack([known_vectors, vectors]), clusters=clusters, seed=seed, say=say)
    mine = found.clusters[len(known_texts):]
    groups = []
    for group in found.groups:
        members = [kept[i]["id"] for i in np.flatnonzero(mine == group["id"])]
        if members:
            groups.append({**group, "members": members})
    payload = {"format": FORMAT, "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
               "n_unknowns": len(kept), "n_clusters": found.n_clusters, "estimate": found.estimate,
               "groups": groups}
    write_json(bundle_dir / GROUPS, payload)
    if page:
        _page(bundle_dir, payload, vectors, mine)
    return payload


def _page(bundle_dir: Path, payload: dict, vectors: np.ndarray, clusters: np.ndarray) -> Path:
    """``BUNDLE/unknown-groups.html``: the kept texts on a map (t-SNE), coloured by group, and the groups' table."""
    from ..reports.html import groups_page
    from ..reports.plots import embedding_map

    name = {g["id"]: (f"{g['id']}: {g['known_class']}" if g["known_class"] else f"{g['id']}: new")
            for g in payload["groups"]}
    note = (f"{payload['n_unknowns']} texts answered unknown, {len(payload['groups'])} groups "
            f"({sum(g['kind'] == 'new' for g in payload['groups'])} new); accept one with "
            f"cea discover {bundle_dir} --accept GROUP --label NAME")
    with tempfile.TemporaryDirectory() as tmp:
        image = None
        if len(vectors) >= 5:  # fewer points make no map
            image = embedding_map(vectors, np.array([name[c] for c in clusters]), Path(tmp) / "map.png",
                                  perplexity=min(30.0, (len(vectors) - 1) / 3), title="texts answered unknown")
        return groups_page(bundle_dir / PAGE, f"Texts {bundle_dir.name} answered unknown", payload["groups"], image,
                           note)


def accept_group(bundle_dir: str | Path, group: int, label: str) -> list[int]:
    """Add the kept texts of ``group`` (of the last :func:`group_unknowns`) to the bundle as examples of ``label``,
    and forget them; returns the new examples' ids."""
    from ..serving import Bundle

    bundle_dir = Path(bundle_dir)
    if not (bundle_dir / GROUPS).exists():
        raise CeaError(f"{bundle_dir} has no grouped unknowns; run cea discover {bundle_dir} first")
    payload = read_json(bundle_dir / GROUPS, (FORMAT,), f"run cea discover {bundle_dir} again")
    chosen = [g for g in payload["groups"] if g["id"] == group]
    if not chosen:
        raise CeaError(f"no group {group} among the last grouping's "
                       f"{', '.join(str(g['id']) for g in payload['groups'])}; see {bundle_dir / PAGE}")
    if not str(label).strip():
        raise CeaError("the label is empty; name the class the group's texts are")
    bundle = Bundle.load(bundle_dir, verify=False)
    try:
        kept = {u["id"]: u["text"] for u in bundle.store.unknowns()}
        members = [i for i in chosen[0]["members"] if i in kept]
        if not members:
            raise CeaError(f"group {group}'s texts were accepted or dropped since; run cea discover {bundle_dir} again")
        ids = bundle.add([kept[i] for i in members], [label] * len(members))
        bundle.store.forget_unknowns(members)
    finally:
        bundle.close()
    return ids
