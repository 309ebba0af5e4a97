"""A kNN classifier bundle: an encoder, labelled reference examples and an index, in one folder, that predicts and
grows without retraining.

A change (:mod:`cea.bundle.edits`: add, set, remove, relabel) is durable when the call returns
(:mod:`cea.bundle.changes`); ``compact()`` folds the log into a new generation. Several processes may serve one
bundle (``cea serve --workers N``, or machines sharing a PostgreSQL store): each applies the others' changes before
answering a request (:mod:`cea.bundle.references`). The classifier (:class:`cea.knn.decision.Classifier`, from the
manifest) is a linear head on the reference embeddings (its probabilities optionally mixed with the kNN vote's),
refitted off the request path (:mod:`cea.bundle.refit`), or the kNN vote alone; below the manifest's ``unknown``
threshold, if any, a prediction is answered ``unknown``.

What it expects
    A folder written by :mod:`cea.bundle.create` (files laid out by :mod:`cea.bundle.layout`); texts and labels
    as :mod:`cea.bundle.examples` checks them.

When to use it
    To serve a classifier that grows with new examples and labels (``cea bundle``, ``cea predict``, ``cea serve``).
    No peer tool ships one, hence this module.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import numpy as np

from ..encoders import load_encoder
from ..encoders.embeddings import PASS_OVERHEAD
from ..encoders.onnx import OnnxEncoder
from ..errors import CeaError
from ..knn import build_index
from ..knn.decision import Classifier
from ..knn.names import Asked, nearest_names
from ..knn.unknown import evidence
from .answers import Prediction, predictions
from .changes import Changes
from .create import BACKENDS, in_precision, write_bundle
from .edits import Edits
from .examples import encode
from .layout import FIRST_ENCODER, read_manifest
from .references import Loaded, Store, open_store
from .refit import HeadRefit
from .requests import PredictRequest
from .rows import Rows

# texts per forward pass when predicting, at most: a batch's texts are sorted by length and cut into the passes that
# cost least for the backend (cea.encoders.embeddings.least_cost_passes): a short text is not padded to the longest
PREDICT_PASS = 64


def encoder_folder(manifest: dict) -> str:
    """The folder of the bundle's encoder: ``encoder``, or ``encoder-N`` after a renewal (:mod:`cea.bundle.renewal`)."""
    return manifest.get("encoder", FIRST_ENCODER)


def open_encoder(root: Path, manifest: dict, device: str | None, precision: str):
    """The encoder ``manifest`` names, in its backend (PyTorch on ``device`` in ``precision``, or ONNX)."""
    backend = manifest.get("backend", "torch")
    if backend not in BACKENDS:
        raise CeaError(f"{root} uses encoder backend {backend!r}, unknown to this cea; upgrade cea")
    folder = root / encoder_folder(manifest)
    if BACKENDS[backend]:
        return OnnxEncoder(folder, BACKENDS[backend])
    return load_encoder(str(folder), device=device, precision=precision)


def check_dimensions(encoder, embeddings: np.ndarray) -> None:
    """A CeaError where ``encoder`` gives vectors of another size than the bundle's ``embeddings``."""
    dim = encoder.get_embedding_dimension() if hasattr(encoder, "get_embedding_dimension") else None
    if dim is not None and dim != embeddings.shape[1]:
        raise CeaError(
            f"the bundle's embeddings have {embeddings.shape[1]} dimensions but its encoder "
            f"gives {dim}; rebuild the bundle with cea bundle"
        )


