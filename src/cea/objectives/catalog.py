"""The objectives by name, without torch: the data each takes, its options (a subclass of :class:`Options`, fields
made by :func:`option`: default, help, checks), its run defaults and where its loss lives (imported when built); read
by ``build_objective``, ``TrainConfig.options``, ``cea compare`` (``cea[pairs=all]``) and ``cea train``'s flags, so
``cea train --help`` starts without torch. A new objective: its loss in a module of this package, one entry here.
Bad values raise :class:`cea.errors.OptionError` naming the parameter (``memory_size must be at least 1, got 0``).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
from dataclasses import dataclass, field

from ..defaults import REFERENCE_BATCH
from ..errors import CeaError, OptionError, flag, unknown_name

DATA = ("classes", "labelsets", "pairs", "triplets", "sentences")  # labelsets: texts with several labels each


def option(default, help: str, choices: tuple | None = None, at_least: float | None = None, above: float | None = None):
    """A dataclass field with its default, its help text and (optionally) the values it accepts."""
    checks = {"choices": choices, "at_least": at_least, "above": above}
    return field(default=default, metadata={"help": help, **{k: v for k, v in checks.items() if v is not None}})


@dataclass
class Options:
    """Base of every objective's options: checks declared choices and bounds; subclasses add others.
    A subclass is made a dataclass when it is defined (no ``@dataclass`` needed)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        dataclass(cls)

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value, meta = getattr(self, f.name), f.metadata
            if "choices" in meta and value not in meta["choices"]:
                raise OptionError(f.name, f"must be one of {', '.join(meta['choices'])}, got {value!r}")
            if value is not None and "at_least" in meta and value < meta["at_least"]:
                raise OptionError(f.name, f"must be at least {meta['at_least']}, got {value}")
            if value is not None and "above" in meta and value <= meta["above"]:
                bound = "positive" if meta["above"] == 0 else f"above {meta['above']}"
                raise OptionError(f.name, f"must be {bound}, got {value}")

    def for_data(self, data: str) -> Options:
        """The options with defaults that depend on the data filled in (triplet's margin)."""
        return self


