"""Masked-language-model training on unlabelled text: domain-adaptive pre-training (one of the STS-B
improvements of "Are ELECTRA's Sentence Embeddings Beyond Repair?", Findings of EMNLP 2024).

What it expects
    Unlabelled sentences of the target domain (one text column). 15% of the real tokens are chosen;
    of those, 80% become ``[MASK]``, 10% a random token and 10% stay (BERT's recipe, applied by
    transformers' ``DataCollatorForLanguageModeling.torch_mask_tokens``).

What it returns
    The cross-entropy of the masked-LM head on the chosen tokens. The head is the architecture's own
    (``AutoModelForMaskedLM``) wrapped around the sentence-transformers model's encoder, so the
    encoder's weights are shared and the saved sentence-transformers folder carries the adapted
    encoder; the head is freshly initialised when the checkpoint has none (sentence-transformers
    checkpoints usually do not) and is not saved.

When to use it
    Before any other objective, when the target texts differ from the encoder's pre-training text:
    ``cea train --objective mlm --dataset sentences.txt``, then ``--model RUN/model`` for the next
    objective (the ELECTRA study's second improvement).

Example
    >>> loss = MLMObjective(model, probability=0.15)   # cea train --objective mlm --mlm-probability 0.15

Under torchrun
    Not gathered: the loss is a mean over masked tokens, each scored on its own, so DDP's average of
    the processes' means is the one-process loss (exactly, for equal numbers of masked tokens).

Citation
    Devlin et al., "BERT", 2019; Gururangan et al., "Don't Stop Pretraining", 2020.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import CeaError, OptionError
from .registry import Options, option, register


@dataclass
class MLMOptions(Options):
    mlm_probability: float = option(0.15, "fraction of the real tokens chosen for masking")

    def __post_init__(self):
        if not 0 < self.mlm_probability < 1:
            raise OptionError("mlm_probability", f"must lie between 0 and 1, got {self.mlm_probability}")


class MLMObjective(nn.Module):
    def __init__(self, model, probability: float = 0.15):
        from transformers import AutoModelForMaskedLM, DataCollatorForLanguageModeling

        super().__init__()
        MLMOptions(probability)  # checks the value
        self.model = model
        encoder = model[0].auto_model
        tokenizer = model[0].tokenizer
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
        names = ("attention_mask", "token_type_ids")
        out = self.head_model(input_ids=masked.to(ids.device), labels=targets.to(ids.device),
                              **{k: features[k] for k in names if k in features})
        return out.loss


SPEC = register("mlm", "sentences", MLMOptions, summary="masked-language-model domain adaptation",
                build=lambda model, num_labels, o, seed, data: MLMObjective(model, o.mlm_probability))
