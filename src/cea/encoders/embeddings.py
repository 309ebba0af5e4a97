"""Embeddings of every layer from one forward pass, cached on disk.

sentence-transformers' ``encode`` returns the output of the last module only; probing wants every
hidden state with several poolings, so this module runs the underlying transformer once with
``output_hidden_states=True`` and pools each layer itself (mean pooling identical to
sentence-transformers' ``Pooling``). Results are cached as ``.npy`` under
``~/.cache/cea/embeddings/<model fingerprint>/<text fingerprint>/L<layer>-<pooling>.npy``.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import torch

from ..errors import CeaError
from ..paths import cache_dir, sha256_chunks, write_npy
from .build import POOLINGS, num_layers


def model_fingerprint(model) -> str:
    """Hash of the weights, tokenizer and sequence length: equal fingerprints encode equally."""
    cached = getattr(model, "_cea_fingerprint", None)
    if cached:
        return cached
    body = getattr(model[0], "auto_model", None) or model  # a transformer, or e.g. a bag of embeddings
    tokenizer = model.tokenizer
    size = len(tokenizer) if hasattr(tokenizer, "__len__") else tokenizer.get_vocab_size()

    def parts():
        yield type(body if body is not model else model[0]).__name__.encode()
        for name, tensor in body.state_dict().items():
            yield name.encode()
            yield tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()
        yield f"{type(tokenizer).__name__}:{size}:{getattr(model, 'max_seq_length', None)}".encode()
    fp = sha256_chunks(parts())[:16]
    model._cea_fingerprint = fp
    return fp


def encode(model, texts, batch_size: int = 64) -> np.ndarray:
    """The embeddings a model is judged by: its own ``encode`` (its pooling, length-sorted batches)."""
    return model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True)


def normalize(x) -> np.ndarray:
    """Embeddings ``x`` (a 2-d array) as contiguous float32 rows of unit length (a zero row stays zero)."""
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    if x.ndim != 2:
        raise CeaError(f"expected a 2-d array of embeddings, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def text_fingerprint(texts: list[str]) -> str:
    return sha256_chunks(text.encode("utf-8") + b"\x1f" for text in texts)[:16]


def _pool(hidden: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """cls, mean (as sentence-transformers' ``Pooling``) or max (the ONNX encoder's third mode)."""
    if pooling == "cls":
        return hidden[:, 0]
    m = mask.unsqueeze(-1).to(hidden.dtype)
    if pooling == "max":
        return hidden.masked_fill(m == 0, -1e9).max(1).values
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


@torch.inference_mode()
def encode_layers(model, texts: list[str], layers: list[int], poolings: list[str] = ("mean",),
                  batch_size: int = 64, progress: bool = True) -> dict[tuple[int, str], np.ndarray]:
    """Pool the hidden states ``layers`` (0 = embedding layer) of ``texts`` in one forward pass.

    Texts are sorted by length so that batches carry little padding; the output keeps the input
    order. Returns ``{(layer, pooling): float32 array of shape (len(texts), dim)}``.
    """
    from tqdm.auto import tqdm

    model.eval()
    body = model[0]
    order = np.argsort([-len(t) for t in texts], kind="stable")
    out = {(layer, p): None for layer in layers for p in poolings}
    chunks = []
    for start in tqdm(range(0, len(texts), batch_size), desc="encode", unit="batch", disable=not progress,
                      leave=False):
        batch = [texts[i] for i in order[start:start + batch_size]]
        features = body.preprocess(batch)
        inputs = {k: v.to(model.device) for k, v in features.items()
                  if k in ("input_ids", "attention_mask", "token_type_ids")}
        hidden = body.auto_model(**inputs, output_hidden_states=True).hidden_states
        chunks.append({key: _pool(hidden[key[0]], inputs["attention_mask"], key[1]).float().cpu().numpy()
                       for key in out})
    return {key: np.concatenate([c[key] for c in chunks])[np.argsort(order)] for key in out}  # input order


class EmbeddingCache:
    """On-disk cache of pooled layer embeddings, keyed by model, texts, layer and pooling."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root else cache_dir() / "embeddings"

    def path(self, model_fp: str, texts_fp: str, layer: int, pooling: str) -> Path:
        return self.root / model_fp / texts_fp / f"L{layer}-{pooling}.npy"

    def get(self, *key) -> np.ndarray | None:
        path = self.path(*key)
        try:
            return np.load(path, allow_pickle=False)
        except (ValueError, OSError):  # missing, or damaged: recomputed
            path.unlink(missing_ok=True)
            return None

    def put(self, array: np.ndarray, *key) -> None:
        write_npy(self.path(*key), array)


def embed(model, texts: list[str], layers: list[int] | None = None, poolings=("mean",),
          cache: EmbeddingCache | None | bool = True, batch_size: int = 64,
          progress: bool = True) -> dict[tuple[int, str], np.ndarray]:
    """Embeddings for every requested (layer, pooling), reading the cache and encoding the rest once.

    ``layers`` defaults to every hidden state (0 .. number of blocks).
    """
    layers = list(range(num_layers(model) + 1)) if layers is None else list(layers)
    for p in poolings:
        if p not in POOLINGS:
            raise CeaError(f"unknown pooling {p!r}; use one of {', '.join(POOLINGS)}")
    store = EmbeddingCache() if cache is True else (cache or None)
    mfp, tfp = model_fingerprint(model), text_fingerprint(texts)
    result: dict[tuple[int, str], np.ndarray] = {}
    missing = []
    for key in itertools.product(layers, poolings):
        hit = store.get(mfp, tfp, *key) if store else None
        if hit is not None and len(hit) == len(texts):
            result[key] = hit
        else:
            missing.append(key)
    if missing:
        fresh = encode_layers(model, texts, sorted({m[0] for m in missing}), sorted({m[1] for m in missing}),
                              batch_size=batch_size, progress=progress)
        for key in missing:
            result[key] = fresh[key]
            if store:
                store.put(fresh[key], mfp, tfp, *key)
    return result
