"""Encoders: a model catalog and SentenceTransformer builders (pooling, layers, truncation), their embeddings and the
one store that keeps them (:mod:`cea.encoders.store`)."""

from .build import POOLINGS, freeze, load_encoder, num_layers, set_pooling, transformer_blocks, truncate
from .catalog import DEFAULT_MODEL, MODELS, resolve_model
from .embeddings import encode_layers, forget_fingerprint, model_fingerprint, text_fingerprint
from .store import EmbeddingStore, embed

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "POOLINGS",
    "EmbeddingStore",
    "embed",
    "encode_layers",
    "forget_fingerprint",
    "freeze",
    "load_encoder",
    "model_fingerprint",
    "num_layers",
    "resolve_model",
    "set_pooling",
    "text_fingerprint",
    "transformer_blocks",
    "truncate",
]
