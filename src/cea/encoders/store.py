"""One embedding store: each text's embedding under a state of an encoder, computed once and found again.

What it does
    :class:`EmbeddingStore` keeps rows by ``(state, text)``: a state names what encoded them (the fingerprint of a
    model's weights as they are now, :meth:`EmbeddingStore.state`; or a name such as a probe's
    ``FINGERPRINT-L3-mean`` for a layer and pooling, or a fine-tuned encoder's name before it is trained). In memory
    within a process (a training run's judgements, ``cea fit``'s candidates); with a ``root`` also on disk across
    runs (the probe's layers, ``cea discover``'s spaces, a training run's final embeddings that ``cea analyze`` and
    the report read): lookups read the disk on a miss, :meth:`EmbeddingStore.save` writes a state's new rows.
    :meth:`EmbeddingStore.encode` encodes only the distinct texts a state lacks and counts what it encoded
    (``encoded``, ``repeated``: ``cea fit`` writes them in ``fit.json``); :func:`embed` keeps every layer and pooling
    of a probe (:func:`cea.encoders.embeddings.encode_layers`) as the states of :func:`layer_state`.

What it expects
    Texts as strings; a model with sentence-transformers' ``encode`` (:func:`cea.encoders.embeddings.encode`).

When to use it
    Wherever a text may be encoded twice by the same weights. sentence-transformers keeps nothing between calls and
    a dictionary keyed by the whole list misses every subset and reordering, hence this module.

Example
    >>> store = EmbeddingStore(root=cache_dir() / "store")
    >>> state = store.state(model)
    >>> x = store.encode(model, texts, state=state)   # encoded once; the same texts again are read
    >>> store.save(state)                             # on disk for the next run
"""

from __future__ import annotations

import hashlib
import itertools
import uuid
from collections import Counter
from pathlib import Path

import numpy as np

from ..errors import CeaError
from ..paths import atomic_path, cache_dir
from .build import POOLINGS, num_layers
from .embeddings import encode as encode_texts, encode_layers, forget_fingerprint, model_fingerprint

RUN_EMBEDDINGS = "embeddings"  # RUN/embeddings: a training run's final embeddings
PART = "part-{}.npz"  # a state's rows on disk: several parts (each save adds one), keys (n x 16 bytes) and vectors


def text_key(text: str) -> bytes:
    """A text's 16-byte key (BLAKE2b of its UTF-8 bytes)."""
    return hashlib.blake2b(str(text).encode("utf-8"), digest_size=16).digest()


