"""A training run's configuration: :class:`TrainConfig`, its checks and its defaults.

:func:`configure` sets run-level values and objective options, :func:`check_config` refuses impossible values
before anything is loaded, :func:`with_defaults` fills what was left to the objective, :func:`load_data` reads the
data set; :mod:`cea.training.train` runs it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from ..data import load_dataset
from ..data.label_names import MODES as LABEL_NAME_MODES
from ..defaults import AUTO, DEFAULT_MODEL, LR_SCALE_POWER, PATIENCE, REFERENCE_BATCH, UNKNOWN_RATE
from ..encoders.bag import parse_bag
from ..encoders.device import resolve_device, train_batch
from ..encoders.static import is_static_folder
from ..errors import OptionError, flag
from ..objectives import get_spec
from .tasks import resolve_objective


@dataclass
class TrainConfig:
    """A run. ``options`` are the objective's own (``{"pairs": "all", "memory": "bank"}``; see
    :mod:`cea.objectives.catalog`), checked against it when the run starts; the rest is run-level."""

    dataset: str | dict = "trec6"  # anything cea.data.load_dataset takes: a name, file, folder, hub:ID, {split: file}
    model: str = DEFAULT_MODEL
    objective: str = "auto"  # softmax (from the probe's head) for texts with one label, cea for label sets: tasks.py
    options: dict = field(default_factory=dict)
    output: str = "cea-runs/train"
    epochs: float | None = None  # None: the objective's own (softmax 3, up to 10 on small sets; the others 1)
    batch_size: int | str = "auto"  # auto: 32, on a GPU more (cea.encoders.device.train_batch)
    lr: float | None = None  # None: the objective's own (softmax 5e-5, others 2e-5)
    warmup_ratio: float = 0.1
    seed: int = 0
    sampler: str = "pk"  # pk | shuffle
    k_per_class: int = 4
    aux_label_column: str | None = None
    aux_weight: float = 1.0
    layers: int | None = None
    pooling: str | None = None
    knn_k: int = 5
    select: str | None = None  # best | last dev judgement's weights; None: best where dev is judged
    patience: int | None = PATIENCE  # dev judgements without a better one before training stops; None or 0: never
    save_steps: int | None = None
    max_steps: int = -1
    resume: bool = False
    text_column: str = "text"
    label_column: str = "label"
    label_separator: str | None = None  # a local file's labels "a|b": several labels per text
    split_map: str | None = None  # of a hub:ID data set: "train=train,dev=validation,test=test"
    max_seq_length: int | None = None
    train_limit: int | None = None  # sentences/pairs: drawn with limit_seed; labelled texts: with seed
    limit_seed: int = 0
    shots: int | None = None  # examples per label drawn from train (sample seed = shots_seed)
    shots_seed: int = 0
    imbalance: str | None = None  # "LABEL:FRACTION,...": keep that fraction of a label's train examples
    label_names: str = "auto"  # a label's name as one more example where names are words: cea.data.label_names
    unknown_classes: float | None = None  # open intent: hide this share of the labels (drawn with shots_seed)
    unknown_rate: float = UNKNOWN_RATE  # open intent: the share of known dev texts turned away (cea.knn.unknown)
    eval_dataset: str | None = None  # judge runs on another data set (e.g. simcse judged on stsb)
    score_range: tuple[float, float] | None = None  # of a local similarity file (default 0-5)
    text2_column: str | None = None
    score_column: str | None = None
    device: str | None = None  # auto (None), cpu, cuda, cuda:N, mps: cea.encoders.device
    precision: str | None = None  # auto (None), fp32, bf16, fp16: the encoder's forward passes in training
    frozen_layers: int | str | None = AUTO  # word embeddings and first N blocks kept; None: none; auto: objective's
    chunk_size: int | str | None = "auto"  # rows per length-sorted chunk of a batch (cea.encoders.chunks); None: one
    report_to: str = "none"  # the trackers that follow the run: none, tensorboard, mlflow, wandb or all (tracking)
    extra: dict = field(default_factory=dict)


RUN_FIELDS = frozenset(f.name for f in dataclasses.fields(TrainConfig)) - {"options"}


def check_config(config: TrainConfig) -> None:
    """Refuse impossible run-level values before anything is loaded or written, naming the parameter (the CLI: flag)."""
    _check_amounts(config)
    if not 0 < config.unknown_rate < 1:
        raise OptionError("unknown_rate", f"must lie between 0 and 1, got {config.unknown_rate}")
    if not 0 <= config.warmup_ratio < 1:
        raise OptionError("warmup_ratio", f"must be in [0, 1), got {config.warmup_ratio}")
    for name, allowed, said in (
        ("select", (None, "last", "best"), "last or best"),
        ("sampler", ("pk", "shuffle"), "pk or shuffle"),
        ("label_names", LABEL_NAME_MODES, f"one of {', '.join(LABEL_NAME_MODES)}"),
    ):
        if getattr(config, name) not in allowed:
            raise OptionError(name, f"must be {said}, got {getattr(config, name)!r}")
    if Path(config.output).exists() and not Path(config.output).is_dir():
        raise OptionError("output", f"{config.output} is a file; name a folder (it is created)")


def _check_amounts(config: TrainConfig) -> None:
    """Refuse run-level amounts out of range (rates, batches, epochs, steps, layers, examples), naming the parameter."""
    for name in ("lr", "batch_size", "k_per_class", "knn_k") + (("epochs",) if config.max_steps < 0 else ()):
        if getattr(config, name) not in (None, AUTO) and getattr(config, name) <= 0:
            raise OptionError(name, f"must be positive, got {getattr(config, name)}")
    if config.frozen_layers not in (None, AUTO) and (
        not isinstance(config.frozen_layers, int) or config.frozen_layers < 0
    ):
        raise OptionError("frozen_layers", f"must be 0 or more, auto or none, got {config.frozen_layers!r}")
    if config.patience is not None and config.patience < 0:
        raise OptionError("patience", f"must be 0 (never stop early) or more, got {config.patience}")
    for name in ("shots", "train_limit", "layers", "save_steps", "chunk_size"):
        value = getattr(config, name)
        if value is not None and value != "auto" and value < 1:
            shown = "limit" if name == "train_limit" else name
            raise OptionError(
                name, f"must be at least 1, got {value}", f"{flag(shown)} must be at least 1, got {value}"
            )
    if config.max_seq_length is not None and config.max_seq_length < 2:
        raise OptionError("max_seq_length", f"must be at least 2 tokens, got {config.max_seq_length}")
    if config.max_steps == 0 or config.max_steps < -1:
        raise OptionError("max_steps", f"must be positive (or -1: run --epochs), got {config.max_steps}")


def load_data(config: TrainConfig):
    """The run's data set, with its columns, splits and score range as the config names them."""
    return load_dataset(
        config.dataset,
        text_column=config.text_column,
        label_column=config.label_column,
        text2_column=config.text2_column,
        score_column=config.score_column,
        aux_column=config.aux_label_column,
        score_range=config.score_range,
        split_map=config.split_map,
        label_separator=config.label_separator,
    )


