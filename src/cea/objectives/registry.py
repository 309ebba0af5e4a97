"""The objectives by name (each class decorated with :func:`register`): the data each takes, its options (a
subclass of :class:`Options`, fields made by :func:`option`: default, help, checks) and how it is built; read by
``build_objective``, ``TrainConfig.options``, ``cea compare`` (``cea[pairs=all]``) and ``cea train``'s flags.
Bad values raise :class:`cea.errors.OptionError` naming the parameter (``memory_size must be at least 1, got 0``).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from dataclasses import dataclass, field
from typing import Callable

from ..defaults import REFERENCE_BATCH
from ..errors import CeaError, OptionError, flag, unknown_name

DATA = ("classes", "labelsets", "pairs", "triplets", "sentences")  # labelsets: texts with several labels each
OBJECTIVES: dict[str, ObjectiveSpec] = {}


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
    options: type[Options]
    build: Callable  # (model, num_labels, options, seed, data) -> objective
    summary: str
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
                    raise CeaError(f"unknown option {key!r} for {self.name}; "
                                   f"its options: {', '.join(sorted(own)) or 'none'}")
                raise OptionError(key, f"does not apply to objective {self.name}",
                                  f"{flag(key)} only applies to --objective {' or '.join(owners)}, not {self.name}",
                                  prefix="option ")
        return self.options(**values)


def register(name: str, data: str | tuple[str, ...], summary: str, options: type[Options] = Options,
             build: Callable | None = None, lr: float = 2e-5, epochs: float = 1.0, min_steps: int | None = None,
             max_epochs: float | None = None, frozen_layers: int | None = None) -> Callable[[type], type]:
    """Class decorator: registers the objective under ``name``. ``build`` defaults to calling the class with the
    model, the options as keywords and ``num_labels``, ``seed`` and ``multi_label`` where its ``__init__`` takes them.
    ``lr``, ``epochs``: a run's when not given; ``min_steps``, ``max_epochs``: more epochs for small training sets
    (:meth:`ObjectiveSpec.default_epochs`); ``frozen_layers``: blocks kept (0: the word embeddings; None: none)."""
    data = (data,) if isinstance(data, str) else tuple(data)
    assert set(data) <= set(DATA) and name not in OBJECTIVES, (name, data)

    def add(cls: type) -> type:
        takes = inspect.signature(cls).parameters

        def calling(model, num_labels: int, o: Options, seed: int, kind: str):
            context = {k: v for k, v in (("num_labels", num_labels), ("seed", seed),
                                         ("multi_label", kind == "labelsets")) if k in takes}
            return cls(model, **context, **dataclasses.asdict(o))
        OBJECTIVES[name] = ObjectiveSpec(name, data, options, build or calling, summary, lr, epochs,
                                        min_steps, max_epochs, frozen_layers)
        return cls
    return add


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
