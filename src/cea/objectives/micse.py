"""miCSE: SimCSE plus agreement between the two dropout views' attention maps (:class:`MiCSEObjective`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..encoders.build import transformer_blocks
from ..errors import OptionError
from .catalog import MiCSEOptions
from .gather import gather_with_grad


def attention_mutual_information(
    view1: torch.Tensor,
    view2: torch.Tensor,
    valid: torch.Tensor,
    samples: int = 150,
    generator: torch.Generator | None = None,
    scale_by_valid: bool = True,
) -> torch.Tensor:
    """Mean Gaussian mutual information between the log attention of two views (see "What it returns"):
    ``view1``, ``view2`` of shape (..., T, T); ``valid``: a boolean mask broadcastable to them (real query and key
    tokens). Every row draws ``samples`` entries, or fewer when some row has fewer valid ones."""
    mask = valid.expand_as(view1) & (view1 > 0) & (view2 > 0)
    rows1, rows2, rows_mask = (x.flatten(-2).reshape(-1, x.shape[-1] ** 2) for x in (view1, view2, mask))
    counts = rows_mask.sum(1)
    keep = counts > 1
    if not keep.any():
        return view1.new_zeros(())
    rows1, rows2, rows_mask = rows1[keep], rows2[keep], rows_mask[keep]
    n = int(min(samples, int(counts[keep].min())))
    if n < 2:
        return view1.new_zeros(())
    picked = torch.multinomial(rows_mask.float(), n, replacement=False, generator=generator)
    x, y = (torch.log(rows.gather(1, picked)) for rows in (rows1, rows2))
    x, y = x - x.mean(1, keepdim=True), y - y.mean(1, keepdim=True)
    rho = (x * y).sum(1) / (x.norm(dim=1) * y.norm(dim=1)).clamp_min(1e-12)
    rho = rho.clamp(-1 + 1e-4, 1 - 1e-4)  # keeps log(1 - rho ** 2) finite
    mi = (-0.5 * torch.log1p(-rho.pow(2))).mean()
    if scale_by_valid:
        mi = mi * (mask.sum() / mask.numel()) ** 2
    return mi


def build(model, num_labels: int, o: MiCSEOptions, seed: int, data: str) -> MiCSEObjective:
    return MiCSEObjective(model, mi_lambda=o.micse_lambda, layers=o.micse_layers, temperature=o.temperature, seed=seed)


class MiCSEObjective(nn.Module):
    """miCSE: SimCSE plus agreement between the attention maps of the two dropout views.

    What it expects
        Unlabelled sentences, fed twice like SimCSE; the encoder runs with eager attention so the attention
        probabilities (after dropout, as in the original) come out of every block.

    What it returns
        ``simcse_loss - lambda * MI * scale``: for each chosen block, sentence and head, up to ``samples`` attention
        entries positive in both views are drawn; ``MI = -0.5 * log(1 - rho ** 2)`` with ``rho`` the Pearson
        correlation of their log attention between the views, averaged and scaled by the squared fraction of valid
        entries, as in the original. Gradients flow through the attention of both views.

    When to use it
        Low-shot unsupervised sentence embeddings (a few thousand sentences or fewer), where SimCSE alone
        overfits; compare both with ``cea train --objective simcse|micse --limit N``.

    Options
        ``mi_lambda``: the attention term's weight (0.1; ``--micse-lambda``); ``layers``: the blocks (1-based) compared
        (default: the middle two; ``--micse-layers 3,4``); ``temperature`` (0.05); ``samples``: attention entries
        drawn per block, sentence and head (150); ``seed``: their generator.

    Example
        >>> loss = MiCSEObjective(model, mi_lambda=0.1, layers=[3, 4])

    Under torchrun
        The contrastive term is gathered (:mod:`cea.objectives.gather`); the attention term compares each sentence's
        two views only, so each process averages its own sentences and DDP the processes.

    Citation
        Klein and Nabi, "miCSE: Mutual Information Contrastive Learning for Low-shot Sentence Embeddings", ACL 2023,
        arXiv:2211.04928. No library ships the attention term, hence it is written here.
    """

    def __init__(
        self,
        model,
        mi_lambda: float = 0.1,
        layers: list[int] | None = None,
        temperature: float = 0.05,
        samples: int = 150,
        seed: int = 0,
    ):
        super().__init__()
        MiCSEOptions(mi_lambda, layers, temperature)  # checks the values
        depth = len(transformer_blocks(model))
        middle = sorted({max(1, depth // 2), min(depth, depth // 2 + 1)})
        layers = list(layers) if layers else middle
        if outside := [layer for layer in layers if not 1 <= layer <= depth]:
            raise OptionError(
                "micse_layers",
                f"{','.join(map(str, outside))} lie outside the model's {depth} blocks; "
                f"choose blocks between 1 and {depth}, e.g. {','.join(map(str, middle))}",
            )
        self.model, self.mi_lambda, self.layers = model, mi_lambda, layers
        self.temperature, self.samples = temperature, samples
        self.generator = torch.Generator().manual_seed(seed)
        self.auto = model[0].auto_model
        self.auto.set_attn_implementation("eager")

    def _encode(self, features: dict) -> tuple[torch.Tensor, tuple]:
        inputs = {k: features[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in features}
        out = self.auto(**inputs, output_attentions=True, return_dict=True)
        pooled = {**features, "token_embeddings": out.last_hidden_state}
        for module in list(self.model)[1:]:
            pooled = module(pooled)
        return pooled["sentence_embedding"], out.attentions

    def forward(self, sentence_features, labels=None) -> torch.Tensor:
        first, second = sentence_features[0], sentence_features[-1]
        (z1, att1), (z2, att2) = self._encode(first), self._encode(second)
        a1, a2 = (torch.stack([att[layer - 1] for layer in self.layers]) for att in (att1, att2))  # (L, B, H, T, T)
        mask = first["attention_mask"].bool()
        valid = (mask[:, :, None] & mask[:, None, :])[None, :, None]  # (1, B, 1, T, T)
        return self.compute_loss(gather_with_grad(z1), gather_with_grad(z2), a1, a2, valid)

    def compute_loss(self, z1, z2, attention1, attention2, valid) -> torch.Tensor:
        """The miCSE loss from both views' embeddings and attention maps (for tests and reuse)."""
        logits = F.cosine_similarity(z1[:, None, :], z2[None, :, :], dim=-1) / self.temperature
        contrastive = F.cross_entropy(logits, torch.arange(len(z1), device=z1.device))
        generator = self.generator if attention1.device.type == "cpu" else None
        mi = attention_mutual_information(attention1, attention2, valid, self.samples, generator)
        return contrastive - self.mi_lambda * mi

    def memory_state(self) -> dict[str, torch.Tensor]:
        """The sampling generator's state, saved with each checkpoint so a resumed run repeats the draws."""
        return {"generator": self.generator.get_state()}

    def load_memory_state(self, state: dict[str, torch.Tensor]) -> None:
        self.generator.set_state(state["generator"])
