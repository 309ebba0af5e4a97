"""Fine-tune an encoder with an objective on the sentence-transformers trainer.

``train(TrainConfig(...))`` loads the data and encoder, builds the objective, trains with ``SentenceTransformerTrainer``
(checkpoints, resume and logging are the Hugging Face Trainer's), judges dev as it goes (:mod:`cea.training.tasks`),
stops when dev stops improving and keeps the best judged weights (:mod:`cea.training.schedule`), and writes::

    OUT/model/                 a sentence-transformers folder (the best judged weights, or with --select last the last;
                               beside them head.npz, the trained head where the objective has one)
    OUT/checkpoints/           the last checkpoint (and the best one), with the objective's memory and the run's config
    OUT/results.json           dev and test metrics, configuration, versions, fingerprints, timings
    OUT/embeddings/            what the final judgement encoded with the kept weights (cea.encoders.store), which
                               cea report and cea analyze read instead of encoding again
    OUT/training_log.jsonl     the trainer's log history
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import threading
import time
from pathlib import Path

import psutil
import torch
from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
from transformers import PrinterCallback, set_seed
from transformers.trainer_utils import get_last_checkpoint

from ..data import load_dataset
from ..defaults import AUTO
from ..encoders import forget_fingerprint, freeze, load_encoder, model_fingerprint, num_layers
from ..encoders.bag import build_bag_encoder, parse_bag
from ..encoders.build import cut_tokens, is_static
from ..encoders.device import resolve_device, resolve_precision
from ..encoders.store import RUN_EMBEDDINGS, EmbeddingStore
from ..errors import CeaError, OptionError
from ..evaluation.provenance import provenance
from ..objectives import build_objective, get_spec
from ..paths import atomic_path, write_json, write_text
from ..progress import LINES, epoch_lines, plain, verbose
from ..reports.card import README, run_card
from .arguments import trainer_arguments, training_plan
from .checkpoints import check_resumed_config, judged_before, memory_callback, prune_callback, run_record
from .config import TrainConfig, check_config, load_data, with_defaults
from .schedule import best_weights, evaluate_as_planned
from .tasks import build_task, training_data
from .tracking import tracked, trackers


class _NaNGuard(torch.nn.Module):
    """Wrap the objective: a non-finite loss stops training with the step and the last checkpoint. The loss is read
    every ``every`` steps (on a GPU the trainer's logging steps, which read it anyway: a read waits for the GPU)."""

    def __init__(self, objective, checkpoints: Path, lr: float, every: int = 1):
        super().__init__()
        self.objective, self.model, self.checkpoints, self.lr, self.step = (
            objective,
            objective.model,
            checkpoints,
            lr,
            0,
        )
        self.every, self.finite = every, None

    def forward(self, sentence_features, labels):
        loss = self.objective(sentence_features, labels)
        self.step += 1
        finite = torch.isfinite(loss.detach())
        self.finite = finite if self.finite is None else self.finite & finite
        if self.step % self.every == 0 and not self.finite:
            last = get_last_checkpoint(str(self.checkpoints)) if self.checkpoints.exists() else None
            when = f"step {self.step}" if self.every == 1 else f"steps {self.step - self.every + 1}-{self.step}"
            raise CeaError(
                f"the loss became NaN or infinite at {when}; lower --lr (now {self.lr}) "
                f"or check the labels; last good checkpoint: {last or 'none yet'}"
            )
        return loss


def _ends_in_order() -> None:
    """Under torchrun: every process past its last collective (a barrier), and the process group destroyed when the
    process exits, before the interpreter tears down (an ``atexit`` hook, once: ``cea train --imbalance each:``
    trains several runs in one process).

    Why: a process that exits with the gloo process group alive destroys gloo's threads unjoined while the interpreter
    finalizes, and C++ aborts it (``terminate called without an active exception``, SIGABRT): the second process of a
    two-process run, leaving while the main one still evaluates and writes, died so at random (9 of 20 exits in a
    two-process gloo script that skips ``destroy_process_group``; 0 of 20 with it), and torchrun called the run failed.
    """
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return
    torch.distributed.barrier()
    global _ENDING
    if not _ENDING:
        _ENDING = True
        atexit.register(_destroy_process_group)


_ENDING = False  # the atexit hook is registered


def _destroy_process_group() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


class _PeakMemory:
    """Peak resident memory during a block, sampled every 50 ms (psutil)."""

    def __enter__(self):
        self.proc = psutil.Process()
        self.base = self.peak = self.proc.memory_info().rss
        self.stop, self.thread = threading.Event(), threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self):
        while not self.stop.wait(0.05):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def train(
    config: TrainConfig,
    progress: bool | str = True,
    callbacks=None,
    data=None,
    store: EmbeddingStore | None = None,
    model=None,
) -> dict:
    """Train and evaluate; returns the results dict also written to OUT/results.json.

    ``progress``: True draws the trainer's bar, ``"lines"`` one plain line per epoch (:mod:`cea.progress`), False
    nothing. ``callbacks``: extra ``transformers.TrainerCallback`` objects; ``data``: the data set ``config.dataset``
    names, already loaded; ``store``: what was encoded before (:class:`cea.encoders.store.EmbeddingStore`; ``cea fit``
    hands over its own, holding the starting weights' train texts for a head started from the probe): every judgement
    of the run reads and fills it; ``model``: the encoder ``config.model`` names, loaded before, trained in place (on
    return it holds the kept weights). ``config.report_to``: the trackers that follow the run (:mod:`.tracking`).
    """
    if config.objective != AUTO:
        get_spec(config.objective).make_options(config.options)  # before anything is loaded
    check_config(config)
    out = Path(config.output)
    if not config.resume and ((out / "results.json").exists() or (out / "checkpoints").exists()):
        raise CeaError(f"{out} already holds a run; pass --resume to continue it or choose another --output")
    names = trackers(config.report_to)
    with tracked(names, out, {"cea": dataclasses.asdict(config)}) as log:
        results = _train(config, progress, callbacks, data, store, model, names)
        if "metrics" in results:  # the figures the run ends on, beside the trainer's dev judgements
            log(
                {
                    f"{split}_{key}": value
                    for split, metrics in results["metrics"].items()
                    for key, value in metrics.items()
                },
                results["steps"],
            )
        return results


