"""Encoders: a model catalog and SentenceTransformer builders (pooling, layers, truncation)."""

from .build import POOLINGS, freeze, load_encoder, num_layers, set_pooling, transformer_blocks, truncate
from .catalog import DEFAULT_MODEL, MODELS, resolve_model
from .embeddings import EmbeddingCache, Encoded, embed, encode_layers, model_fingerprint, text_fingerprint

__all__ = ["DEFAULT_MODEL", "MODELS", "POOLINGS", "EmbeddingCache", "Encoded", "embed", "encode_layers", "freeze",
           "load_encoder", "model_fingerprint", "num_layers", "resolve_model", "set_pooling",
           "text_fingerprint", "transformer_blocks", "truncate"]
