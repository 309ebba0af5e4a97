"""A kNN classifier bundle: an encoder, labelled reference examples and an index, in one folder.

Layout (no pickle anywhere: JSON, .npy read with ``allow_pickle=False``, safetensors, FAISS's own
index format)::

    BUNDLE/manifest.json       format, generation, versions, fingerprints, index settings, checksums
    BUNDLE/encoder/            a sentence-transformers folder
    BUNDLE/gen-N/embeddings.npy  unit-length float32 reference embeddings
    BUNDLE/gen-N/index.faiss   the FAISS index (flat, hnsw, ivf; none for exact search)
    BUNDLE/gen-N/ids.npy       int64 example ids
    BUNDLE/gen-N/examples.json labels and texts, in the order of the embeddings
    BUNDLE/gen-N/head.npz      the linear head's weights (classifier "linear"; plain arrays, no pickle)
    BUNDLE/wal.jsonl           changes since generation N (add, remove, relabel), one JSON line each

Changes are durable and atomic: a change is one line appended to the write-ahead log and fsync'd
before the call returns; a line torn by a crash fails its checksum and is ignored (it was never
acknowledged). ``compact()`` writes generation N+1 beside N, fsyncs it, then replaces
``manifest.json`` in one rename; log lines of older generations are skipped on replay, so a crash
at any point leaves either the old or the new state. Loading verifies every checksum.

The classifier is a linear head on the reference embeddings (:mod:`cea.knn.head`, the default; its
probabilities optionally mixed with the kNN vote's) or the kNN vote alone. A change marks the head
stale; the next prediction refits it from the live embeddings (from the previous weights while the
labels stay the same, from scratch after a new one), so added examples and classes count from then on.
With a threshold in the manifest (``unknown``: given, or calibrated on held-out references) a prediction
whose evidence falls below it is answered ``unknown`` (:mod:`cea.serving.decision`).

This module is the living bundle (loading, the log, changes, compaction, prediction); a new folder is written by
:mod:`cea.serving.create`, texts and labels are checked by :mod:`cea.serving.examples`, answers are decided by
:mod:`cea.serving.decision` and the files laid out by :mod:`cea.serving.storage`.

No peer tool ships a classifier that grows without retraining, hence this module.
"""

from __future__ import annotations

import base64
import json
import shutil
import threading
from collections import Counter
from pathlib import Path

import numpy as np

from ..errors import CeaError
from ..knn import build_index
from ..knn.head import FILE as HEAD_FILE
from ..knn.head import C as HEAD_C
from ..knn.head import LinearHead, fit_head, fit_label_head
from ..knn.index import load_index
from ..paths import atomic_path, read_json, write_json
from .create import BACKENDS, write_bundle
from .decision import Prediction, answer, decide, decide_sets
from .examples import encode, normalise_labels
from .storage import FORMAT, WAL, append_record, checksums, fsync_dir, read_log, sha256, write_generation