def _train(config: TrainConfig, progress, callbacks, data, store, model, report_to: list[str]) -> dict:
    """:func:`train`'s run, ``report_to`` the trackers the trainer logs to."""
    out = Path(config.output)
    checkpoints = out / "checkpoints"
    started = time.perf_counter()
    if progress == LINES:
        plain()
    set_seed(config.seed)
    ds = load_data(config) if data is None else data
    config, options, train_data = _setup(config, ds)
    bag_dim, device = parse_bag(config.model), resolve_device(config.device)
    precision = resolve_precision(config.precision, device)
    placed = {"device": device, "precision": precision}
    if device.startswith("cuda:"):
        torch.cuda.set_device(device)  # the trainer places the model on the current GPU
    model = _model(config, train_data, model, bag_dim, device)
    base_fingerprint = model_fingerprint(model)
    objective = _objective(config, options, model, train_data)
    task = build_task(config, train_data, objective, store)  # its trained head judges dev where it has one
    run_plan = training_plan(config, train_data, task)
    args = trainer_arguments(config, train_data, run_plan, checkpoints, device, precision, progress, report_to)
    callback = memory_callback(objective, checkpoints, run_record(config, options))
    select_by, best_keeper = _selection(config, task, objective)
    guard = _NaNGuard(objective, checkpoints, config.lr, args.logging_steps if device.startswith("cuda") else 1)
    trainer = SentenceTransformerTrainer(
        model=model,
        args=args,
        train_dataset=train_data.train_dataset,
        loss=guard,
        evaluator=task.evaluator,
        callbacks=[
            callback,
            prune_callback(checkpoints, select_by),
            evaluate_as_planned(run_plan),
            *([best_keeper] if best_keeper else []),
            *(callbacks or []),
            *([epoch_lines()] if progress == LINES else []),
        ],
    )
    if progress is not True and not verbose():  # no bar: the trainer would print each log record as a dict; they
        trainer.remove_callback(PrinterCallback)  # go to the run's training_log.jsonl, and cea's lines say where it is
    resume_from = _start(config, options, checkpoints, callback, objective, task, model)
    with _PeakMemory() as peak:
        t0 = time.perf_counter()
        trainer.train(resume_from_checkpoint=resume_from)
        train_seconds = time.perf_counter() - t0
    _ends_in_order()
    if not trainer.is_world_process_zero():  # under torchrun: the main process evaluates and writes the run
        return {"process_index": trainer.args.process_index, "train_seconds": round(train_seconds, 2)}
    history = _history(task, trainer, resume_from)
    kept, model = _kept(config, task, history, best_keeper, checkpoints, model, trainer.state.global_step)
    forget_fingerprint(model)  # kept before training: the weights have changed since
    metrics, predictions = task.final(model)
    _save(model, out, task)
    results = {
        "format": "cea.train/1",
        "kind": train_data.kind,
        "metrics": metrics,
        "config": {**dataclasses.asdict(config), "options": dataclasses.asdict(options)} | placed,  # all, resolved
        "dev_history": history,
        "labels": train_data.labels,
        "n_train": train_data.n_train,
        **({"unknown_classes": train_data.hidden} if train_data.hidden else {}),
        **_spent(config, trainer, kept, best_keeper, train_seconds, peak),
        "base_model_fingerprint": base_fingerprint,
        "model_fingerprint": model_fingerprint(model),
        "dataset_fingerprint": ds.fingerprint(),
        "total_seconds": round(time.perf_counter() - started, 2),
        **provenance(),
    }
    _write(out, results, predictions, trainer.state.log_history)
    return results


