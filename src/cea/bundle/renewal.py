"""A bundle renewed with another encoder: the examples it holds now, encoded by the encoder of a bundle fitted from
them (``cea fit`` in the background: :mod:`cea.service.fine_tuning`), installed as a new generation with an encoder
folder of its own, which every process serving the bundle loads at its next request.

What it does
    :func:`renew` reads the live rows and encodes them with the fitted bundle's encoder without holding the bundle
    (the fitted bundle's own embeddings reused where it holds the same text), and fits the fitted classifier's head on
    them. Then, holding every change (:meth:`cea.bundle.changes.Changes.alone`), it replays what changed meanwhile:
    rows added since are encoded, removed ones dropped, labels taken as they are now. The store writes the new
    generation (:meth:`cea.bundle.references.Store.renew`) and this process installs it. Nothing acknowledged before or
    during the renewal is lost; a text encoded by the old encoder while it ran is encoded again
    (:meth:`cea.bundle.Bundle.current`).

What it expects
    Two single-label bundles, or two multi-label ones; the fitted one open in this process, on the live one's device.

No library swaps the encoder under a live kNN index that several processes share, hence this module.
"""

from __future__ import annotations

import numpy as np

from ..errors import CeaError
from .bundle import Bundle, encoder_folder
from .references import Loaded
from .refit import REFIT_STEPS

# the manifest's entries that come with the fitted encoder (the rest, such as the store and label names, stay)
SETTINGS = (
    "k",
    "weights",
    "classifier",
    "multi_label",
    "unknown",
    "backend",
    "backend_choice",
    "dim",
    "model",
    "model_fingerprint",
)


def renew(bundle: Bundle, fitted: Bundle, during=None) -> dict:
    """``bundle`` renewed with ``fitted``'s encoder and classifier (module docstring); ``during()``: called between
    the encoding and the replay (a test's hook for a change made meanwhile). The new manifest."""
    if fitted.multi_label != bundle.multi_label:
        raise CeaError("the fitted bundle and the live one differ in labels per text; fit the live bundle's examples")
    with bundle.lock:
        bundle.changes.sync()
        ids, texts, labels = bundle.ids.copy(), list(bundle.texts), bundle.stored_labels()
    vectors = encoded(fitted, texts)
    head = fitted.classifier.fit(vectors, _labels(fitted, labels), previous=fitted.head())
    if during is not None:
        during()
    with bundle.changes.alone():
        now_ids, now_labels, now_texts = bundle.ids.copy(), bundle.stored_labels(), list(bundle.texts)
        row_of = {int(i): r for r, i in enumerate(ids.tolist())}
        rows = np.array([row_of.get(int(i), -1) for i in now_ids.tolist()], dtype=np.int64)
        added = np.flatnonzero(rows < 0)
        now = np.zeros((len(now_ids), vectors.shape[1]), dtype=np.float32)
        now[rows >= 0] = vectors[rows[rows >= 0]]
        if len(added):
            now[added] = fitted.embed([now_texts[r] for r in added])
        if len(added) or len(now_ids) != len(ids) or now_labels != labels:  # the head counts the changes too
            head = fitted.classifier.fit(now, _labels(fitted, now_labels), previous=head, steps=REFIT_STEPS)
        settings = {key: fitted.manifest[key] for key in SETTINGS if key in fitted.manifest}
        index = bundle.new_index(now, fitted.classifier.k)
        rows_now = Loaded(
            {**settings, "next_id": bundle.next_id},
            now,
            now_ids,
            now_labels,
            now_texts,
            index,
            head,
            sources=bundle.sources,
        )
        manifest = bundle.store.renew(rows_now, fitted.root / encoder_folder(fitted.manifest))
        bundle.install(
            Loaded(manifest, now, now_ids, now_labels, now_texts, index=index, head=head, sources=rows_now.sources),
            encoder=fitted.encoder,
        )  # in memory already: not loaded again
    traffic = [item["id"] for item in bundle.store.kept("traffic")]  # embeddings of the old encoder
    if traffic:
        bundle.store.forget(traffic, "traffic")
    return manifest


def encoded(fitted: Bundle, texts: list[str]) -> np.ndarray:
    """``texts`` encoded by ``fitted``'s encoder: its own embedding of a text it holds, the rest encoded here."""
    if not texts:
        return np.zeros((0, fitted.embeddings.shape[1]), dtype=np.float32)
    with fitted.lock:
        held = dict(zip(fitted.texts, fitted.embeddings))
    missing = list(dict.fromkeys(t for t in texts if t not in held))
    if missing:
        held.update(zip(missing, fitted.embed(missing)))
    return np.stack([held[t] for t in texts]).astype(np.float32)


def _labels(bundle: Bundle, labels: list) -> list:
    """Stored labels as a classifier fits them (tuples for label sets)."""
    return [tuple(x) for x in labels] if bundle.multi_label else labels