class Bundle(Edits):
    """Load with :meth:`Bundle.load`, create with :meth:`Bundle.create`; thread-safe mutations. ``rows``
    (:class:`cea.bundle.rows.Rows`) holds the examples in memory and their index, ``changes``
    (:class:`cea.bundle.changes.Changes`) keeps them in step with the store, ``refit``
    (:class:`cea.bundle.refit.HeadRefit`) the head with them."""

    def __init__(self, root: Path, encoder, store: Store, loaded: Loaded, encoder_options: dict | None = None):
        self.root, self.store = root, store
        # where and how the encoder runs (load's device and precision): a renewed one is loaded the same way
        self.encoder_options = encoder_options or {"device": None, "precision": "fp32"}
        self.lock = threading.RLock()  # the rows, labels and head in memory
        # which encoder embedded what: a caller that encoded texts before taking the lock hands this number back
        # with their vectors (a renewal installs another encoder meanwhile: cea.bundle.renewal)
        self.encoder_version = 0
        self._use(encoder, loaded.manifest)
        self.rows: Rows | None = None
        self.asked = Asked()  # the texts asked about: their mean centres the label names (cea.knn.names)
        self.refit = HeadRefit(
            self.lock,
            lambda: (self.embeddings, self.labels),
            Classifier.from_manifest(loaded.manifest),
            extent=lambda: 0 if self.rows is None else len(self.rows.index.vectors),
        )
        self.changes = Changes(store, self.lock, self._apply, lambda: self.install(store.load()))
        self.install(loaded)

    def _use(self, encoder, manifest: dict) -> None:
        """Encode with ``encoder`` from now on (the bundle's of ``manifest``); the version after it, so that a caller
        that read the version before encoding never takes new vectors for old ones."""
        self.encoder, self.manifest = encoder, manifest
        onnx = BACKENDS[manifest.get("backend", "torch")]
        on_cpu = onnx or str(getattr(encoder, "device", "cpu")).startswith("cpu")
        # a forward pass's own cost in tokens (cea.encoders.embeddings.PASS_OVERHEAD); on a GPU: None
        self.pass_overhead = PASS_OVERHEAD["onnx" if onnx else "torch"] if on_cpu else None
        self.encoder_version += 1

    def install(self, loaded: Loaded, encoder=None) -> None:
        """Hold what the store holds (under the lock): its rows (every row since the generation, in the index's order;
        removed rows stay as tombstones until compaction) and the changes since. ``encoder``: the encoder of
        ``loaded.manifest``, in memory already (a renewal's, :mod:`cea.bundle.renewal`); None: this bundle's, opened
        anew where ``loaded`` names another encoder folder."""
        if encoder is not None:
            self._use(encoder, loaded.manifest)
        elif encoder_folder(loaded.manifest) != encoder_folder(self.manifest):  # renewed elsewhere
            self._use(open_encoder(self.root, loaded.manifest, **self.encoder_options), loaded.manifest)
        self.manifest = loaded.manifest
        self.classifier = Classifier.from_manifest(self.manifest)
        self.multi_label = self.classifier.multi_label  # each example has a tuple of labels
        # a store that keeps no index: built here (its recall was measured when it was made)
        index = self.new_index(loaded.embeddings, k=None) if loaded.index is None else loaded.index
        self.rows = Rows(loaded, index, self.multi_label)
        self.refit.reset(self.classifier, loaded.head)
        for record in loaded.records:
            self._apply(record)

    def _apply(self, record: dict) -> None:
        """One change's record applied to the rows in memory (under the lock): the head stale from then on (a change
        each for the annotation's earlier examples an addition replaces, and for the addition)."""
        if record["op"] == "add" and record.get("replaces"):
            self.refit.changed()
        self.rows.apply(record)
        self.refit.changed()

    # --- the live examples (tombstones left out) ---------------------------------------------
    index = property(lambda self: self.rows.index, doc="The index of the rows (:class:`cea.knn.index.VectorIndex`).")
    next_id = property(lambda self: self.rows.next_id, doc="The id the next example added gets.")
    names_only = property(
        lambda self: self.rows.live().names_only,
        doc="Every live example is a label's name (:meth:`name_labels`): no annotation yet.",
    )
    embeddings = property(lambda self: self.rows.live().embeddings)
    ids = property(lambda self: self.rows.live().ids)
    labels = property(lambda self: self.rows.live().labels)
    texts = property(lambda self: self.rows.live().texts)

    @property
    def sources(self) -> list:
        """Each live example's source: the key of the annotation it was added for (:meth:`set_examples`), else None."""
        with self.lock:
            return list(self.rows.live().sources)

    @property
    def version(self) -> str:
        """Changes whenever the examples do (the next id, grown by every addition, and the live examples' count, cut by
        every removal) and whenever the encoder is renewed (its folder's number after them), and is the same in every
        process serving the bundle: Label Studio's ``model_version``."""
        with self.lock:
            self.changes.sync()
            renewed = encoder_folder(self.manifest).partition("-")[2]
            return f"{self.next_id}.{len(self.index)}" + (f".{renewed}" if renewed else "")

    def stored_labels(self) -> list:
        """Live labels as files store them (lists in a multi-label bundle)."""
        return [list(x) for x in self.labels] if self.multi_label else self.labels

    def new_index(self, embeddings: np.ndarray, k: int | None):
        """An index of ``embeddings`` of the kind and parameters the manifest names (``k``: the neighbours searched,
        for an approximate kind's recall)."""
        info = self.manifest.get("index", {})
        return build_index(embeddings, info.get("kind", "exact"), info.get("params"), k=k)[0]

    def __len__(self) -> int:
        with self.lock:
            self.changes.sync()
            return len(self.index)

    @classmethod
    def create(
        cls,
        output: str | Path,
        model: str,
        texts: list[str],
        labels: list,
        device: str | None = None,
        precision: str = "fp32",
        **options,
    ) -> Bundle:
        """Encode ``texts`` with ``model`` (unless ``embeddings`` hold them already), write a new bundle folder
        (refused if it exists) and open it; ``options``: :func:`cea.bundle.create.write_bundle`'s; an ``encoder``
        loaded before also serves the new bundle where it runs in PyTorch."""
        write_bundle(output, model, texts, labels, device=device, precision=precision, **options)
        return cls.load(output, device=device, precision=precision, encoder=options.get("encoder"))

    @classmethod
    def load(
        cls, root: str | Path, verify: bool = True, device: str | None = None, precision: str = "fp32", encoder=None
    ) -> Bundle:
        """Open a bundle on ``device`` (auto: CUDA, MPS, then the CPU) with its encoder in ``precision``;
        every file is checked against the manifest's checksums. ``encoder``: the PyTorch encoder the bundle holds,
        loaded before (:meth:`create`'s), used instead of loading it."""
        root = Path(root)
        if not (root / "manifest.json").exists():
            raise CeaError(f"{root} is not a cea bundle (no manifest.json); build one with cea bundle")
        manifest = read_manifest(root)
        backend = manifest.get("backend", "torch")
        if backend not in BACKENDS:
            raise CeaError(f"{root} uses encoder backend {backend!r}, unknown to this cea; upgrade cea")
        store = open_store(root, manifest)
        loaded = store.load(verify)
        if encoder is not None and not BACKENDS[backend] and encoder_folder(loaded.manifest) == "encoder":
            encoder = in_precision(encoder, precision)
        else:
            encoder = open_encoder(root, loaded.manifest, device, precision)
        check_dimensions(encoder, loaded.embeddings)
        bundle = cls(root, encoder, store, loaded, {"device": device, "precision": precision})
        bundle.head()  # fitted now where the store keeps no head: the first request does not wait for it
        return bundle

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
            self.changes.sync()
            return self.rows.example(example_id)

    # --- prediction (the head: cea.bundle.refit) -------------------------------------------
    def predict(self, texts: list[str], k: int | None = None, threshold: float | None = None) -> list[Prediction]:
        """Label, score, evidence and the k neighbours (id, label, text, cosine) of each text, decided by the
        classifier (:meth:`cea.knn.decision.Classifier.decide`: the head's probability, mixed with the vote of the k
        nearest live examples, or that vote alone). Where the evidence (score times the nearest cosine) falls below
        ``threshold`` (default: the bundle's, if any; 0: never) the label is ``unknown`` and ``closest`` the best."""
        return self.predict_many([PredictRequest(texts, k, threshold)])[0]

    def predict_encoded(
        self, texts: list[str], vectors: np.ndarray, k: int | None = None, threshold: float | None = None
    ) -> list[Prediction]:
        """:meth:`predict` of ``texts`` encoded already: ``vectors``, their embeddings by the encoder in place (a
        service's kept traffic, ``cea predict``'s batches)."""
        return self.predict_many([PredictRequest(texts, k, threshold)], vectors)[0]

    def current(self, texts: list[str], vectors: np.ndarray, version: int | None) -> np.ndarray:
        """``vectors`` of ``texts`` where the encoder of ``version`` is still in place (or ``version`` is None), else
        the texts encoded again by the one that replaced it (under the lock: once, after a renewal)."""
        return vectors if version is None or version == self.encoder_version else self.embed(texts)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 embeddings of ``texts`` by the bundle's encoder, in the passes that cost least."""
        most = PREDICT_PASS if self.pass_overhead else None  # on a GPU one pass of the device's size (encode_batch)
        return encode(self.encoder, texts, batch_size=most, overhead=self.pass_overhead).astype(np.float32)

    def predict_many(
        self, requests: list[PredictRequest], vectors: np.ndarray | None = None, version: int | None = None
    ) -> list[list[Prediction]]:
        """:meth:`predict` of several requests (:class:`cea.bundle.requests.PredictRequest`) at once: one encode of all
        their texts, one search and one decision (per distinct ``k``), each request's predictions in its own list (what
        :class:`cea.service.batching.Batcher` calls for concurrent requests). ``vectors``: the texts' embeddings
        (:meth:`embed`), where the caller encoded them with others, by the encoder of ``version``
        (:attr:`encoder_version`, read before encoding; None: the one in place). While every example is a label's
        name, the nearest name answers, centred on the mean of the texts asked about (:mod:`cea.knn.names`)."""
        texts = [text for request in requests for text in request.texts]
        if vectors is None:
            version, vectors = self.encoder_version, self.embed(texts)
        starts = np.cumsum([0] + [len(request.texts) for request in requests])
        with self.lock:
            self.changes.sync()
            vectors = self.current(texts, vectors, version)
            if len(self.index) == 0:
                raise CeaError("the bundle holds no examples; add some first")
            ks = np.repeat(
                [min(request.k or self.classifier.k, len(self.index)) for request in requests], np.diff(starts)
            )
            self.asked.add(vectors)
            if self.names_only:
                return self._by_names(requests, starts, ks, vectors)
            sims, rows = self.index.search(vectors, int(ks.max()))
            held = self.rows  # what the decision reads, held from here: its lists only grow (an install makes new
            # rows), so the decision and the answers are built without holding the bundle
            neighbour_labels = np.fromiter(
                (held.labels[r] if r >= 0 else None for r in rows.flat), object, rows.size
            ).reshape(rows.shape)
            head = self.refit.serving(held.counts)
            seen = self.refit.seen  # rows from here on came after the head: their neighbours' vote answers
            ids = held.ids  # a buffer that an addition may replace by a larger one
            bundle_threshold = self.unknown_threshold
            # the labels' counts, for the evidence of small classes (cea.knn.unknown.count_curve)
            counts = dict(held.counts) if self.classifier.count_curve and not self.multi_label else None
        chosen = np.empty(len(texts), dtype=object)
        scores, strength = np.zeros(len(texts)), np.zeros(len(texts))
        sets = [None] * len(texts) if self.multi_label else None  # a multi-label bundle's ranked labels per text
        for k in np.unique(ks):
            at = np.flatnonzero(ks == k)
            decision = self.classifier.decide(
                head, vectors[at], sims[at, :k], neighbour_labels[at, :k], counts, fresh=rows[at, :k] >= seen
            )
            chosen[at], scores[at] = decision.labels, decision.scores
            strength[at] = decision.evidence
            for i, a in zip(at, decision.ranked or []):
                sets[i] = a
        return [
            predictions(
                chosen[a:b],
                scores[a:b],
                strength[a:b],
                bundle_threshold if request.threshold is None else request.threshold,
                sims[a:b, : ks[a]],
                rows[a:b, : ks[a]],
                ids,
                held.texts,
                held.labels,
                None if sets is None else sets[a:b],
            )
            for request, a, b in zip(requests, starts[:-1], starts[1:])
        ]

    def _by_names(self, requests, starts: np.ndarray, ks: np.ndarray, vectors: np.ndarray) -> list[list[Prediction]]:
        """:meth:`predict_many`'s answers while every example is a label's name (under the lock): the nearest name,
        centred on the texts asked about (:func:`cea.knn.names.nearest_names`); the neighbours are the nearest names
        in the centred space, with their centred cosines."""
        live = self.rows.live()
        nearest = nearest_names(live.embeddings, live.labels, vectors, self.asked.centre, int(ks.max()))
        rows, sims = live.rows[nearest.rows], nearest.cosines  # the names' rows in the index
        return [
            predictions(
                nearest.chosen[a:b],
                nearest.scores[a:b],
                evidence(nearest.scores[a:b], sims[a:b, 0]),
                self.unknown_threshold if request.threshold is None else request.threshold,
                sims[a:b, : ks[a]],
                rows[a:b, : ks[a]],
                self.rows.ids,
                self.rows.texts,
                self.rows.labels,
            )
            for request, a, b in zip(requests, starts[:-1], starts[1:])
        ]

    unknown_threshold = property(
        lambda self: self.classifier.unknown_threshold,
        doc="The evidence below which the bundle answers unknown (None: it never does).",
    )

    @property
    def label_counts(self) -> dict[str, int]:
        with self.lock:
            self.changes.sync()
            if not self.multi_label:
                return dict(sorted(self.rows.counts.items()))  # labels are str (str() on the way in)
            names = Counter()
            for labels, count in self.rows.counts.items():
                names.update(dict.fromkeys(labels, count))
            return dict(sorted(names.items()))

    def head(self):
        """The linear head of the live examples, refitted here if stale (:meth:`cea.bundle.refit.HeadRefit.head`)."""
        return self.refit.head()

    def serving_head(self):
        """The head a prediction uses now, never fitted here but where there is none yet: a refit starts in the
        background where the examples changed since (:meth:`cea.bundle.refit.HeadRefit.serving`)."""
        with self.lock:
            self.changes.sync()
            return self.refit.serving(self.rows.counts)

    on_refit = property(
        lambda self: self.refit.on_refit,
        lambda self, told: setattr(self.refit, "on_refit", told),
        doc="on_refit(seconds, lags): told of each head installed (lags: seconds since each change)",
    )