def _objective(config: TrainConfig, options, model, train_data):
    """The run's objective on ``model``, built from ``config`` and its resolved ``options``."""
    objective = build_objective(
        config.objective,
        model,
        len(train_data.labels),
        seed=config.seed,
        data=train_data.kind,
        aux=train_data.aux_ids is not None,
        aux_weight=config.aux_weight,
        **dataclasses.asdict(options),
    )
    objective.chunk_size = config.chunk_size
    return objective


def _selection(config: TrainConfig, task, objective):
    """``(select_by, best_keeper)``: the evaluator and metric that pick the kept weights (None unless ``select`` is
    best), and the callback that keeps the best weights and stops early (None where neither is asked or nothing
    judges dev)."""
    selection = (task.evaluator.name, task.primary) if task.evaluator is not None else None  # evaluator, metric key
    select_by = selection if config.select == "best" else None
    keeps = selection and (select_by or config.patience)
    return select_by, best_weights(objective, *selection, config.patience) if keeps else None


def _spent(config: TrainConfig, trainer, kept, best_keeper, train_seconds: float, peak) -> dict:
    """What the run's training did and cost, for its results: steps and epochs run, the step kept, whether it stopped
    early, seconds (a whole run and an epoch) and the peak memory above the start."""
    epochs_run = max(trainer.state.epoch or config.epochs, 1e-9)
    return {
        "steps": trainer.state.global_step,
        "epochs": trainer.state.epoch,
        "kept_step": kept,
        "stopped_early": bool(best_keeper and best_keeper.stopped),
        "train_seconds": round(train_seconds, 2),
        "seconds_per_epoch": round(train_seconds / epochs_run, 2),
        "peak_memory_mb": round((peak.peak - peak.base) / 2**20, 1),
    }


def _history(task, trainer, resume_from: str | None) -> list:
    """The run's dev judgements, those made before a resume first (none where nothing judges dev)."""
    if task.evaluator is None:
        return []
    history = task.evaluator.history
    if resume_from is not None:  # the epochs judged before the run was stopped
        history = judged_before(trainer.state.log_history, task.evaluator.name, history) + history
    return history


def _model(config: TrainConfig, train_data, model, bag_dim: int | None, device: str):
    """The encoder a run trains: a bag of embeddings from scratch (its vocabulary from the training texts), the one
    given, or ``config.model`` loaded; cut to ``max_seq_length`` and its first ``frozen_layers`` blocks frozen."""
    if bag_dim:
        columns = train_data.train_dataset.column_names
        column = "text" if "text" in columns else columns[0]
        model = build_bag_encoder(train_data.train_dataset[column], dim=bag_dim, seed=config.seed, device=device)
    elif model is None:
        model = load_encoder(config.model, pooling=config.pooling, layers=config.layers, device=device)
    if config.max_seq_length:
        cut_tokens(model, config.max_seq_length)
    if config.frozen_layers is not None and not is_static(model):  # the optimizer takes what requires a gradient
        if config.frozen_layers > num_layers(model):
            raise OptionError(
                "frozen_layers",
                f"is {config.frozen_layers} but the model has {num_layers(model)} "
                f"blocks; choose 0..{num_layers(model)}",
            )
        freeze(model, config.frozen_layers)
    if hasattr(model, "model_card_data"):  # its usage snippet would encode examples again at every checkpoint
        model.model_card_data.generate_widget_examples = False
    return model


