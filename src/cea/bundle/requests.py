"""What is asked of a bundle, as records: a prediction request and an addition request, each named field by field.

What it does
    :class:`PredictRequest` is one caller's texts to predict with its ``k`` and ``threshold``;
    :class:`AddRequest` one caller's labelled texts to add, with their embeddings where encoded already and the
    :attr:`cea.bundle.Bundle.encoder_version` that encoded them. :meth:`cea.bundle.Bundle.predict_many` and
    :meth:`cea.bundle.Bundle.add_many` take lists of them (several callers' requests answered together), as do the
    service's batchers (:mod:`cea.service.queues`) and ``cea fit --latency``'s timing (:mod:`cea.bundle.speed`).

What it expects
    Texts and labels as :mod:`cea.bundle.examples` checks them (the bundle checks them when it answers); ``vectors``:
    one float32 row per text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PredictRequest:
    """``texts`` to predict; ``k``: the neighbours each answer lists (None: the bundle's); ``threshold``: the evidence
    below which an answer is ``unknown`` (None: the bundle's; 0: never)."""

    texts: list[str]
    k: int | None = None
    threshold: float | None = None


@dataclass(frozen=True)
class AddRequest:
    """``texts`` to add with their ``labels`` (a list of labels a text in a multi-label bundle); ``vectors``: the texts'
    embeddings where encoded already (None: the bundle encodes them), by the encoder of ``version``
    (:attr:`cea.bundle.Bundle.encoder_version`; None: the one in place)."""

    texts: list[str]
    labels: list
    vectors: np.ndarray | None = None
    version: int | None = None