class EmbeddingStore:
    """Embeddings by state and text (see the module): in memory, and on disk under ``root`` (``True``: the user's
    cache, ``~/.cache/cea/store``; None: memory only)."""

    def __init__(self, root: str | Path | bool | None = None):
        self.root = cache_dir() / "store" if root is True else (Path(root) if root else None)
        self._rows: dict[str, dict[bytes, np.ndarray]] = {}
        self._read: set[str] = set()  # states whose parts on disk were read
        self._unsaved: dict[str, set[bytes]] = {}
        self.encoded: Counter = Counter()  # texts encoded per state
        self._encoded_keys: dict[str, set[bytes]] = {}

    @staticmethod
    def state(model) -> str:
        """The fingerprint of ``model``'s weights as they are now (taken afresh: training changes them in place); an
        object that is not a SentenceTransformer: its identity."""
        if not hasattr(model, "tokenizer") or not hasattr(model, "__getitem__"):
            return f"object-{id(model)}"
        forget_fingerprint(model)
        return model_fingerprint(model)

    def repeated(self, state: str) -> int:
        """Texts this store encoded more than once under ``state`` (0: each text once)."""
        return self.encoded[state] - len(self._encoded_keys.get(state, ()))

    def _state_rows(self, state: str) -> dict[bytes, np.ndarray]:
        rows = self._rows.setdefault(state, {})
        if self.root is not None and state not in self._read:
            self._read.add(state)
            for part in sorted((self.root / state).glob(PART.format("*"))):
                try:
                    with np.load(part, allow_pickle=False) as data:
                        rows.update(zip(map(bytes, data["keys"]), data["vectors"]))
                except (ValueError, OSError, KeyError):  # damaged: dropped, its rows encoded again
                    part.unlink(missing_ok=True)
        return rows

    def get(self, state: str, texts) -> np.ndarray | None:
        """The rows of ``texts`` under ``state`` (float32, in order), or None where any is missing."""
        rows = self._state_rows(state)
        keys = [text_key(t) for t in texts]
        return _stacked([rows[k] for k in keys]) if all(k in rows for k in keys) else None

    def put(self, state: str, texts, embeddings) -> None:
        """Keep ``embeddings`` (one row per text) under ``state``."""
        pairs = [(text_key(text), row) for text, row in zip(texts, np.asarray(embeddings, np.float32))]
        self._state_rows(state).update(pairs)
        self._unsaved.setdefault(state, set()).update(key for key, _ in pairs)

    def encode(self, model, texts, batch_size: int | None = None, state: str | None = None, encode=None) -> np.ndarray:
        """``texts``' rows by ``model`` under ``state`` (default: its weights now), the distinct texts the state lacks
        encoded once (by ``encode(model, texts, batch_size)``, default :func:`cea.encoders.embeddings.encode`)."""
        texts = [str(t) for t in texts]
        state = state or self.state(model)
        rows = self._state_rows(state)
        missing = list(dict.fromkeys(t for t in texts if text_key(t) not in rows))
        if missing:
            self.put(state, missing, (encode or encode_texts)(model, missing, batch_size))
            self.count(state, missing)
        return self.get(state, texts)

    def count(self, state: str, texts) -> None:
        """Count ``texts`` as encoded under ``state`` (:attr:`encoded`, :meth:`repeated`)."""
        texts = list(texts)
        self.encoded[state] += len(texts)
        self._encoded_keys.setdefault(state, set()).update(text_key(t) for t in texts)

    def save(self, state: str, root: str | Path | None = None) -> None:
        """Write ``state``'s rows not yet on disk as one more part under ``root`` (default: the store's; nothing
        without one). A training run keeps its final state in ``RUN/embeddings`` (:func:`run_store`)."""
        root = Path(root) if root else self.root
        keys = sorted(self._unsaved.pop(state, ()) if root == self.root else self._rows.get(state, ()))
        if root is None or not keys:
            return
        target = root / state / PART.format(uuid.uuid4().hex[:12])
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(target) as tmp, open(tmp, "wb") as fh:
            np.savez(
                fh,
                keys=np.frombuffer(b"".join(keys), np.uint8).reshape(-1, 16),
                vectors=_stacked([self._rows[state][k] for k in keys]),
            )


def run_store(model) -> EmbeddingStore:
    """The store a training run kept its final embeddings in (``RUN/embeddings`` beside ``RUN/model``), where ``model``
    is a run's model folder; else the user's on disk."""
    beside = Path(str(model)).parent / RUN_EMBEDDINGS
    return EmbeddingStore(root=beside if Path(str(model)).is_dir() and beside.is_dir() else True)


def _stacked(rows: list[np.ndarray]) -> np.ndarray:
    return np.stack(rows).astype(np.float32, copy=False) if rows else np.zeros((0, 0), np.float32)


def layer_state(model_fp: str, layer: int, pooling: str) -> str:
    """The store's name (:class:`cea.encoders.store.EmbeddingStore`) of a model's ``layer`` pooled by ``pooling``."""
    return f"{model_fp}-L{layer}-{pooling}"


def embed(
    model,
    texts: list[str],
    layers: list[int] | None = None,
    poolings=("mean",),
    cache: EmbeddingStore | None | bool = True,
    batch_size: int | None = None,
    progress: bool = True,
) -> dict[tuple[int, str], np.ndarray]:
    """Embeddings for every (layer, pooling; default: every hidden state), read from the store (``cache``: True the
    user's, on disk; a store; None or False: none) or encoded once in one pass and saved there."""
    layers = list(range(num_layers(model) + 1)) if layers is None else list(layers)
    if unknown := [p for p in poolings if p not in POOLINGS]:
        raise CeaError(f"unknown pooling {unknown[0]!r}; use one of {', '.join(POOLINGS)}")
    store = EmbeddingStore(root=True) if cache is True else (cache or None)
    mfp = model_fingerprint(model)
    found = {
        key: store.get(layer_state(mfp, *key), texts) if store else None for key in itertools.product(layers, poolings)
    }
    result = {key: hit for key, hit in found.items() if hit is not None}
    missing = [key for key, hit in found.items() if hit is None]
    if missing:
        todo = list(dict.fromkeys(texts)) if store else texts  # with a store, each distinct text once
        fresh = encode_layers(
            model,
            todo,
            sorted({m[0] for m in missing}),
            sorted({m[1] for m in missing}),
            batch_size=batch_size,
            progress=progress,
        )
        for key in missing:
            if not store:
                result[key] = fresh[key]
                continue
            state = layer_state(mfp, *key)
            store.put(state, todo, fresh[key])
            store.count(state, todo)
            store.save(state)
            result[key] = store.get(state, texts)
    return result
