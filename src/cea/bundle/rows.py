"""A bundle's rows in memory: every row since its store's generation, in the index's order, and what is known of them.

What it does
    :class:`Rows` holds the index (a removed row stays in it as a tombstone until compaction) and each row's id, label,
    text and source, with what a bundle's changes and predictions look up: the row of an id, the live ids of each
    source (an annotation's key), the live labels' counts and the next free id. :meth:`Rows.apply` takes one change's
    record (add, remove, relabel: :mod:`cea.bundle.references`); :meth:`Rows.live` the live rows, as one
    :class:`Live` record cached until the next change.

What it expects
    A :class:`cea.bundle.references.Loaded` and the index of its rows; the records of the changes since, in order.
    The bundle's lock held around every call (it holds one :class:`Rows` at a time, a new one at each install).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..errors import CeaError
from ..knn.index import grow
from .examples import NAMED
from .references import Loaded


@dataclass(frozen=True)
class Live:
    """The live rows (tombstones left out): their places in the index (``rows``), embeddings, ids, labels, texts and
    sources; ``names_only``: every one is a label's name (:meth:`cea.bundle.Bundle.name_labels`), no annotation yet."""

    rows: np.ndarray
    embeddings: np.ndarray
    ids: np.ndarray
    labels: list
    texts: list[str]
    sources: list
    names_only: bool


class Rows:
    """The rows of ``loaded`` over ``index`` (labels as tuples where ``multi_label``). ``ids``, ``labels``, ``texts``
    and ``sources`` are by row, removed rows included (``ids`` a buffer that may run past the last row); ``row_of``:
    a live id's row; ``by_source``: a source's live ids; ``counts``: the live labels'; ``generation``: the rows of
    the store's generation (those after it were added since)."""

    def __init__(self, loaded: Loaded, index, multi_label: bool):
        self.index, self.multi_label = index, multi_label
        self.ids = np.asarray(loaded.ids, dtype=np.int64)
        self.labels = [tuple(x) if multi_label else x for x in loaded.labels]
        self.counts = Counter(self.labels[r] for r in np.flatnonzero(index.alive[: len(self.labels)]))
        self.texts = list(loaded.texts)
        self.sources = list(loaded.sources) if loaded.sources is not None else [None] * len(self.texts)
        self.row_of = {int(i): r for r, i in enumerate(self.ids.tolist())}
        self.by_source = {}  # an annotation's key -> its live examples' ids (cea.bundle.Bundle.set_examples)
        for r in np.flatnonzero(index.alive[: len(self.sources)]):
            if self.sources[r] is not None:
                self.by_source.setdefault(self.sources[r], []).append(int(self.ids[r]))
        self.next_id = max(int(loaded.manifest.get("next_id", 0)), int(self.ids.max()) + 1 if len(self.ids) else 0)
        self.generation = len(self.ids)
        self._view = None

    def apply(self, record: dict) -> None:
        """One change's record applied: an addition (after the removal of the ids it ``replaces``, where it sets an
        annotation's examples), a removal (ids removed meanwhile by another process are already gone) or a relabel."""
        op = record["op"]
        if op == "add" and record.get("replaces"):
            self._remove(record["replaces"])
        if op == "add":
            self._add(record)
        elif op == "remove":
            self._remove(record["ids"])
        elif op == "relabel":
            self._relabel(record["ids"], record["labels"])
        self._view = None

    def _add(self, record: dict) -> None:
        n = len(self.index.vectors)
        self.index.add(np.asarray(record["embeddings"], dtype=np.float32))
        self.ids = grow(self.ids, n, np.asarray(record["ids"], dtype=np.int64))
        self.labels += [tuple(x) if self.multi_label else x for x in record["labels"]]
        self.counts.update(self.labels[n:])
        self.texts += list(record["texts"])
        self.sources += list(record.get("sources") or [None] * len(record["ids"]))
        for i, source in zip(record["ids"], self.sources[n:]):
            if source is not None:
                self.by_source.setdefault(source, []).append(int(i))
        self.row_of.update((int(i), n + j) for j, i in enumerate(record["ids"]))
        self.next_id = max(self.next_id, max(record["ids"]) + 1)

    def _remove(self, ids: list) -> None:
        rows = [self.row_of.pop(int(i)) for i in ids if int(i) in self.row_of]
        self.index.remove(rows)
        for r in rows:  # its id out of its source's ids; a source left with none: dropped
            kept = [i for i in self.by_source.pop(self.sources[r], []) if i != int(self.ids[r])]
            if kept:
                self.by_source[self.sources[r]] = kept
        self.counts.subtract(self.labels[r] for r in rows)
        self.counts = +self.counts  # labels left with no example dropped

    def _relabel(self, ids: list, labels: list) -> None:
        for example_id, label in zip(ids, labels):
            if int(example_id) in self.row_of:
                row = self.row_of[int(example_id)]
                self.counts.subtract([self.labels[row]])
                self.labels[row] = tuple(label) if self.multi_label else label
                self.counts.update([self.labels[row]])
        self.counts = +self.counts

    def live(self) -> Live:
        """The live rows, cached until the next change."""
        if self._view is None:
            rows = np.flatnonzero(self.index.alive)
            sources = [self.sources[r] for r in rows]
            self._view = Live(
                rows,
                self.index.vectors[rows],
                self.ids[: len(self.index.vectors)][rows],
                [self.labels[r] for r in rows],
                [self.texts[r] for r in rows],
                sources,
                len(rows) > 0 and all(isinstance(s, str) and s.startswith(NAMED) for s in sources),
            )
        return self._view

    def known(self, ids) -> list[int]:
        """``ids`` as ints, each of a live example (else a CeaError naming the unknown ones)."""
        ids = [int(i) for i in ids]
        missing = sorted(set(ids) - self.row_of.keys())
        if missing:
            raise CeaError(
                f"unknown example id(s) {', '.join(map(str, missing[:5]))}; GET /labels or the "
                "bundle's examples list the ids"
            )
        return ids

    def example(self, example_id: int) -> dict:
        """One live example by id: its label (a list of labels in a multi-label bundle) and text."""
        row = self.row_of[self.known([example_id])[0]]
        label = list(self.labels[row]) if self.multi_label else self.labels[row]
        return {"id": int(example_id), "label": label, "text": self.texts[row]}

    def pairs(self, ids: list[int]) -> list[tuple[str, object]]:
        """Each live id's text and label."""
        return [(self.texts[self.row_of[i]], self.labels[self.row_of[i]]) for i in ids]
