"""A bundle's changes: additions, removals and relabels written to its store and applied to the rows in memory, and
the folder store's compaction.

A change of this process is made under the store's lock and is on disk (one fsync'd log line, or one committed
transaction) before the call returns; its record is written without holding the bundle, so predictions go on from
the state before it. Concurrent additions can be written as one record (:meth:`Changes.add_many`, a group commit).
``compact()`` folds the log into generation N+1 (:meth:`cea.serving.store.FolderStore.compact`); it also runs by
itself past :data:`COMPACT_REMOVED` or :data:`COMPACT_LOGGED`.

What it expects
    :class:`Changes` is a part of :class:`cea.serving.Bundle`, which holds what it reads and sets: ``lock`` (the rows
    in memory), ``store``, ``embed`` (texts to unit-length embeddings), ``manifest``, ``multi_label``, ``index``, the
    rows' ``_ids``, ``_labels``, ``_texts``, ``_row_of`` and ``_counts``, ``next_id``, ``_generation_rows``, ``_view``,
    the head's ``_head_stale``, ``_changes`` and ``_pending`` (:mod:`cea.serving.refit`), ``_changing`` and
    ``_writing`` (a change of this process; its record being written), ``_reload``; and ``_sync``, ``_install``,
    ``_live``, ``_label``, ``live_index`` and ``head``.
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import CeaError
from ..knn.index import grow
from .examples import normalise_labels
from .store import Loaded

# the folder store folds its log into a new generation by itself past either share (and count) of rows
COMPACT_REMOVED = (0.2, 1000)  # removed rows (searched past, kept in memory)
COMPACT_LOGGED = (1.0, 10_000)  # rows added since the generation (replayed at every start)


class Changes:
    """Additions, removals, relabels and compaction of a :class:`cea.serving.Bundle` (thread-safe, durable)."""

    def _change(self, make) -> dict:
        """One change of this process at a time, under the store's lock: catch up and ``make()`` the record (ids,
        checks) holding the bundle, write it without (predictions go on meanwhile, from the state before it), then
        apply it. Durable when this returns; a write that failed leaves this process to load afresh."""
        with self._changing:
            written = False
            try:
                with self.store.locked():
                    with self.lock:
                        self._sync()
                        record = make()
                        self._writing = written = True
                    self.store.append(record)
                with self.lock:
                    self._writing = False
                    self._apply(record)
            except BaseException:
                with self.lock:
                    self._writing, self._reload = False, self._reload or written
                raise
            self._compact_if_due()
            return record

    def _apply(self, record: dict) -> None:
        op = record["op"]
        if op == "add":
            n = len(self.index.vectors)
            self.index.add(np.asarray(record["embeddings"], dtype=np.float32))
            self._ids = grow(self._ids, n, np.asarray(record["ids"], dtype=np.int64))
            self._labels += [self._label(x) for x in record["labels"]]
            self._counts.update(self._labels[n:])
            self._texts += list(record["texts"])
            self._row_of.update((int(i), n + j) for j, i in enumerate(record["ids"]))
            self.next_id = max(self.next_id, max(record["ids"]) + 1)
        elif op == "remove":  # ids removed meanwhile by another process are already gone
            rows = [self._row_of.pop(int(i)) for i in record["ids"] if int(i) in self._row_of]
            self.index.remove(rows)
            self._counts.subtract(self._labels[r] for r in rows)
        elif op == "relabel":
            for example_id, label in zip(record["ids"], record["labels"]):
                if int(example_id) in self._row_of:
                    row = self._row_of[int(example_id)]
                    self._counts.subtract([self._labels[row]])
                    self._labels[row] = self._label(label)
                    self._counts.update([self._labels[row]])
        self._counts = +self._counts if op != "add" else self._counts  # labels left with no example dropped
        self._view, self._head_stale, self._changes = None, True, self._changes + 1
        self._pending.append((self._changes, time.perf_counter()))


    def add(self, texts: list[str], labels: list[str]) -> list[int]:
        """Add labelled examples (new labels welcome); durable when this returns their ids. In a bundle built with
        label names as examples (``label_names``), a new label whose name is words gets its name as one more example
        (with an id of its own, not returned), as a bundle built with the label from the start would have it."""
        return self.add_many([(texts, labels)])[0]

    def add_many(self, requests: list[tuple]) -> list[list[int]]:
        """:meth:`add` of several requests ``(texts, labels)`` at once: one encode of all their texts and one record
        (one fsync), each request's ids in its own list (what the service's change batcher calls for concurrent
        additions: a group commit). A request ``(texts, labels, vectors)`` brings its texts' embeddings (the
        service encodes them in its prediction batches)."""
        for texts, labels, *_ in requests:
            if len(texts) != len(labels) or not texts:
                raise CeaError(f"add needs texts with labels; got {len(texts)} texts and {len(labels)} labels")
        starts = np.cumsum([0] + [len(request[0]) for request in requests])
        texts = [text for given, *_ in requests for text in given]
        labels = [label for _, given, *_ in requests for label in self._stored(given)]
        names = self._name_candidates(texts, labels)
        missing = [text for given, _, *known in requests if not known for text in given] + [t for t, _ in names]
        encoded = iter(self.embed(missing) if missing else ())
        vectors = np.stack([row for given, _, *known in requests for row in (known[0] if known else
                                                                             [next(encoded) for _ in given])]
                           + [next(encoded) for _ in names]).astype(np.float32, copy=False)

        def make():
            known = self._counts.keys()
            extra = [i for i, (_, label) in enumerate(names) if label not in known]  # under the lock: still new
            rows = np.concatenate([np.arange(len(texts)), len(texts) + np.asarray(extra, dtype=np.int64)])
            n = len(rows)
            return {"op": "add", "ids": list(range(self.next_id, self.next_id + n)),
                    "labels": labels + [names[i][1] for i in extra], "texts": list(texts) + [names[i][0] for i in extra],
                    "embeddings": vectors[rows]}

        ids = self._change(make)["ids"]
        return [ids[a:b] for a, b in zip(starts[:-1], starts[1:])]

    def _name_candidates(self, texts, labels) -> list[tuple[str, str]]:
        """The name examples of an addition's labels this bundle does not know yet, where its manifest says label
        names are examples."""
        if self.multi_label or self.manifest.get("label_names") != "on":
            return []
        from ..data.label_names import new_label_names

        with self.lock:
            known = set(self._counts)
        return new_label_names(texts, labels, known)

    def remove(self, ids: list[int]) -> None:
        def make():
            self._known(ids)
            return {"op": "remove", "ids": [int(i) for i in ids]}

        self._change(make)

    def relabel(self, ids: list[int], labels: list[str]) -> None:
        labels = self._stored(labels)

        def make():
            self._known(ids)
            return {"op": "relabel", "ids": [int(i) for i in ids], "labels": labels}

        self._change(make)

    def _stored(self, labels) -> list:
        """Labels as the log stores them: names, or (multi-label bundles) lists of names."""
        labels = normalise_labels(labels, self.multi_label)
        return [list(x) for x in labels] if self.multi_label else labels


    def _known(self, ids) -> None:
        missing = sorted({int(i) for i in ids} - self._row_of.keys())
        if missing:
            raise CeaError(f"unknown example id(s) {', '.join(map(str, missing[:5]))}; GET /labels or the "
                           "bundle's examples list the ids")

    def compact(self) -> None:
        """Fold the changes into a new generation of the folder store, removed rows dropped (atomic: one rename of
        manifest.json); other processes serving the bundle load it at their next request. A PostgreSQL store
        has nothing to fold (PostgreSQL's autovacuum reclaims removed rows)."""
        with self._changing, self.store.locked(), self.lock:
            self._sync()
            self._compact()

    def _compact(self) -> None:
        index = self.live_index()
        manifest = self.store.compact(self, index)
        if manifest is None:
            return
        live = self._live()
        self._install(Loaded(manifest, *live, index=index, head=self.head()))

    def _compact_if_due(self) -> None:
        """Compact the folder store past :data:`COMPACT_REMOVED` or :data:`COMPACT_LOGGED` (amortised: each fold
        costs about as much as the rows that triggered it)."""
        rows = len(self.index.vectors)
        removed, logged = rows - len(self.index), rows - self._generation_rows
        if self.store.kind == "folder" and (
                removed >= max(COMPACT_REMOVED[1], COMPACT_REMOVED[0] * rows)
                or logged >= max(COMPACT_LOGGED[1], COMPACT_LOGGED[0] * self._generation_rows)):
            with self._changing, self.store.locked(), self.lock:
                self._sync()
                self._compact()
