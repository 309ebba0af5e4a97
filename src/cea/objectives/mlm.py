"""Masked-language-model training on unlabelled text: domain-adaptive pre-training (:class:`MLMObjective`)."""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoModelForMaskedLM, DataCollatorForLanguageModeling

from ..errors import CeaError
from .catalog import MLMOptions


def build(model, num_labels: int, o: MLMOptions, seed: int, data: str) -> MLMObjective:
    return MLMObjective(model, o.mlm_probability)


class MLMObjective(nn.Module):
    """Masked-language-model training on unlabelled text: domain-adaptive pre-training.

    What it expects
        Unlabelled target-domain sentences (one text column). Of the chosen real tokens 80% become ``[MASK]``, 10% a
        random token and 10% stay (BERT's recipe, transformers' ``DataCollatorForLanguageModeling.torch_mask_tokens``).

    What it returns
        The cross-entropy of the masked-LM head (the architecture's own, new and not saved) on the chosen tokens;
        it shares the encoder's weights, so the saved folder carries the adapted encoder.

    When to use it
        Before any other objective, when the target texts differ from the encoder's pre-training text:
        ``cea train --objective mlm --dataset sentences.txt``, then ``--model RUN/model`` for the next one.

    Options
        ``probability``: the fraction of the real tokens chosen for masking (0.15; ``cea train --mlm-probability``).

    Example
        >>> loss = MLMObjective(model, probability=0.15)   # cea train --objective mlm --mlm-probability 0.15

    Under torchrun
        Not gathered: each masked token's term is its own, so DDP's average of the processes' means is the loss.

    Citation
        Devlin et al., "BERT", 2019; Gururangan et al., "Don't Stop Pretraining", 2020; one of the STS-B improvements
        of "Are ELECTRA's Sentence Embeddings Beyond Repair?", Findings of EMNLP 2024.
    """

    def __init__(self, model, probability: float = 0.15):
        super().__init__()
        MLMOptions(probability)  # checks the value
        self.model = model
        encoder, tokenizer = model[0].auto_model, model[0].tokenizer
        if tokenizer.mask_token is None:
            raise CeaError(f"the tokenizer of {type(encoder).__name__} has no mask token; --objective mlm needs one")
        try:
            self.head_model = AutoModelForMaskedLM.from_config(encoder.config)
        except ValueError as exc:
            raise CeaError(f"{type(encoder).__name__} has no masked-LM architecture in transformers ({exc})") from None
        setattr(self.head_model, self.head_model.base_model_prefix, encoder)  # share the encoder; only the head is new
        self.head_model.tie_weights()
        self.collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=probability)
        self.special = set(tokenizer.all_special_ids)

    def forward(self, sentence_features, labels=None) -> torch.Tensor:
        features = sentence_features[0]
        ids = features["input_ids"]
        special = torch.tensor([[int(t) in self.special for t in row] for row in ids.tolist()], dtype=torch.bool)
        special |= ~features["attention_mask"].bool().cpu()
        masked, targets = self.collator.torch_mask_tokens(ids.clone().cpu(), special_tokens_mask=special)
        extra = {k: features[k] for k in ("attention_mask", "token_type_ids") if k in features}
        return self.head_model(input_ids=masked.to(ids.device), labels=targets.to(ids.device), **extra).loss