@dataclass(frozen=True)
class ObjectiveSpec:
    name: str
    data: tuple[str, ...]  # what it trains on: classes, pairs, triplets, sentences (any texts)
    summary: str
    loss: str  # "module:Class" in this package, imported when built
    options: type[Options] = Options
    builder: str | None = None  # "module:function" (model, num_labels, options, seed, data) where the class's
    # own call does not fit; default: the class with the model, the options and what its __init__ takes
    lr: float = 2e-5  # cea train's --lr and --epochs when not given: each objective's own, measured
    epochs: float = 1.0
    min_steps: int | None = None  # with epochs not given: more epochs, up to max_epochs, until this many steps
    max_epochs: float | None = None
    frozen_layers: int | None = None  # cea train's --frozen-layers when not given (None: every weight trains)

    def default_epochs(self, n_train: int, batch_size: int) -> float:
        """A run's epochs of ``n_train`` examples in batches of ``batch_size`` when none are given: ``epochs``, or more
        (up to ``max_epochs``) until ``min_steps`` steps of :data:`cea.defaults.REFERENCE_BATCH` texts."""
        if not self.min_steps:
            return self.epochs
        per_epoch = max(1, n_train // batch_size)
        steps = math.ceil(self.min_steps * REFERENCE_BATCH / batch_size)  # as many texts as at the reference batch
        return float(max(self.epochs, min(self.max_epochs or self.epochs, math.ceil(steps / per_epoch))))

    def make_options(self, values: dict | None = None) -> Options:
        """This objective's options from ``values`` (the rest keep their defaults); others are refused."""
        values = dict(values or {})
        own = {f.name for f in dataclasses.fields(self.options)}
        for key in values:
            if key not in own:
                owners = [spec.name for spec, _ in option_fields().get(key, [])]
                if not owners:
                    raise CeaError(
                        f"unknown option {key!r} for {self.name}; its options: {', '.join(sorted(own)) or 'none'}"
                    )
                raise OptionError(
                    key,
                    f"does not apply to objective {self.name}",
                    f"{flag(key)} only applies to --objective {' or '.join(owners)}, not {self.name}",
                    prefix="option ",
                )
        return self.options(**values)

    def build(self, model, num_labels: int, options: Options, seed: int, data: str):
        """The objective on ``model``: the class called with the model, ``options`` as keywords and ``num_labels``,
        ``seed`` and ``multi_label`` where its ``__init__`` takes them, or the spec's ``builder``."""

        def find(path: str):
            module, name = path.split(":")
            return getattr(importlib.import_module(f"{__package__}.{module}"), name)

        if self.builder:
            return find(self.builder)(model, num_labels, options, seed, data)
        cls = find(self.loss)
        takes = inspect.signature(cls).parameters
        context = {
            k: v
            for k, v in (("num_labels", num_labels), ("seed", seed), ("multi_label", data == "labelsets"))
            if k in takes
        }
        return cls(model, **context, **dataclasses.asdict(options))


class CEAOptions(Options):
    pairs: str = option("all", "all pairs, or one sampled positive and negative per anchor", ("all", "sampled"))
    memory: str = option(
        "none", "where partners come from besides the batch", ("none", "class", "datapoint", "mixed", "bank")
    )
    memory_size: int = option(4096, "size of the bank (memory bank)", at_least=1)
    reduction: str = option(
        "mean",
        "mean or sum over pairs, or balanced (positives and negatives weigh the same)",
        ("mean", "sum", "balanced"),
    )
    negative_target: float = option(0.0, "target cosine of different-label pairs")


class SoftmaxOptions(Options):
    head_init: str = option(
        "probe",
        "the head's start: a logistic regression on the frozen embeddings (LP-FT), or random",
        ("probe", "random"),
    )


class TripletOptions(Options):
    margin: float | None = option(None, "margin (default 0.2 mined from labels, 0.5 on triplet rows)")
    mining: str = option("all", "all (batch-all) or hard (batch-hard); labelled texts only", ("all", "hard"))

    def for_data(self, data: str) -> TripletOptions:
        return self if self.margin is not None else dataclasses.replace(self, margin=0.5 if data == "triplets" else 0.2)


class SupConOptions(Options):
    temperature: float = option(0.1, "softmax temperature", above=0)


class NormalizedSoftmaxOptions(Options):
    temperature: float = option(0.05, "softmax temperature", above=0)


class SimCSEOptions(Options):
    temperature: float = option(0.05, "softmax temperature", above=0)


class MiCSEOptions(Options):
    micse_lambda: float = option(0.1, "weight of the attention mutual-information term")
    micse_layers: list[int] | None = option(
        None, "blocks (1-based) whose attention is compared, e.g. 3,4 (default: the middle two)"
    )
    temperature: float = option(0.05, "softmax temperature", above=0)


class MLMOptions(Options):
    mlm_probability: float = option(0.15, "fraction of the real tokens chosen for masking")

    def __post_init__(self):
        if not 0 < self.mlm_probability < 1:
            raise OptionError("mlm_probability", f"must lie between 0 and 1, got {self.mlm_probability}")


OBJECTIVES: dict[str, ObjectiveSpec] = {
    spec.name: spec
    for spec in (
        ObjectiveSpec(
            "softmax",
            ("classes",),
            "linear head with cross-entropy",
            "softmax:SoftmaxObjective",
            SoftmaxOptions,
            lr=5e-5,
            epochs=3,
            min_steps=800,
            max_epochs=10,
            frozen_layers=0,
        ),  # the word embeddings kept: docs/decisions.md#frozen-embeddings
        ObjectiveSpec(
            "cea", ("classes", "labelsets"), "pair regression on cosine similarity (CEA)", "cea:CEALoss", CEAOptions
        ),
        ObjectiveSpec(
            "triplet",
            ("classes", "triplets"),
            "triplet margin loss, mined from labels or on (anchor, positive, negative) rows",
            "triplet:TripletObjective",
            TripletOptions,
            builder="triplet:build",
        ),
        ObjectiveSpec(
            "supcon", ("classes", "labelsets"), "supervised contrastive loss", "supcon:SupConObjective", SupConOptions
        ),
        ObjectiveSpec(
            "normalized-softmax",
            ("classes",),
            "classification on the unit sphere",
            "normalized_softmax:NormalizedSoftmaxObjective",
            NormalizedSoftmaxOptions,
        ),
        ObjectiveSpec(
            "cosine-regression",
            ("pairs",),
            "MSE of cosine against graded similarity",
            "cosine_regression:CosineRegressionObjective",
        ),
        ObjectiveSpec(
            "simcse",
            ("sentences",),
            "unsupervised contrastive learning with dropout views",
            "simcse:SimCSEObjective",
            SimCSEOptions,
        ),
        ObjectiveSpec(
            "micse",
            ("sentences",),
            "SimCSE plus attention agreement between the views",
            "micse:MiCSEObjective",
            MiCSEOptions,
            builder="micse:build",
        ),
        ObjectiveSpec(
            "mlm",
            ("sentences",),
            "masked-language-model domain adaptation",
            "mlm:MLMObjective",
            MLMOptions,
            builder="mlm:build",
        ),
    )
}
assert all(set(spec.data) <= set(DATA) for spec in OBJECTIVES.values())


def get_spec(name: str) -> ObjectiveSpec:
    if name not in OBJECTIVES:
        raise unknown_name("objective", name, OBJECTIVES)
    return OBJECTIVES[name]


def objectives_for(data: str) -> tuple[str, ...]:
    """The objectives that train on ``data`` (classes, labelsets, pairs, triplets or sentences)."""
    return tuple(name for name, spec in OBJECTIVES.items() if data in spec.data)


def option_fields() -> dict[str, list[tuple[ObjectiveSpec, dataclasses.Field]]]:
    """Every option name with the objectives that have it (and their field): the CLI's flags."""
    out: dict[str, list] = {}
    for spec in OBJECTIVES.values():
        for f in dataclasses.fields(spec.options):
            out.setdefault(f.name, []).append((spec, f))
    return out