def _kept(config: TrainConfig, task, history: list, best_keeper, checkpoints: Path, model, last_step: int):
    """The step whose weights the run keeps and the model holding them: the last, or with ``select="best"`` the best
    judged (restored by ``best_keeper``, or read from its checkpoint where it was judged before a resume)."""
    best = max(history, key=lambda h: h[task.primary]) if history else None
    if config.select != "best" or best is None or best is history[-1]:
        return last_step, model
    kept = best["steps"]
    if best_keeper.restore() != kept:  # judged before a resume: its checkpoint (prune_callback kept it)
        folder = checkpoints / f"checkpoint-{kept}"
        if not folder.exists():
            raise CeaError(f"the best judgement's checkpoint {folder} is gone; use --select last")
        model = SentenceTransformer(str(folder), device=str(model.device))
        task.head = None  # the head in memory is the last step's, not the selected one's
    return kept, model


def _setup(config: TrainConfig, ds):
    """The run's settings resolved on its data (each objective's epochs for the examples it trains on, the weights it
    keeps), its objective's options, and what it learns from and is judged on
    (:func:`cea.training.tasks.training_data`)."""
    config = with_defaults(config, ds)
    options = get_spec(config.objective).make_options(config.options)
    train_data = training_data(config, ds, load_dataset(config.eval_dataset) if config.eval_dataset else None)
    config = with_defaults(config, ds, train_data.n_train)  # the epochs, for the examples the run trains on
    options = options.for_data(train_data.kind)
    judged = train_data.judged_on is not None
    if config.select == "best" and not judged:
        raise CeaError("--select best needs a dev evaluation; pass --eval-dataset (e.g. stsb)")
    config = dataclasses.replace(config, select=config.select or ("best" if judged else "last"))
    return config, options, train_data


def _start(config: TrainConfig, options, checkpoints: Path, callback, objective, task, model) -> str | None:
    """Where the run starts: with ``resume``, the last checkpoint (its settings checked, the memories restored);
    else from scratch, an objective's head prepared where it has one (softmax: the probe's weights)."""
    if config.resume:
        resume_from = get_last_checkpoint(str(checkpoints)) if checkpoints.exists() else None
        if resume_from is None:
            raise CeaError(f"nothing to resume in {checkpoints}; start without --resume")
        check_resumed_config(config, options, Path(resume_from))
        callback.restore(Path(resume_from))
        return resume_from
    if hasattr(objective, "prepare") and task.data.label_ids is not None:
        texts = list(task.data.train_dataset["text"])
        objective.prepare(texts, task.data.label_ids, task.store.get(task.store.state(model), texts))
    return None


def _write(out: Path, results: dict, predictions, log: list) -> None:
    """The run's ``results.json``, test predictions, model card and training log."""
    if predictions is not None:
        predictions.save(out)
    write_json(out / "results.json", results)
    write_text(out / "model" / README, run_card(results, out.name))  # sentence-transformers' card replaced
    write_text(out / "training_log.jsonl", "".join(json.dumps(r) + "\n" for r in log))


def _save(model, out: Path, task) -> None:
    """``out/model`` (beside the encoder the ``task``'s trained head, ``head.npz``: a bundle may ship it), whole or not
    at all; and what the final judgement encoded, in ``out/embeddings`` (cea analyze and the report read it)."""
    task.store.save(task.store.state(model), out / RUN_EMBEDDINGS)
    try:
        with atomic_path(out / "model") as tmp:
            model.save(str(tmp))
            if task.head is not None:
                task.head().save(tmp)
    except OSError as exc:
        raise CeaError(
            f"saving the model to {out / 'model'} failed ({exc}); nothing was written there, "
            "the checkpoints are intact: free space and rerun with --resume"
        ) from None


def train_or_reuse(config: TrainConfig, progress: bool = True) -> dict:
    """The results of the finished run in ``config.output``, or of training it now (grids restart where they stop)."""
    done = Path(config.output) / "results.json"
    return json.loads(done.read_text()) if done.exists() else train(config, progress=progress)
