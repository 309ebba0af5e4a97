"""Training: objectives on the sentence-transformers trainer, judged by kNN."""

from .config import TrainConfig
from .sampler import PKBatchSampler, check_pk, pk_sampler_factory
from .tasks import DevEvaluator
from .train import train

__all__ = ["DevEvaluator", "PKBatchSampler", "TrainConfig", "check_pk", "pk_sampler_factory", "train"]
