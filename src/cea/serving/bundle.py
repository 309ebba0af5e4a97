"""A kNN classifier bundle: an encoder, labelled reference examples and an index, in one folder.

The files (no pickle anywhere) are laid out by :mod:`cea.serving.storage`.

Changes are durable and atomic: a change is made under the store's lock and is on disk (one fsync'd log line, or one
committed transaction) before the call returns; a line torn by a crash fails its checksum and is ignored (it was
never acknowledged). ``compact()`` writes generation N+1 beside N, fsyncs it, then replaces ``manifest.json`` in one
rename, so a crash at any point leaves either the old or the new state; it also runs by itself past
:data:`~cea.serving.changes.COMPACT_REMOVED` or :data:`~cea.serving.changes.COMPACT_LOGGED`. Loading verifies every
checksum. Several processes may serve one bundle (``cea serve --workers N``, or services on several machines sharing
a PostgreSQL store): each applies the others' changes before answering a request (:mod:`cea.serving.store`).

The classifier (:class:`cea.knn.decision.Classifier`, from the manifest) is a linear head on the reference
embeddings (:mod:`cea.knn.head`, the default; its probabilities optionally mixed with the kNN vote's) or the kNN vote
alone. A change marks the head stale; it is
refitted off the request path (:mod:`cea.serving.refit`), and a new label is predicted from the next request.
With a threshold in the manifest (``unknown``: given, or calibrated on held-out references) a prediction
whose evidence falls below it is answered ``unknown``.

This module is the living bundle (the rows in memory, loading, keeping in step with the store, prediction); its
changes and compaction are :mod:`cea.serving.changes`, its head's refits :mod:`cea.serving.refit`; a new folder is
written by :mod:`cea.serving.create`, texts and labels are checked by :mod:`cea.serving.examples`, answers are
decided by the classifier and written as records by :mod:`cea.serving.decision`, and the examples are kept by a store (:mod:`cea.serving.store`, whose folder
files :mod:`cea.serving.storage` lays out).

No peer tool ships a classifier that grows without retraining, hence this module.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from pathlib import Path

import numpy as np

from ..encoders.embeddings import PASS_OVERHEAD
from ..errors import CeaError
from ..knn import build_index
from ..knn.decision import Classifier
from ..paths import read_json
from .create import BACKENDS, write_bundle
from .decision import Prediction, predictions
from .changes import Changes
from .examples import encode
from .refit import HeadRefits
from .storage import FORMAT
from .store import Loaded, Store, open_store

# texts per forward pass when predicting, at most: a batch's texts are sorted by length and cut into the passes that
# cost least for the backend (cea.encoders.embeddings.least_cost_passes), so that a short text is not padded to the
# longest of its batch (the figures page, docs/benchmarks.md, the service under one-text clients)
PREDICT_PASS = 64


class Bundle(HeadRefits, Changes):
    """Load with :meth:`Bundle.load`, create with :meth:`Bundle.create`; thread-safe mutations."""

    def __init__(self, root: Path, encoder, store: Store, loaded: Loaded):
        self.root, self.encoder, self.store = root, encoder, store
        self.lock = threading.RLock()  # the rows, labels and head in memory
        self._changing, self._writing = threading.RLock(), False  # a change of this process; its record being written
        self.on_refit = None  # on_refit(seconds, lags): a head was installed; lags: seconds since each change it counts
        self.pass_overhead = None  # a forward pass's own cost in tokens (cea.encoders.embeddings.PASS_OVERHEAD)
        self._changes, self._refitting = 0, False  # changes applied (never reset); a refit thread running
        self._install(loaded)

    def _install(self, loaded: Loaded) -> None:
        """Hold what the store holds: its rows (every row since the generation, in the index's order; removed rows
        stay as tombstones until compaction) and the changes since."""
        self.manifest = loaded.manifest
        self.classifier = Classifier.from_manifest(self.manifest)
        self.multi_label = self.classifier.multi_label  # each example has a tuple of labels
        self.index = loaded.index
        if self.index is None:  # a store that keeps no index: built here (its recall was measured when it was made)
            info = self.manifest.get("index", {})
            self.index = build_index(loaded.embeddings, info.get("kind", "exact"), info.get("params"), k=None)[0]
        self._ids = np.asarray(loaded.ids, dtype=np.int64)
        self._labels = [self._label(x) for x in loaded.labels]
        self._counts = Counter(self._labels[r] for r in np.flatnonzero(self.index.alive[:len(self._labels)]))
        self._texts = list(loaded.texts)
        self._row_of = {int(i): r for r, i in enumerate(self._ids.tolist())}
        self.next_id = max(int(self.manifest.get("next_id", 0)), int(self._ids.max()) + 1 if len(self._ids) else 0)
        self._generation_rows, self._reload = len(self._ids), False
        self._view, self._head, self._head_stale = None, loaded.head, False
        self._head_changes, self._pending = self._changes, deque()  # changes the head counts; (change, time) since
        for record in loaded.records:
            self._apply(record)

    def _label(self, label):
        return tuple(label) if self.multi_label else label

    # --- the live examples (tombstones left out) ---------------------------------------------
    def _live(self) -> tuple[np.ndarray, np.ndarray, list, list[str]]:
        """Embeddings, ids, labels and texts of the live rows, cached until the next change."""
        if self._view is None:
            rows = np.flatnonzero(self.index.alive)
            self._view = (self.index.vectors[rows], self._ids[: len(self.index.vectors)][rows],
                          [self._labels[r] for r in rows], [self._texts[r] for r in rows])
        return self._view

    embeddings = property(lambda self: self._live()[0])
    ids = property(lambda self: self._live()[1])
    labels = property(lambda self: self._live()[2])
    texts = property(lambda self: self._live()[3])

    def stored_labels(self) -> list:
        """Live labels as files store them (lists in a multi-label bundle)."""
        return [list(x) for x in self.labels] if self.multi_label else self.labels

    def live_index(self):
        """An index of the live rows only: this one where nothing was removed, else built anew."""
        if len(self.index) == len(self.index.vectors):
            return self.index
        info = self.manifest.get("index", {})
        return build_index(self.embeddings, info.get("kind", "exact"), info.get("params"),
                           k=self.classifier.k)[0]

    def __len__(self) -> int:
        with self.lock:
            self._sync()
            return len(self.index)

    # --- creating and loading ----------------------------------------------------------------
    @classmethod
    def create(cls, output: str | Path, model: str, texts: list[str], labels: list,
               classifier: Classifier | None = None, unknown_rate: float | None = None, batch_size: int = 64,
               progress: bool = True, index: str = "auto", index_params: dict | None = None, backend: str = "auto",
               device: str | None = None, precision: str = "fp32", store: str | None = None,
               label_names: str = "off", embeddings=None) -> Bundle:
        """Encode ``texts`` with ``model`` (unless ``embeddings`` hold them already), write a new bundle folder
        (refused if it exists) and open it; :func:`cea.serving.create.write_bundle` describes the parameters."""
        write_bundle(output, model, texts, labels, classifier=classifier, unknown_rate=unknown_rate,
                     batch_size=batch_size, progress=progress, index=index, index_params=index_params,
                     backend=backend, device=device, precision=precision, store=store, label_names=label_names,
                     embeddings=embeddings)
        return cls.load(output, device=device, precision=precision)

    @classmethod
    def load(cls, root: str | Path, verify: bool = True, device: str | None = None, precision: str = "fp32") -> Bundle:
        """Open a bundle on ``device`` (auto: CUDA, MPS, then the CPU) with its encoder in ``precision``;
        every file is checked against the manifest's checksums."""
        from ..encoders import load_encoder

        root = Path(root)
        path = root / "manifest.json"
        if not path.exists():
            raise CeaError(f"{root} is not a cea bundle (no manifest.json); build one with cea bundle")
        manifest = read_json(path, FORMAT, "a newer cea.bundle format needs a newer cea (upgrade it); "
                                           "anything else: rebuild or restore the bundle")
        backend = manifest.get("backend", "torch")
        if backend not in BACKENDS:
            raise CeaError(f"{root} uses encoder backend {backend!r}, unknown to this cea; upgrade cea")
        store = open_store(root, manifest)
        loaded = store.load(verify)
        if BACKENDS[backend]:
            from ..encoders.onnx import OnnxEncoder

            encoder = OnnxEncoder(root / "encoder", BACKENDS[backend])
        else:
            encoder = load_encoder(str(root / "encoder"), device=device, precision=precision)
        dim = encoder.get_embedding_dimension() if hasattr(encoder, "get_embedding_dimension") else None
        if dim is not None and dim != loaded.embeddings.shape[1]:
            raise CeaError(f"the bundle's embeddings have {loaded.embeddings.shape[1]} dimensions but its encoder gives "
                           f"{dim}; rebuild the bundle with cea bundle")
        bundle = cls(root, encoder, store, loaded)
        on_cpu = BACKENDS[backend] or str(getattr(encoder, "device", "cpu")).startswith("cpu")
        bundle.pass_overhead = PASS_OVERHEAD["onnx" if BACKENDS[backend] else "torch"] if on_cpu else None
        bundle.head()  # fitted now where the store keeps no head: the first request does not wait for it
        return bundle

    # --- keeping in step with the store -------------------------------------------------------
    def _sync(self) -> None:
        """Apply what other processes changed since (a compaction elsewhere: load afresh); nothing while a change of
        this process is being written (:meth:`_change` applies it, and what came before it, itself)."""
        if self._writing:
            return
        records = None if self._reload else self.store.pull()
        if records is None:
            self._install(self.store.load())
        else:
            for record in records:
                self._apply(record)

    def _row(self, example_id: int) -> int:
        if int(example_id) not in self._row_of:
            self._known([example_id])
        return self._row_of[int(example_id)]

    def close(self) -> None:
        """Let go of the store's files or connection (every change is already durable)."""
        with self.lock:
            self.store.close()

    def __enter__(self) -> Bundle:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def get(self, example_id: int) -> dict:
        """One example by id: its label (a list of labels in a multi-label bundle) and text."""
        with self.lock:
            self._sync()
            row = self._row(example_id)
            label = list(self._labels[row]) if self.multi_label else self._labels[row]
            return {"id": int(example_id), "label": label, "text": self._texts[row]}

    # --- prediction (the head: cea.serving.refit) ------------------------------------------
    def predict(self, texts: list[str], k: int | None = None, threshold: float | None = None) -> list[Prediction]:
        """Label, score, evidence and the k neighbours (id, label, text, cosine) of each text
        (:meth:`cea.knn.decision.Classifier.decide`).

        A linear bundle takes the most probable label of the head (mixed with the kNN vote's shares by the
        manifest's ``knn_share``) and its probability as the score; a kNN bundle the majority of the k nearest live
        examples and its share of the votes. Where the evidence (score times the nearest cosine) falls below
        ``threshold`` (default: the bundle's, if it has one; 0: never) the label is ``unknown`` and ``closest``
        names the best class.
        """
        return self.predict_many([(texts, k, threshold)])[0]

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 embeddings of ``texts`` by the bundle's encoder, in the passes that cost least."""
        return encode(self.encoder, texts, batch_size=PREDICT_PASS, overhead=self.pass_overhead).astype(np.float32)

    def predict_many(self, requests: list[tuple[list[str], int | None, float | None]],
                     vectors: np.ndarray | None = None) -> list[list[Prediction]]:
        """:meth:`predict` of several requests ``(texts, k, threshold)`` at once: one encode of all their texts, one
        search and one decision (per distinct ``k``), each request's predictions in its own list (what
        :class:`cea.serving.batching.Batcher` calls for concurrent requests). ``vectors``: the texts' embeddings
        (:meth:`embed`), where the caller encoded them with others."""
        texts = [text for request in requests for text in request[0]]
        vectors = self.embed(texts) if vectors is None else vectors
        starts = np.cumsum([0] + [len(request[0]) for request in requests])
        with self.lock:
            self._sync()
            if len(self.index) == 0:
                raise CeaError("the bundle holds no examples; add some first")
            ks = np.repeat([min(k or self.classifier.k, len(self.index)) for _, k, _ in requests],
                           np.diff(starts))
            sims, rows = self.index.search(vectors, int(ks.max()))
            neighbour_labels = np.empty(rows.shape, dtype=object)
            for (i, j), r in np.ndenumerate(rows):
                neighbour_labels[i, j] = self._labels[r] if r >= 0 else None
            head = self._serving_head()
            # what the decision reads, held from here: the lists only grow (a compaction installs new ones), so the
            # decision and the answers are built without holding the bundle
            ids, stored_texts, labels = self._ids, self._texts, self._labels
            threshold_of_bundle = self.unknown_threshold
            # the labels' counts, for the evidence of small classes (cea.knn.unknown.count_curve)
            counts = dict(self._counts) if self.classifier.count_curve and not self.multi_label else None
        chosen, scores, strength = np.empty(len(texts), dtype=object), np.zeros(len(texts)), np.zeros(len(texts))
        sets = [None] * len(texts) if self.multi_label else None  # a multi-label bundle's ranked labels per text
        for k in np.unique(ks):
            at = np.flatnonzero(ks == k)
            chosen[at], scores[at], strength[at], ranked = self.classifier.decide(head, vectors[at], sims[at, :k],
                                                                                  neighbour_labels[at, :k], counts)
            for i, a in zip(at, ranked or []):
                sets[i] = a
        out = []
        for (_, _, threshold), a, b in zip(requests, starts[:-1], starts[1:]):
            k = int(ks[a])
            out.append(predictions(chosen[a:b], scores[a:b], strength[a:b],
                                   threshold_of_bundle if threshold is None else threshold,
                                   sims[a:b, :k], rows[a:b, :k], ids, stored_texts, labels,
                                   None if sets is None else sets[a:b]))
        return out

    @property
    def unknown_threshold(self) -> float | None:
        """The evidence below which the bundle answers unknown (None: it never does)."""
        return self.classifier.unknown_threshold

    @property
    def label_counts(self) -> dict[str, int]:
        with self.lock:
            self._sync()
            if not self.multi_label:
                return dict(sorted(self._counts.items()))  # labels are str (str() on the way in)
            names = Counter()
            for labels, count in self._counts.items():
                for name in labels:
                    names[name] += count
            return dict(sorted(names.items()))
