"""The space ``cea discover`` clusters in: every text encoded once, by the encoder fine-tuned on the labelled texts
and, beside it, the frozen one (or by the frozen one alone), each encoder's embeddings cached.

What it does
    :func:`discovery_space` fine-tunes the encoder where asked (:mod:`cea.discover.tuning`), encodes every text with it
    and, with ``keep_frozen``, with the frozen one, side by side; :func:`encode_texts` encodes each distinct text once
    through the embedding store on disk (:class:`cea.encoders.store.EmbeddingStore`), so a second run reads them.

What it expects
    Texts, their labels (None: unlabelled) and a model's name or folder (a loaded model: encoded as it is).

When to use it
    Through :func:`cea.discover.discover`; whitening, the neighbour contrast and the clustering follow there.
"""

from __future__ import annotations

import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from ..encoders import EmbeddingStore, load_encoder, model_fingerprint
from ..encoders.embeddings import encode
from ..knn.search import normalize
from .tuning import fine_tune as tune, labelled_part, tuned_fingerprint


def encode_texts(
    model,
    texts: list[str],
    batch_size: int | None = None,
    cache: bool = True,
    progress: bool = False,
    fingerprint: str | None = None,
) -> np.ndarray:
    """Unit-length embeddings of ``texts`` (module docstring; the store on disk with ``cache``). ``fingerprint``: the
    store's name for the model instead of its weights' hash (a fine-tuned encoder's: :func:`tuned_fingerprint`)."""
    store = EmbeddingStore(root=cache or None)
    state = fingerprint or model_fingerprint(model)

    def encoded(model, texts, batch_size):
        return encode(model, texts, batch_size=batch_size, progress=progress)

    x = store.encode(model, [str(t) for t in texts], batch_size, state, encoded)
    store.save(state)
    return normalize(x)


def discovery_space(
    texts: list[str],
    labels: list,
    model,
    fine_tune: bool,
    keep_frozen: bool = True,
    seed: int = 0,
    batch_size: int | None = None,
    cache: bool = True,
    device: str | None = None,
    say=None,
    progress: bool = False,
    training_progress: bool | str = False,
    seconds: dict | None = None,
    report_to: str = "none",
) -> tuple[np.ndarray, str]:
    """The rows :func:`cea.discover.discover` clusters and the fingerprint of the space they are in (the frozen
    encoder's weights' hash, the trained one's name, or both joined by ``+``); ``seconds`` (a dict) gets
    ``encode_frozen``, ``fine_tune`` (0 where read from the cache) and ``encode``."""
    say = say or (lambda line: None)
    seconds = {} if seconds is None else seconds
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cea-discover-") if fine_tune else nullcontext() as work:
        x, tuned, frozen, fingerprint = None, None, None, None
        if fine_tune:
            base = load_encoder(model, device=device)
            fingerprint = tuned = tuned_fingerprint(model_fingerprint(base), *labelled_part(texts, labels), seed=seed)
            if keep_frozen:
                say(f"encoding {len(set(texts))} distinct texts with the frozen encoder")
                frozen = encode_texts(base, texts, batch_size=batch_size, cache=cache, progress=progress)
                fingerprint = f"{model_fingerprint(base)}+{tuned}"
                seconds["encode_frozen"], t0 = time.perf_counter() - t0, time.perf_counter()
            del base
            hit = EmbeddingStore(root=True).get(tuned, [str(t) for t in texts]) if cache else None
            x = None if hit is None else normalize(hit)
            if x is not None:
                say(f"the fine-tuned encoder's embeddings read from the cache ({tuned})")
                seconds["fine_tune"], t0 = 0.0, time.perf_counter()
            else:
                say(f"fine-tuning {model} on the {sum(lab is not None for lab in labels)} labelled texts")
                model = tune(
                    model,
                    *labelled_part(texts, labels),
                    work=work,
                    seed=seed,
                    device=device,
                    progress=training_progress,
                    report_to=report_to,
                )
                seconds["fine_tune"], t0 = time.perf_counter() - t0, time.perf_counter()
        if x is None:
            encoder = load_encoder(model, device=device) if isinstance(model, (str, Path)) else model
            say(f"encoding {len(set(texts))} distinct texts")
            x = encode_texts(encoder, texts, batch_size=batch_size, cache=cache, progress=progress, fingerprint=tuned)
            fingerprint = fingerprint or model_fingerprint(encoder)
        if frozen is not None:  # side by side, the row unit-length again
            x = np.hstack([frozen, x]) / np.sqrt(2)
    seconds["encode"] = time.perf_counter() - t0
    return x, fingerprint
