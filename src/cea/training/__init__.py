"""Training: objectives on the sentence-transformers trainer, judged by kNN."""

from .evaluator import KNNEvaluator
from .sampler import PKBatchSampler, check_pk, pk_sampler_factory
from .train import TrainConfig, train

__all__ = ["KNNEvaluator", "PKBatchSampler", "TrainConfig", "check_pk", "pk_sampler_factory", "train"]
