"""Objectives: one per file, each named in :mod:`cea.objectives.catalog` with its options (torch-free: ``cea train
--help`` reads it), all with ``forward(sentence_features, labels)`` for the trainer and
``compute_loss_from_embeddings`` for direct use. The loss classes are imported when first named."""

from __future__ import annotations

import importlib

from .catalog import OBJECTIVES, get_spec, objectives_for

_HOMES = {
    "CEALoss": "cea",
    "cea_pair_loss": "cea",
    "CosineRegressionObjective": "cosine_regression",
    "MiCSEObjective": "micse",
    "attention_mutual_information": "micse",
    "MLMObjective": "mlm",
    "MultitaskObjective": "multitask",
    "flipped_aux_loss": "multitask",
    "NormalizedSoftmaxObjective": "normalized_softmax",
    "SimCSEObjective": "simcse",
    "SoftmaxObjective": "softmax",
    "SupConObjective": "supcon",
    "TripletObjective": "triplet",
}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)


def build_objective(
    name: str,
    model,
    num_labels: int,
    seed: int = 0,
    data: str | None = None,
    aux: bool = False,
    aux_weight: float = 1.0,
    **options,
):
    """Build an objective by name with its options (e.g. ``pairs="all", memory="bank"``); an option it does not have, or
    a bad value, raises :class:`cea.errors.CeaError` naming the parameter. ``data``: what it trains on (default: the
    objective's first kind; ``"triplets"``: triplet rows); ``aux``: add the flipped auxiliary loss (multitask)."""
    spec = get_spec(name)
    objective = spec.build(model, num_labels, spec.make_options(options), seed, data or spec.data[0])
    if not aux:
        return objective
    from .multitask import MultitaskObjective

    return MultitaskObjective(objective, weight=aux_weight)


__all__ = ["OBJECTIVES", "build_objective", "get_spec", "objectives_for", *_HOMES]
