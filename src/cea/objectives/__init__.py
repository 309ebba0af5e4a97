"""Objectives: one per file, all with ``forward(sentence_features, labels)`` for the trainer and
``compute_loss_from_embeddings(embeddings, labels)`` for direct use."""

from __future__ import annotations

from ..errors import CeaError, unknown_name
from .cea import CEALoss, cea_pair_loss
from .cosine_regression import CosineRegressionObjective
from .micse import MiCSEObjective, attention_mutual_information
from .mlm import MLMObjective
from .multitask import MultitaskObjective, flipped_aux_loss
from .normalized_softmax import NormalizedSoftmaxObjective
from .simcse import SimCSEObjective
from .softmax import SoftmaxObjective
from .supcon import SupConObjective
from .triplet import TripletObjective, explicit_triplet_loss

CLASS_OBJECTIVES = ("softmax", "cea", "triplet", "supcon", "normalized-softmax")
PAIR_OBJECTIVES = ("cosine-regression",)
SENTENCE_OBJECTIVES = ("simcse", "micse", "mlm")
OBJECTIVES = CLASS_OBJECTIVES + PAIR_OBJECTIVES + SENTENCE_OBJECTIVES


def check_options(name: str, pairs: str = "sampled", memory: str = "none", mining: str = "all",
                  micse: bool = False) -> None:
    """Refuse an unknown objective or options that make no sense for it (before anything is loaded).

    ``micse`` says whether miCSE options (--micse-lambda, --micse-layers) were given.
    """
    if name not in OBJECTIVES:
        raise unknown_name("objective", name, OBJECTIVES)
    if micse and name != "micse":
        raise CeaError(f"--micse-lambda and --micse-layers only apply to --objective micse, not {name}")
    if name != "cea" and memory != "none":
        raise CeaError(f"--memory {memory} only applies to --objective cea, not {name}")
    if name != "cea" and pairs != "sampled":
        raise CeaError(f"--pairs {pairs} only applies to --objective cea, not {name}")
    if name != "triplet" and mining != "all":
        raise CeaError(f"--mining {mining} only applies to --objective triplet, not {name}")


def build_objective(name: str, model, num_labels: int, pairs: str = "sampled", memory: str = "none",
                    memory_size: int = 4096, reduction: str = "mean", negative_target: float = 0.0,
                    margin: float = 0.2, mining: str = "all", temperature: float | None = None,
                    aux: bool = False, aux_weight: float = 1.0, seed: int = 0, explicit_triplets: bool = False,
                    micse_lambda: float = 0.1, micse_layers: list[int] | None = None):
    """Build an objective by name; options that make no sense for it are refused.

    ``explicit_triplets``: ``triplet`` on (anchor, positive, negative) rows instead of mined from labels.
    """
    check_options(name, pairs, memory, mining)
    if name == "triplet" and explicit_triplets:
        return explicit_triplet_loss(model, margin=margin)
    if name == "cosine-regression":
        return CosineRegressionObjective(model)
    if name == "simcse":
        return SimCSEObjective(model, temperature=temperature or 0.05)
    if name == "micse":
        return MiCSEObjective(model, mi_lambda=micse_lambda, layers=micse_layers,
                              temperature=temperature or 0.05, seed=seed)
    if name == "mlm":
        return MLMObjective(model)
    if name == "cea":
        objective = CEALoss(model, num_labels, pairs=pairs, memory=memory, memory_size=memory_size,
                            reduction=reduction, negative_target=negative_target, seed=seed)
    elif name == "softmax":
        objective = SoftmaxObjective(model, num_labels)
    elif name == "triplet":
        objective = TripletObjective(model, margin=margin, mining=mining)
    elif name == "supcon":
        objective = SupConObjective(model, temperature=temperature or 0.1)
    else:
        objective = NormalizedSoftmaxObjective(model, num_labels, temperature=temperature or 0.05)
    return MultitaskObjective(objective, weight=aux_weight) if aux else objective


__all__ = ["CLASS_OBJECTIVES", "OBJECTIVES", "PAIR_OBJECTIVES", "SENTENCE_OBJECTIVES", "CEALoss",
           "CosineRegressionObjective", "MLMObjective", "MiCSEObjective",
           "MultitaskObjective", "NormalizedSoftmaxObjective", "SimCSEObjective", "SoftmaxObjective",
           "SupConObjective", "TripletObjective", "attention_mutual_information", "build_objective",
           "check_options", "cea_pair_loss", "explicit_triplet_loss", "flipped_aux_loss"]
