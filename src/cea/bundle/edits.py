"""The changes a bundle takes: examples added (new labels welcome), set by source, removed or relabelled, each one
durable record (:mod:`cea.bundle.changes`), and the folder store's log folded into a new generation.

What it does
    :class:`Edits`, a part of :class:`cea.bundle.bundle.Bundle`, turns each call into the record
    :class:`cea.bundle.changes.Changes` makes durable, and compacts the folder store by itself past
    :data:`COMPACT_REMOVED` or :data:`COMPACT_LOGGED` (:meth:`cea.bundle.references.FolderStore.compact`).

What it expects
    A :class:`cea.bundle.bundle.Bundle` (``self``): its rows in memory through their own methods
    (:class:`cea.bundle.rows.Rows`), its store, classifier and change log.
"""

from __future__ import annotations

import numpy as np

from ..data.label_names import new_label_names
from ..errors import CeaError
from .examples import NAMED, normalise_labels
from .references import Loaded
from .requests import AddRequest

# the folder store folds its log into a new generation by itself past either share (and count) of rows
COMPACT_REMOVED = (0.2, 1000)  # removed rows (searched past, kept in memory)
COMPACT_LOGGED = (1.0, 10_000)  # rows added since the generation (replayed at every start)


class Edits:
    def add(self, texts: list[str], labels: list[str]) -> list[int]:
        """Add labelled examples (new labels welcome); durable when this returns their ids. In a bundle built with
        label names as examples (``label_names``), a new label whose name is words gets its name as one more example
        (with an id of its own, not returned), as a bundle built with the label from the start would have it."""
        return self.add_many([AddRequest(texts, labels)])[0]

    def add_many(self, requests: list[AddRequest]) -> list[list[int]]:
        """:meth:`add` of several requests (:class:`cea.bundle.requests.AddRequest`) at once: one encode of the texts
        that come without their embeddings and one record (one fsync), each request's ids in its own list (what the
        service's change batcher calls for concurrent additions: a group commit; it encodes their texts in its
        prediction batches, and each request brings the :attr:`encoder_version` that encoded them)."""
        for request in requests:
            if len(request.texts) != len(request.labels) or not request.texts:
                raise CeaError(
                    f"add needs texts with labels; got {len(request.texts)} texts and {len(request.labels)} labels"
                )
        starts = np.cumsum([0] + [len(request.texts) for request in requests])
        texts = [text for request in requests for text in request.texts]
        labels = [label for request in requests for label in self._stored(request.labels)]
        names = self._names(texts, labels)
        version = self.encoder_version
        vectors = self._vectors(requests, names)
        versions = {version} | {request.version for request in requests}

        def record():  # encoded again where a renewal replaced the encoder meanwhile (once, under the lock)
            stale = any(v is not None and v != self.encoder_version for v in versions)
            rows = self.embed(texts + [t for t, _ in names]) if stale else vectors
            return self._added(texts, labels, names, rows)

        ids = self._change(record)["ids"]
        return [ids[a:b] for a, b in zip(starts[:-1], starts[1:])]

    def _vectors(self, requests: list[AddRequest], names: list[tuple[str, str]]) -> np.ndarray:
        """The rows of :meth:`add_many`'s texts, then of the name examples of ``names``: a request's own vectors, else
        its texts encoded here (with the names, in one encode)."""
        missing = [text for request in requests if request.vectors is None for text in request.texts]
        encoded = self.embed(missing + [t for t, _ in names]) if missing or names else None
        parts, used = [], 0
        for request in requests:
            if request.vectors is None:
                parts.append(encoded[used : used + len(request.texts)])
                used += len(request.texts)
            else:
                parts.append(np.asarray(request.vectors, dtype=np.float32))
        if names:
            parts.append(encoded[used:])
        return np.concatenate(parts).astype(np.float32, copy=False)

    def set_examples(
        self, source: str, texts: list[str], labels: list, vectors: np.ndarray | None = None, version: int | None = None
    ) -> list[int] | None:
        """The examples of ``source`` (a key: an annotation's) set to ``texts`` with ``labels`` in one durable change:
        added the first time (new labels welcome), the earlier ones replaced where they differ, and nothing where
        they are the same (a replayed webhook changes nothing); ``vectors``: the texts' embeddings where encoded
        already (by the encoder of ``version``, :attr:`encoder_version`). Their ids, or None where nothing changed.
        Every process serving the bundle knows which examples a source holds (the key travels with the change)."""
        labels = self._stored(labels)
        if len(texts) != len(labels) or not texts:
            raise CeaError(f"set_examples needs texts with labels; got {len(texts)} texts and {len(labels)} labels")
        names = self._names(texts, labels)
        if vectors is None:
            version, vectors = self.encoder_version, self.embed(list(texts))
        vectors = np.asarray(vectors, dtype=np.float32)
        if names:
            vectors = np.vstack([vectors, self.embed([t for t, _ in names])]).astype(np.float32)

        def record():
            held = self.rows.by_source.get(source, [])
            if sorted((t, str(x)) for t, x in self.rows.pairs(held)) == sorted(
                (t, str(tuple(x) if self.multi_label else x)) for t, x in zip(texts, labels)
            ):
                return None
            rows = self.current(list(texts) + [t for t, _ in names], vectors, version)  # a renewal meanwhile
            added = self._added(list(texts), labels, names, rows)
            added["sources"][: len(texts)] = [source] * len(texts)
            return {**added, **({"replaces": list(held)} if held else {})}

        made = self._change(record)
        return None if made is None else made["ids"][: len(texts)]

    def name_labels(self, examples: dict[str, list[str]]) -> list[str]:
        """New labels before any example of theirs: each label of ``examples`` the bundle does not hold yet gets its
        texts (its name's words, a Label Studio Choice's hint) as its first examples, in one durable change, each
        marked with the source ``label-name:LABEL`` (:data:`cea.bundle.examples.NAMED`): never taken for an
        annotation. They stay as the label's own examples come (docs/records/cold_start.jsonl: dropping them once a
        class had 1 to 64 examples never gained more than 0.04 point). The labels added (those already held, or given
        no text, are left alone)."""
        given = {
            label: [t for t in dict.fromkeys(texts) if isinstance(t, str) and t.strip()]
            for label, texts in examples.items()
        }
        given = {label: texts for label, texts in given.items() if texts}
        if self.multi_label or not given:
            return []
        held = self.label_counts
        pairs = [
            (text, name)
            for name, texts in zip(self._stored(list(given)), given.values())
            if name not in held
            for text in texts
        ]
        if not pairs:  # every label held already (what each of Label Studio's requests finds after the first)
            return []
        version, vectors = self.encoder_version, self.embed([text for text, _ in pairs])
        added = []

        def record():
            added[:] = list(dict.fromkeys(name for _, name in pairs if name not in self.rows.counts))  # still new
            rows = [i for i, (_, name) in enumerate(pairs) if name in added]
            if not rows:
                return None
            encoded = self.current([text for text, _ in pairs], vectors, version)  # a renewal meanwhile
            return {
                "op": "add",
                "ids": list(range(self.next_id, self.next_id + len(rows))),
                "labels": [pairs[i][1] for i in rows],
                "texts": [pairs[i][0] for i in rows],
                "embeddings": encoded[rows],
                "sources": [NAMED + pairs[i][1] for i in rows],
            }

        self._change(record)
        return added

    def remove_sources(self, sources: list[str]) -> tuple[list[str], list[str]]:
        """Remove every example of ``sources`` (keys given to :meth:`set_examples`) in one durable change:
        ``(removed, unknown)``, the sources whose examples went and those that hold none (nothing to remove)."""
        found = {}

        def record():
            found.update((s, self.rows.by_source[s]) for s in sources if s in self.rows.by_source)
            ids = [i for s in found for i in found[s]]
            return {"op": "remove", "ids": ids} if ids else None

        self._change(record)
        return list(found), [s for s in sources if s not in found]

    def remove(self, ids: list[int]) -> None:
        """Remove examples by id; durable when this returns."""
        self._change(lambda: {"op": "remove", "ids": self.rows.known(ids)})

    def relabel(self, ids: list[int], labels: list[str]) -> None:
        """Give examples new labels by id; durable when this returns."""
        labels = self._stored(labels)
        self._change(lambda: {"op": "relabel", "ids": self.rows.known(ids), "labels": labels})

    def _names(self, texts, labels) -> list[tuple[str, str]]:
        """The name examples ``(name, label)`` of the labels new to the bundle, where it takes label names as examples
        (:mod:`cea.data.label_names`)."""
        if self.multi_label or self.manifest.get("label_names") != "on":
            return []
        return new_label_names(texts, labels, set(self.label_counts))

    def _added(self, texts: list[str], labels: list, names: list, vectors: np.ndarray) -> dict:
        """The add record of ``texts`` and of the name examples of ``names`` whose labels are still new (asked under
        the log's lock); ``vectors``: the texts' rows, then the names'."""
        extra = [i for i, (_, label) in enumerate(names) if label not in self.rows.counts]
        rows = np.concatenate([np.arange(len(texts)), len(texts) + np.asarray(extra, dtype=np.int64)])
        return {
            "op": "add",
            "ids": list(range(self.next_id, self.next_id + len(rows))),
            "labels": labels + [names[i][1] for i in extra],
            "texts": texts + [names[i][0] for i in extra],
            "embeddings": vectors[rows],
            "sources": [None] * len(texts) + [NAMED + names[i][1] for i in extra],
        }

    def _stored(self, labels) -> list:
        """Labels as the log stores them: names, or (multi-label bundles) lists of names."""
        labels = normalise_labels(labels, self.multi_label)
        return [list(x) for x in labels] if self.multi_label else labels

    def _change(self, record) -> dict | None:
        """One change made durable (:meth:`cea.bundle.changes.Changes.make`; None: ``record()`` found nothing to
        change); then the folder store compacted where due (amortised: a fold costs about the rows that caused it)."""
        made = self.changes.make(record)
        if made is None:
            return None
        every, generation = len(self.index.vectors), self.rows.generation
        removed, logged = every - len(self.index), every - generation
        if self.store.kind == "folder" and (
            removed >= max(COMPACT_REMOVED[1], COMPACT_REMOVED[0] * every)
            or logged >= max(COMPACT_LOGGED[1], COMPACT_LOGGED[0] * generation)
        ):
            self.compact()
        return made

    def compact(self) -> None:
        """Fold the changes into a new generation of the folder store, removed rows dropped (atomic: one rename of
        manifest.json); other processes serving the bundle load it at their next request. A PostgreSQL store
        has nothing to fold (PostgreSQL's autovacuum reclaims removed rows)."""
        with self.changes.alone():
            whole = len(self.index) == len(self.index.vectors)  # nothing removed: this index, else one built anew
            index = self.index if whole else self.new_index(self.embeddings, self.classifier.k)
            manifest = self.store.compact(self, index)
            if manifest is not None:
                live = self.rows.live()
                self.install(
                    Loaded(
                        manifest,
                        live.embeddings,
                        live.ids,
                        live.labels,
                        live.texts,
                        index=index,
                        head=self.head(),
                        sources=list(live.sources),
                    )
                )
