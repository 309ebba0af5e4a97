"""Build a SentenceTransformer from a catalog name: pooling, layer choice and truncation."""

from __future__ import annotations

import contextlib
import functools
import logging
import warnings
from pathlib import Path

import torch

from ..errors import CeaError, unknown_name
from ..progress import no_loading_bars
from .catalog import MODELS, resolve_model
from .device import resolve_device, resolve_precision, to_precision

POOLINGS = ("mean", "cls")


def _modules():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from sentence_transformers.models import Pooling, Transformer
    return Transformer, Pooling


def is_static(model) -> bool:
    """Whether ``model`` is a static encoder (a ``StaticEmbedding``: token vectors pooled by their mean, no
    attention; ``cea distill`` makes them, ``--model bag`` trains one from scratch)."""
    return hasattr(model, "_first_module") and not hasattr(model[0], "auto_model")


def transformer_blocks(model) -> torch.nn.ModuleList:
    """The list of transformer blocks of a SentenceTransformer (or of a bare HF model); a static encoder has none."""
    if is_static(model):
        return torch.nn.ModuleList()
    auto = model[0].auto_model if hasattr(model, "_first_module") else model
    for path in ("encoder.layer", "transformer.layer", "layers", "encoder.layers", "layer"):
        obj = functools.reduce(lambda parent, attr: getattr(parent, attr, None), path.split("."), auto)
        if isinstance(obj, torch.nn.ModuleList):
            return obj
    raise CeaError(
        f"cannot find the transformer blocks of {type(auto).__name__}; truncation and "
        "layer choice support BERT-like encoders"
    )


def num_layers(model) -> int:
    return len(transformer_blocks(model))


def freeze(model, blocks: int) -> None:
    """Keep the word embeddings and the first ``blocks`` transformer blocks as they are (in place, no gradient: an
    optimizer built afterwards leaves them, and backward stops above them)."""
    found = transformer_blocks(model)
    if is_static(model):
        raise CeaError("a static encoder has no transformer blocks to freeze; leave out --frozen-layers")
    if not 0 <= blocks <= len(found):
        raise CeaError(f"cannot freeze {blocks} blocks: the model has {len(found)}; choose 0..{len(found)}")
    for module in [model[0].auto_model.get_input_embeddings(), *found[:blocks]]:
        module.requires_grad_(False)


def cut_tokens(model, tokens: int) -> None:
    """Read at most ``tokens`` tokens of each text (in place, saved with the model); never more than the model's own
    limit, and a static encoder (which reads whole texts) is left as it is. Callers check ``tokens`` (at least 2)
    before loading anything."""
    own = getattr(model, "max_seq_length", None)
    if not is_static(model) and (own is None or tokens < own):
        model.max_seq_length = tokens


def set_pooling(model, pooling: str) -> None:
    """Replace the model's Pooling module by one with ``pooling`` ('mean' or 'cls')."""
    if pooling not in POOLINGS:
        raise CeaError(f"unknown pooling {pooling!r}; use one of {', '.join(POOLINGS)}")
    _, Pooling = _modules()
    for i, module in enumerate(model):
        if isinstance(module, Pooling):
            model[i] = Pooling(module.get_embedding_dimension(), pooling_mode=pooling)  # type: ignore[index]
            return
    raise CeaError("the model has no Pooling module to replace")


def truncate(model, layers: int) -> None:
    """Keep only the first ``layers`` transformer blocks (in place), so the model is smaller and faster."""
    blocks = transformer_blocks(model)
    if is_static(model):
        raise CeaError("a static encoder has no transformer blocks to keep; leave out --layers (or --depths)")
    if not 1 <= layers <= len(blocks):
        raise CeaError(f"cannot keep {layers} blocks: the model has {len(blocks)}; choose 1..{len(blocks)}")
    del blocks[layers:]
    model[0].auto_model.config.num_hidden_layers = layers


def load_encoder(
    name: str, pooling: str | None = None, layers: int | None = None, device: str | None = None, precision: str = "fp32"
):
    """Load ``name`` as a SentenceTransformer, optionally with another pooling or truncated. ``device``: auto (None),
    cpu, cuda, cuda:N or mps; ``precision``: the weights' type for encoding (fp32, bf16, fp16 or auto,
    :mod:`cea.encoders.device`; embeddings are fp32 whatever it is; training autocasts instead). A plain transformers
    folder gets mean pooling, as sentence-transformers gives such models."""
    from sentence_transformers import SentenceTransformer

    device = resolve_device(device)
    precision = resolve_precision(precision, device)
    source = resolve_model(name)
    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)
    local = Path(source).is_dir()
    try:
        with no_loading_bars() if local else contextlib.nullcontext():
            if local and not (Path(source) / "modules.json").exists():
                Transformer, Pooling = _modules()
                body = Transformer(source)
                model = SentenceTransformer(
                    modules=[body, Pooling(body.get_embedding_dimension(), "mean")], device=device
                )
            else:
                model = SentenceTransformer(source, device=device)
    except OSError as exc:  # includes the hub's "repository not found"
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise unknown_name("model", name, MODELS, f"({first[:200]})") from None
    if pooling is not None:
        set_pooling(model, pooling)
    if layers is not None:
        truncate(model, layers)
    return to_precision(model, precision)