class Bundle:
    """Load with :meth:`Bundle.load`, create with :meth:`Bundle.create`; thread-safe mutations."""

    def __init__(self, root: Path, manifest: dict, encoder, index, ids: np.ndarray, labels: list[str],
                 texts: list[str]):
        self.root, self.manifest, self.encoder = root, manifest, encoder
        # every row since the generation was written, in the index's order; removed rows stay as
        # tombstones (index.remove) until compact()
        self.multi_label = bool(manifest.get("multi_label"))  # each example has a tuple of labels
        labels = [tuple(x) for x in labels] if self.multi_label else list(labels)
        self.index, self._ids, self._labels, self._texts = index, ids, labels, list(texts)
        self.lock = threading.RLock()
        self.next_id = int(ids.max()) + 1 if len(ids) else 0
        self._wal = None
        self._view = None
        self._head, self._head_stale = None, False

    # --- the live examples (tombstones left out) ---------------------------------------------
    def _live(self) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
        """Embeddings, ids, labels and texts of the live rows, cached until the next change."""
        if self._view is None:
            rows = np.flatnonzero(self.index.alive)
            self._view = (self.index.vectors[rows], self._ids[rows], [self._labels[r] for r in rows],
                          [self._texts[r] for r in rows])
        return self._view

    embeddings = property(lambda self: self._live()[0])
    ids = property(lambda self: self._live()[1])
    labels = property(lambda self: self._live()[2])
    texts = property(lambda self: self._live()[3])

    # --- creating and loading ----------------------------------------------------------------
    @classmethod
    def create(cls, output: str | Path, model: str, texts: list[str], labels: list, k: int = 5, batch_size: int = 64,
               progress: bool = True, index: str = "auto", index_params: dict | None = None, backend: str = "torch",
               device: str | None = None, precision: str = "fp32", weights: str = "uniform",
               classifier: str = "linear", C: float = HEAD_C, knn_share: float = 0.0,
               unknown_rate: float | None = None, unknown_threshold: float | None = None) -> Bundle:
        """Encode ``texts`` with ``model``, write a new bundle folder (refused if it exists) and open it;
        :func:`cea.serving.create.write_bundle` describes the parameters."""
        write_bundle(output, model, texts, labels, k=k, batch_size=batch_size, progress=progress, index=index,
                     index_params=index_params, backend=backend, device=device, precision=precision, weights=weights,
                     classifier=classifier, C=C, knn_share=knn_share, unknown_rate=unknown_rate,
                     unknown_threshold=unknown_threshold)
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
        generation = f"gen-{manifest['generation']}"
        if verify:
            for name, digest in manifest["files"].items():
                file = root / name
                if not file.exists():
                    raise CeaError(f"bundle file {name} is missing; the bundle is damaged, rebuild or restore it")
                if sha256(file) != digest:
                    raise CeaError(f"bundle file {name} does not match its checksum; the bundle is damaged, "
                                   "rebuild or restore it")
        backend = manifest.get("backend", "torch")
        if backend not in BACKENDS:
            raise CeaError(f"{root} uses encoder backend {backend!r}, unknown to this cea; upgrade cea")
        if BACKENDS[backend]:
            from ..encoders.onnx import OnnxEncoder

            encoder = OnnxEncoder(root / "encoder", BACKENDS[backend])
        else:
            encoder = load_encoder(str(root / "encoder"), device=device, precision=precision)
        embeddings = np.load(root / generation / "embeddings.npy", allow_pickle=False)
        ids = np.load(root / generation / "ids.npy", allow_pickle=False)
        examples = json.loads((root / generation / "examples.json").read_text())
        bundle = cls(root, manifest, encoder, load_index(root / generation, manifest.get("index", {}), embeddings),
                     ids, examples["labels"], examples["texts"])
        if (root / generation / HEAD_FILE).exists():
            bundle._head = LinearHead.load(root / generation)
        dim = encoder.get_embedding_dimension() if hasattr(encoder, "get_embedding_dimension") else None
        if dim is not None and dim != embeddings.shape[1]:
            raise CeaError(f"the bundle's embeddings have {embeddings.shape[1]} dimensions but its encoder gives "
                           f"{dim}; rebuild the bundle with cea bundle")
        bundle._replay()
        return bundle

    # --- the write-ahead log -----------------------------------------------------------------
    def _replay(self) -> None:
        for record in read_log(self.root / WAL):
            if record.get("gen") == self.manifest["generation"]:  # lines of older generations are skipped
                self._apply(record)

    def _commit(self, record: dict) -> None:
        """Append ``record`` to the log (fsync'd: durable from here on), then apply it."""
        if self._wal is None:
            self._wal = open(self.root / WAL, "ab")
        append_record(self._wal, {**record, "gen": self.manifest["generation"]})
        self._apply(record)

    def _apply(self, record: dict) -> None:
        op = record["op"]
        if op == "add":
            vectors = np.frombuffer(base64.b64decode(record["embeddings"]), dtype=np.float32)
            vectors = vectors.reshape(len(record["ids"]), -1)
            self.index.add(vectors)
            self._ids = np.concatenate([self._ids, np.asarray(record["ids"], dtype=np.int64)])
            self._labels += [tuple(x) for x in record["labels"]] if self.multi_label else list(record["labels"])
            self._texts += list(record["texts"])
            self.next_id = max(self.next_id, max(record["ids"]) + 1)
        elif op == "remove":
            self.index.remove(np.flatnonzero(np.isin(self._ids, record["ids"])))
        elif op == "relabel":
            for example_id, label in zip(record["ids"], record["labels"]):
                self._labels[self._row(example_id)] = tuple(label) if self.multi_label else label
        self._view, self._head_stale = None, True

    def _row(self, example_id: int) -> int:
        rows = np.flatnonzero((self._ids == int(example_id)) & self.index.alive)
        if not len(rows):
            self._known([example_id])
        return int(rows[0])

    def close(self) -> None:
        """Close the log file (every change is already on disk)."""
        with self.lock:
            if self._wal is not None:
                self._wal.close()
                self._wal = None

    def __enter__(self) -> Bundle:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_wal", None) is not None:
            self._wal.close()

    # --- changes -----------------------------------------------------------------------------
    def add(self, texts: list[str], labels: list[str]) -> list[int]:
        """Add labelled examples (new labels welcome); durable when this returns their ids."""
        if len(texts) != len(labels) or not texts:
            raise CeaError(f"add needs texts with labels; got {len(texts)} texts and {len(labels)} labels")
        labels = self._stored(labels)
        vectors = encode(self.encoder, texts)
        with self.lock:
            ids = list(range(self.next_id, self.next_id + len(texts)))
            self._commit({"op": "add", "ids": ids, "labels": labels, "texts": list(texts),
                          "embeddings": base64.b64encode(vectors.astype(np.float32).tobytes()).decode()})
            return ids

    def remove(self, ids: list[int]) -> None:
        with self.lock:
            self._known(ids)
            self._commit({"op": "remove", "ids": [int(i) for i in ids]})

    def relabel(self, ids: list[int], labels: list[str]) -> None:
        labels = self._stored(labels)
        with self.lock:
            self._known(ids)
            self._commit({"op": "relabel", "ids": [int(i) for i in ids], "labels": labels})

    def _stored(self, labels) -> list:
        """Labels as the log stores them: names, or (multi-label bundles) lists of names."""
        labels = normalise_labels(labels, self.multi_label)
        return [list(x) for x in labels] if self.multi_label else labels

    def get(self, example_id: int) -> dict:
        """One example by id: its label (a list of labels in a multi-label bundle) and text."""
        with self.lock:
            row = self._row(example_id)
            label = list(self._labels[row]) if self.multi_label else self._labels[row]
            return {"id": int(example_id), "label": label, "text": self._texts[row]}

    def _known(self, ids) -> None:
        missing = sorted({int(i) for i in ids} - set(self.ids.tolist()))
        if missing:
            raise CeaError(f"unknown example id(s) {', '.join(map(str, missing[:5]))}; GET /labels or the "
                           "bundle's examples list the ids")

    def compact(self) -> None:
        """Fold the log into a new generation (atomic: one rename of manifest.json)."""
        with self.lock:
            old = self.manifest["generation"]
            new = old + 1
            info = self.manifest.get("index", {})
            index, built = build_index(self.embeddings, info.get("kind", "exact"), info.get("params"),
                                       k=self.manifest.get("k", 5))
            write_generation(self.root / f"gen-{new}", self.embeddings, self.ids, self.labels, self.texts, index,
                             self.head())
            files = {k: v for k, v in self.manifest["files"].items() if not k.startswith("gen-")}
            files.update(checksums(self.root, [f"gen-{new}"]))
            manifest = {**self.manifest, "generation": new, "files": files, "index": built}
            write_json(self.root / "manifest.json", manifest)
            fsync_dir(self.root)
            self.manifest = manifest
            _, self._ids, self._labels, self._texts = self._live()
            self.index, self._view = index, None
            self.close()
            with atomic_path(self.root / WAL) as tmp:
                Path(tmp).touch()
            shutil.rmtree(self.root / f"gen-{old}", ignore_errors=True)

    # --- prediction --------------------------------------------------------------------------
    def head(self) -> LinearHead | None:
        """The linear head of the live examples, refitted here if they changed since it was fitted; None for a
        kNN bundle, or while fewer than two labels are left in a single-label one (the kNN vote decides then)."""
        with self.lock:
            if self.manifest.get("classifier", {}).get("kind", "knn") != "linear":
                return None
            if self._head is None or self._head_stale:
                labels, C = self.labels, self.manifest["classifier"]["C"]
                if self.multi_label:
                    self._head = fit_label_head(self.embeddings, labels, C, previous=self._head)
                elif len(set(labels)) < 2:
                    return None
                else:
                    self._head = fit_head(self.embeddings, labels, C, previous=self._head)
                self._head_stale = False
            return self._head

    def predict(self, texts: list[str], k: int | None = None, threshold: float | None = None) -> list[Prediction]:
        """Label, score, evidence and the k neighbours (id, label, text, cosine) of each text
        (:func:`cea.serving.decision.decide`).

        A linear bundle takes the most probable label of the head (mixed with the kNN vote's shares by the
        manifest's ``knn_share``) and its probability as the score; a kNN bundle the majority of the k nearest live
        examples and its share of the votes. Where the evidence (score times the nearest cosine) falls below
        ``threshold`` (default: the bundle's, if it has one; 0: never) the label is ``unknown`` and ``closest``
        names the best class.
        """
        if threshold is None:
            threshold = self.unknown_threshold
        vectors = encode(self.encoder, texts)
        with self.lock:
            if len(self.index) == 0:
                raise CeaError("the bundle holds no examples; add some first")
            sims, rows = self.index.search(vectors, min(k or self.manifest.get("k", 5), len(self.index)))
            neighbour_labels = np.empty(rows.shape, dtype=object)
            for (i, j), r in np.ndenumerate(rows):
                neighbour_labels[i, j] = self._labels[r] if r >= 0 else None
            if self.multi_label:
                answers, scores, strength = decide_sets(vectors, sims, neighbour_labels, self.head(),
                                                        self.manifest["classifier"]["label_threshold"])
                chosen = [a[0][0] for a in answers]
            else:
                chosen, scores, strength = decide(vectors, sims, neighbour_labels, self.head(),
                                                  self.manifest.get("classifier", {}),
                                                  self.manifest.get("weights", "uniform"))
            out = []
            for i, (label, closest) in enumerate(answer(chosen, scores, strength, threshold)):
                keep = [(s_, r) for s_, r in zip(sims[i].tolist(), rows[i].tolist()) if r >= 0]
                labels = None
                if self.multi_label:
                    labels = [] if closest else [{"label": name, "score": round(float(share), 6)}
                                                 for name, share in answers[i]]
                out.append(Prediction(label, round(float(scores[i]), 6),
                                      [{"id": int(self._ids[r]), "text": self._texts[r], "cosine": round(s_, 6),
                                        "label": list(self._labels[r]) if self.multi_label else self._labels[r]}
                                       for s_, r in keep],
                                      round(float(strength[i]), 6), closest, labels))
            return out

    @property
    def unknown_threshold(self) -> float | None:
        """The evidence below which the bundle answers unknown (None: it never does)."""
        return self.manifest.get("unknown", {}).get("threshold")

    @property
    def label_counts(self) -> dict[str, int]:
        with self.lock:
            names = [x for labels in self.labels for x in labels] if self.multi_label else self.labels
            return dict(sorted(Counter(names).items()))  # labels are str (str() on the way in)
