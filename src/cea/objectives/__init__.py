"""Objectives: one per file, each registered by name with its options (:mod:`cea.objectives.registry`), all
with ``forward(sentence_features, labels)`` for the trainer and ``compute_loss_from_embeddings`` for direct use."""

from __future__ import annotations

import importlib
import pkgutil

from .cea import CEALoss, cea_pair_loss
from .cosine_regression import CosineRegressionObjective
from .micse import MiCSEObjective, attention_mutual_information
from .mlm import MLMObjective
from .multitask import MultitaskObjective, flipped_aux_loss
from .normalized_softmax import NormalizedSoftmaxObjective
from .registry import OBJECTIVES, get_spec, objectives_for
from .simcse import SimCSEObjective
from .softmax import SoftmaxObjective
from .supcon import SupConObjective
from .triplet import TripletObjective

for _module in pkgutil.iter_modules(__path__):  # each file registers its objective on import: a new one needs no edit
    importlib.import_module(f"{__name__}.{_module.name}")


def build_objective(name: str, model, num_labels: int, seed: int = 0, data: str | None = None, aux: bool = False,
                    aux_weight: float = 1.0, **options):
    """Build an objective by name with its options (e.g. ``pairs="all", memory="bank"``); an option it does not have, or
    a bad value, raises :class:`cea.errors.CeaError` naming the parameter. ``data``: what it trains on (default: the
    objective's first kind; ``"triplets"``: triplet rows); ``aux``: add the flipped auxiliary loss (multitask)."""
    spec = get_spec(name)
    objective = spec.build(model, num_labels, spec.make_options(options), seed, data or spec.data[0])
    return MultitaskObjective(objective, weight=aux_weight) if aux else objective


__all__ = ["OBJECTIVES", "CEALoss", "CosineRegressionObjective", "MLMObjective", "MiCSEObjective", "MultitaskObjective",
           "NormalizedSoftmaxObjective", "SimCSEObjective", "SoftmaxObjective", "SupConObjective", "TripletObjective",
           "attention_mutual_information", "build_objective", "cea_pair_loss", "flipped_aux_loss", "get_spec",
           "objectives_for"]