def configure(base: TrainConfig, **values) -> TrainConfig:
    """``base`` with ``values`` set: run-level ones (objective, lr, epochs, ...) on the config, the others
    as options of its objective (``pairs="all"``), checked against that objective."""
    config = dataclasses.replace(base, **{k: v for k, v in values.items() if k in RUN_FIELDS})
    options = {**config.options, **{k: v for k, v in values.items() if k not in RUN_FIELDS}}
    if config.objective != AUTO:  # auto: checked once the data name the objective (with_defaults)
        get_spec(config.objective).make_options(options)
    return dataclasses.replace(config, options=options)


# the learning rate of a static encoder's token vectors (cea distill, --model bag) where none is given: the objectives'
# own are a transformer's. banking77, the distillate of all-MiniLM-L6-v2 trained by softmax, its bundle's test accuracy:
# 0.01 91.62, 0.05 91.23, softmax's own 90.49 (the vectors hardly moved), frozen 90.36 (bench/static.py)
STATIC_LR = 0.01


def with_defaults(config: TrainConfig, ds, n_train: int | None = None) -> TrainConfig:
    """``config`` with the objective for ``ds`` (``auto``: :func:`cea.training.tasks.resolve_objective`), its options
    checked, and where not given its batch (the device's), learning rate (the objective's; scaled with the device's
    batch where that was chosen), frozen layers and, with ``n_train``, epochs for that many."""
    spec = get_spec(resolve_objective(config.objective, ds.task, ds.name))
    try:
        spec.make_options(config.options)
    except OptionError as exc:
        if config.objective != AUTO:
            raise
        why = f" ({spec.name} is the objective for {ds.name} when none is named)"
        error = OptionError(exc.parameter, "", exc.cli + why)
        error.args = (str(exc) + why,)
        raise error from None
    epochs, batch = config.epochs, train_batch(config.batch_size, resolve_device(config.device))
    if epochs is None and n_train is not None:
        epochs = spec.default_epochs(n_train, batch)
    frozen = spec.frozen_layers if config.frozen_layers == AUTO else config.frozen_layers
    scale = (batch / REFERENCE_BATCH) ** LR_SCALE_POWER if config.batch_size in (None, AUTO) else 1.0
    static = parse_bag(config.model) or is_static_folder(config.model)  # token vectors, no transformer
    lr = (STATIC_LR if static else spec.lr) * scale if config.lr is None else config.lr
    return dataclasses.replace(
        config, objective=spec.name, lr=lr, epochs=epochs, frozen_layers=frozen, batch_size=batch
    )
