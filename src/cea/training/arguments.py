"""The sentence-transformers trainer's arguments for a run: its schedule, when dev is judged, its batches, its device.

:func:`trainer_arguments` turns a :class:`cea.training.config.TrainConfig` into ``SentenceTransformerTrainingArguments``
(:func:`cea.training.train.train` builds the trainer with them): the epochs or steps, lr and warmup, checkpoints,
P x K batches for labelled texts, dev judged as :func:`training_plan` says (:mod:`cea.training.schedule`), and the
trainer's own flags for the device and precision (:func:`trainer_device_args`).
"""

from __future__ import annotations

import os
from pathlib import Path

from sentence_transformers import SentenceTransformerTrainingArguments

from ..objectives import get_spec
from .config import TrainConfig
from .sampler import pk_sampler_factory
from .schedule import plan

# batches tokenised beside the GPU's steps by this many loader processes (0: in the training process)
LOADER_WORKERS = {"cuda": 2}


def trainer_device_args(device: str, precision: str) -> dict:
    """The trainer's own flags for ``device`` and ``precision``: ``use_cpu`` only on the CPU (DDP over gloo under
    torchrun; on GPUs NCCL), ``bf16``/``fp16`` for its autocast (and fp16's grad scaler), ``tf32`` for TF32 matrix
    products. On a GPU, :data:`LOADER_WORKERS` processes tokenise the batches, copied without waiting (the host queues
    the next step while the GPU runs), and the per-step NaN filter (a host sync) is off
    (:class:`cea.training.train._NaNGuard`)."""
    workers = LOADER_WORKERS.get(device.split(":")[0], 0)
    return {
        "use_cpu": device == "cpu",
        "bf16": precision == "bf16",
        "fp16": precision == "fp16",
        "tf32": True if precision == "tf32" else None,
        "logging_nan_inf_filter": False,
        "dataloader_num_workers": workers,
        "dataloader_persistent_workers": workers > 0,
        **({"accelerator_config": {"non_blocking": True}} if device.startswith("cuda") else {}),
    }


def training_plan(config: TrainConfig, train_data, task):
    """When the run judges dev (:func:`cea.training.schedule.plan`): once at the end where nothing judges it."""
    if task.evaluator is None:
        return plan(0, 1, "last", None)
    steps_per_epoch = max(1, train_data.n_train // config.batch_size)
    run_epochs = config.epochs if config.max_steps < 0 else config.max_steps / steps_per_epoch  # --max-steps cuts them
    return plan(
        run_epochs,
        steps_per_epoch,
        config.select,
        config.patience,
        task.dev_size,
        config.batch_size,
        from_epoch=get_spec(config.objective).epochs,
    )


def trainer_arguments(
    config: TrainConfig, train_data, run_plan, checkpoints: Path, device: str, precision: str, progress, report_to
) -> SentenceTransformerTrainingArguments:
    """The trainer's arguments for ``config``: its schedule, dev judged as ``run_plan`` says, checkpoints in
    ``checkpoints``, P x K batches for labelled texts (unless ``sampler`` is shuffle)."""
    steps_per_epoch = max(1, train_data.n_train // config.batch_size)
    use_pk = train_data.kind in ("classes", "labelsets") and config.sampler == "pk"
    args = SentenceTransformerTrainingArguments(
        output_dir=str(checkpoints),
        num_train_epochs=config.epochs,
        max_steps=config.max_steps,
        per_device_train_batch_size=config.batch_size,
        learning_rate=config.lr,
        warmup_ratio=config.warmup_ratio,
        seed=config.seed,
        data_seed=config.seed,
        eval_strategy=run_plan.strategy,
        eval_steps=run_plan.steps,
        save_strategy="steps" if config.save_steps else "epoch",
        save_steps=config.save_steps or 500,
        logging_steps=max(1, min(50, steps_per_epoch // 4)),
        report_to=report_to or "none",
        **trainer_device_args(device, precision),
        disable_tqdm=progress is not True,
        dataloader_drop_last=train_data.n_train > config.batch_size,
        batch_sampler=pk_sampler_factory(config.k_per_class) if use_pk else "batch_sampler",
    )
    if device.startswith("cuda") and "WORLD_SIZE" not in os.environ:
        args._n_gpu = 1  # one process, one GPU: the trainer would wrap the model in DataParallel over all of them
    return args
