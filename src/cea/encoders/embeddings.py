"""Embeddings: a model's own (:func:`encode`, a static encoder's by hand), and every layer from one forward pass.

sentence-transformers' ``encode`` returns the last module's output only; probing wants every hidden state with
several poolings, so :func:`encode_layers` runs the transformer once with ``output_hidden_states=True`` and pools each
layer itself (:func:`cea.encoders.store.embed` keeps them in the embedding store).
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from ..errors import CeaError
from ..paths import sha256_chunks
from .build import is_static
from .device import encode_batch, encode_tokens

# where model_fingerprint keeps a model's fingerprint: an attribute of the model itself (a copy carries it), set, read
# and dropped here only (forget_fingerprint)
CACHED_FINGERPRINT = "_cea_fingerprint"


def model_fingerprint(model) -> str:
    """Hash of the weights, tokenizer and sequence length: equal fingerprints encode equally. Computed once and kept
    on the model until :func:`forget_fingerprint` drops it."""
    if cached := getattr(model, CACHED_FINGERPRINT, None):
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
    setattr(model, CACHED_FINGERPRINT, fp)
    return fp


def forget_fingerprint(model) -> None:
    """Drop ``model``'s kept fingerprint (:func:`model_fingerprint`), after its weights, tokenizer or max sequence
    length changed in place: the next one is computed afresh."""
    model.__dict__.pop(CACHED_FINGERPRINT, None)


# a forward pass's own cost in tokens of work on one thread (bench/service_parts.py; docs/decisions.md#serving)
PASS_OVERHEAD = {"torch": 50.0, "onnx": 5.0}


def encode(
    model,
    texts,
    batch_size: int | None = None,
    overhead: float | None = None,
    tokens: int | None = None,
    progress: bool = False,
) -> np.ndarray:
    """The embeddings a model is judged by, in input order: its own ``encode`` (its pooling) on passes of at most
    ``batch_size`` texts and ``tokens`` tokens (texts x the pass's longest: :func:`token_passes`), so that a pass of
    long texts holds fewer of them and memory is bounded whatever the texts' lengths. With ``overhead`` (a pass's own
    cost in tokens, :data:`PASS_OVERHEAD`), the passes within those bounds that cost least
    (:func:`least_cost_passes`), for a few texts of mixed lengths (a service's batch) that one pass would pad to the
    longest. Defaults: the device's (:func:`encode_batch`, :func:`encode_tokens`). A static encoder pads nothing: its
    own path (:func:`static_encode`). ``progress``: a bar over the passes."""
    texts, batch_size, tokens = list(texts), batch_size or encode_batch(model), tokens or encode_tokens(model)
    if is_static(model):
        return static_encode(model, texts)
    if getattr(model, "cuts_passes", False):  # tokenises once and cuts its own passes (cea.encoders.onnx)
        return model.encode(
            texts,
            batch_size=batch_size,
            convert_to_numpy=True,
            overhead=overhead,
            tokens=tokens,
            show_progress_bar=progress,
        )
    if len(texts) < 2:
        return model.encode(texts, batch_size=batch_size, convert_to_numpy=True)
    passes = cut_passes(token_lengths(model, texts), batch_size, tokens, overhead)
    if progress:
        from tqdm.auto import tqdm

        passes = tqdm(passes, desc="encode", unit="pass", leave=False)
    out = None
    for rows in passes:
        part = model.encode([texts[i] for i in rows], batch_size=len(rows), convert_to_numpy=True)
        out = np.empty((len(texts), part.shape[1]), dtype=part.dtype) if out is None else out
        out[rows] = part
    return out


def static_encode(model, texts: list[str], batch_size: int = 4096) -> np.ndarray:
    """A static encoder's embeddings (:func:`cea.encoders.build.is_static`) by its modules' own ``preprocess`` and
    forward, in batches of ``batch_size`` texts. Written here because sentence-transformers' ``encode`` around them
    (length sorting, a modality check per text, batching) costs more than the encoder itself: 16 short texts took
    2.8 ms through it, twice the tokenising and pooling (bench/static.py's encode speed). A ``StaticEmbedding``
    (and ``Normalize``) runs as :func:`_token_bags`."""
    from sentence_transformers.sentence_transformer.modules import Normalize, StaticEmbedding

    modules = list(model.children())
    bags = (
        isinstance(modules[0], StaticEmbedding)
        and len(modules) <= 2
        and all(isinstance(m, Normalize) for m in modules[1:])
    )
    parts, device = [], model.device  # a property that walks the parameters: once a call
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            if bags:
                parts.append(_token_bags(modules[0], texts[start : start + batch_size], len(modules) == 2))
                continue
            features = {k: v.to(device) for k, v in model[0].preprocess(texts[start : start + batch_size]).items()}
            parts.append(model(features)["sentence_embedding"].float().cpu().numpy())
    return np.concatenate(parts) if parts else np.zeros((0, model.get_embedding_dimension()), np.float32)


def _token_bags(module, texts: list[str], normalized: bool) -> np.ndarray:
    """What ``StaticEmbedding``'s ``preprocess`` and ``forward`` (and ``Normalize``) compute for at least one text,
    with the tokenizer's ``encode_batch_fast`` (no character offsets) and the ids gathered in numpy: a service's batch
    of 8 short texts took 0.22 ms instead of 0.33 (one thread; a throwaway timing)."""
    tokenizer, bag = module.tokenizer, module.embedding
    encodings = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)(texts, add_special_tokens=False)
    ids = [encoding.ids for encoding in encodings]
    lengths = np.fromiter(map(len, ids), np.int64, len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), np.int64, int(lengths.sum()))
    offsets = np.zeros(len(ids), np.int64)
    np.cumsum(lengths[:-1], out=offsets[1:])
    device = bag.weight.device
    out = bag(torch.from_numpy(flat).to(device), torch.from_numpy(offsets).to(device)).float()
    return (torch.nn.functional.normalize(out, p=2, dim=1) if normalized else out).cpu().numpy()


def token_lengths(model, texts: list[str]) -> list[int]:
    """Tokens of each text as ``model`` reads it (cut at its max_seq_length); characters for a non-transformers one."""
    tokenizer, limit = getattr(model, "tokenizer", None), getattr(model, "max_seq_length", None) or 512
    try:
        ids = tokenizer(list(texts), truncation=True, max_length=limit)["input_ids"]
    except Exception:  # noqa: BLE001 - e.g. a tokenizers.Tokenizer (the bag encoder): characters will do
        return [len(text) for text in texts]
    return [len(x) for x in ids]


def cut_passes(lengths, most: int, tokens: int, overhead: float | None = None) -> list[np.ndarray]:
    """Texts of ``lengths`` cut into passes of at most ``most`` texts and ``tokens`` tokens: in length order
    (:func:`token_passes`), or with ``overhead`` those that cost least (:func:`least_cost_passes`)."""
    if overhead is None:
        return token_passes(lengths, tokens, most)
    return least_cost_passes(lengths, overhead, most, tokens)


def token_passes(lengths, tokens: int, most: int) -> list[np.ndarray]:
    """Indices of texts of ``lengths`` (tokens), longest first, cut into forward passes of at most ``most`` texts
    and at most ``tokens`` tokens as the pass is padded (texts x its longest; a text longer than ``tokens`` alone).
    sentence-transformers' ``encode`` cuts a fixed number of texts, whatever their lengths, as TEI and infinity do
    not: they batch by tokens."""
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    passes, start = [], 0
    while start < len(order):
        size = max(1, min(most, tokens // max(int(lengths[order[start]]), 1)))
        passes.append(order[start : start + size])
        start += size
    return passes


def least_cost_passes(lengths, overhead: float, most: int, tokens: int | None = None) -> list[np.ndarray]:
    """Indices of texts of ``lengths`` (tokens) cut into forward passes of at most ``most`` texts (and ``tokens``
    tokens as padded, :func:`token_passes`; a text alone whatever its length) whose cost, each pass ``overhead +
    texts x its longest``, is least (texts sorted by length, the cuts by dynamic programming). Libraries cut into
    passes of a fixed size, padding short texts to long ones where a batch is small and mixed."""
    order = np.argsort(np.asarray(lengths), kind="stable")
    sorted_lengths = np.asarray(lengths, dtype=np.float64)[order]
    n = len(order)
    cost, cut = np.full(n + 1, np.inf), np.zeros(n + 1, dtype=np.int64)
    cost[0] = 0.0
    for end in range(1, n + 1):  # the pass that ends at text end-1 (the longest of its pass) starts at cut[end]
        longest = sorted_lengths[end - 1]
        fits = most if tokens is None else max(1, min(most, int(tokens // max(longest, 1.0))))
        starts = np.arange(max(0, end - fits), end)
        options = cost[starts] + overhead + (end - starts) * longest
        best = int(np.argmin(options))
        cost[end], cut[end] = options[best], starts[best]
    passes, end = [], n
    while end > 0:
        passes.append(order[cut[end] : end])
        end = cut[end]
    return passes[::-1]


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
def encode_layers(
    model,
    texts: list[str],
    layers: list[int],
    poolings: list[str] = ("mean",),
    batch_size: int | None = None,
    progress: bool = True,
) -> dict[tuple[int, str], np.ndarray]:
    """Pool the hidden states ``layers`` (0 = embedding layer) of ``texts`` in one forward pass, in length-sorted
    passes bounded by texts and tokens (:func:`token_passes`); returns ``{(layer, pooling): float32 array of shape
    (len(texts), dim)}`` in input order."""
    from tqdm.auto import tqdm

    model.eval()
    body, batch_size = model[0], batch_size or encode_batch(model)
    if is_static(model):  # one layer (0): the token vectors, pooled by their mean
        if set(layers) != {0} or set(poolings) != {"mean"}:
            raise CeaError(
                "a static encoder has one layer (0) pooled by the mean; probe it with --layers 0 --poolings mean"
            )
        return {(0, "mean"): model.encode(texts, batch_size=batch_size, convert_to_numpy=True)}
    out = {(layer, p): None for layer in layers for p in poolings}
    passes = token_passes(token_lengths(model, texts), encode_tokens(model), batch_size)
    for rows in tqdm(passes, desc="encode", unit="batch", disable=not progress, leave=False):
        features = body.preprocess([texts[i] for i in rows])
        inputs = {
            k: v.to(model.device) for k, v in features.items() if k in ("input_ids", "attention_mask", "token_type_ids")
        }
        hidden = body.auto_model(**inputs, output_hidden_states=True).hidden_states
        for key in out:
            pooled = _pool(hidden[key[0]], inputs["attention_mask"], key[1]).float().cpu().numpy()
            out[key] = np.empty((len(texts), pooled.shape[1]), np.float32) if out[key] is None else out[key]
            out[key][rows] = pooled  # input order
    return out
