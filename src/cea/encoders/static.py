"""Static encoders distilled from a transformer (``cea distill``): one vector per token, pooled by their mean.

What it does
    :func:`distill` runs model2vec's distillation on a teacher (a catalog name, a sentence-transformers or
    transformers folder or hub id, or a run's trained encoder: ``RUN`` means ``RUN/model``) and saves the result as a
    sentence-transformers folder (``StaticEmbedding`` and ``Normalize``), so that every cea command loads it like any
    encoder: ``probe`` (one layer, mean pooling), ``train`` (its token vectors trained with the labels, as the bag of
    embeddings of study 003, by sentence-transformers' own trainer), ``bundle``, ``serve`` and ``discover``.

How
    model2vec encodes each token of the teacher's vocabulary alone, reduces the vectors by PCA to ``dims`` and weights
    them by the token's frequency rank (its defaults); the vectors are kept in float32 so that training moves them.

What it expects
    A teacher with a transformers tokenizer (BERT-like encoders); a static teacher is refused (there is nothing to
    distil). ``output`` must not exist; it is written whole or not at all.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import CeaError, OptionError
from ..paths import atomic_path
from .catalog import resolve_model
from .device import resolve_device


def is_static_folder(model: str) -> bool:
    """Whether ``model`` names a folder holding a static encoder (its ``modules.json`` lists a ``StaticEmbedding``),
    read without loading it."""
    modules = Path(str(model)).expanduser() / "modules.json"
    return modules.is_file() and "StaticEmbedding" in modules.read_text()


def distill(model: str, output: str | Path, dims: int = 256, device: str | None = None) -> Path:
    """Distil ``model`` into a static encoder of ``dims`` dimensions (at most the teacher's) saved in ``output``."""
    if dims < 2:
        raise OptionError("dims", f"must be at least 2, got {dims}")
    output = Path(output)
    if output.exists():
        raise CeaError(f"{output} exists; choose a new folder for the static encoder")
    trained = Path(model).expanduser() / "model"  # RUN names a run folder's trained encoder
    source = str(trained) if (trained.parent / "results.json").exists() and trained.is_dir() else resolve_model(model)
    if is_static_folder(source):
        raise CeaError(f"{model} is a static encoder already; distil a transformer (a model name, folder or RUN)")
    from model2vec.distill import distill as model2vec_distill  # inside: model2vec imports transformers' models

    config = Path(source) / "config.json"
    if config.is_file():
        dims = min(dims, json.loads(config.read_text()).get("hidden_size", dims))
    try:
        static = model2vec_distill(
            model_name=source, pca_dims=dims, device=resolve_device(device), quantize_to="float32"
        )
    except (OSError, ValueError, KeyError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise CeaError(
            f"cannot distil {model}: {first}; pass a BERT-like sentence-transformers or transformers model"
        ) from None
    with atomic_path(output) as tmp:
        static.save_pretrained(str(tmp))
    return output
