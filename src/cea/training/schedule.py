"""The dev schedule of a training run: when it evaluates dev, when it stops, and which weights it keeps.

The plan
    A run with a trained head (softmax) is judged by that head's dev accuracy, which encodes dev alone, from the
    objective's own epochs on (judged earlier, a stop kept epochs before dev had climbed:
    docs/decisions.md#dev-evaluations), every half epoch or after twice as many training texts as dev holds, the
    longer, and at its last step. A run judged by kNN is judged after every epoch when something chooses among the
    judgements (``select="best"`` or a patience), else about three times (:func:`evaluation_epochs`).

Stopping
    With ``patience`` = P (``cea.defaults.PATIENCE``), training stops after P judgements in a row without a better dev
    figure; the run's epochs are the cap. The best judged weights are kept in memory (:func:`best_weights`).

Why not the trainer's own: ``transformers.EarlyStoppingCallback`` needs ``load_best_model_at_end``, which saves a
checkpoint at every judgement and chooses with its own metric key; here the objective's head and memory are kept with
the encoder, and only improvements are copied, in memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from transformers import TrainerCallback

from .checkpoints import judged_before

TRAINED_PER_DEV_TEXT = 2  # a head's judgement follows at least this many training texts per dev text it encodes


@dataclass
class Plan:
    """How dev is judged: ``strategy`` (the trainer's ``eval_strategy``: ``steps``, ``epoch`` or ``no``), ``steps``
    (its ``eval_steps`` with ``steps``) and ``epochs`` (with ``epoch``: the epochs after which the judgement runs)."""

    strategy: str
    steps: int | None = None
    epochs: tuple[int, ...] = ()
    start: int = 0  # with ``steps``: no judgement before this step


def evaluation_epochs(epochs: float, select: str) -> list[int]:
    """The epochs after which a kNN-judged run judges dev: every one with ``select="best"`` (it chooses among them);
    otherwise about three, evenly spaced, and the last (each judgement encodes the training texts and dev again)."""
    last = math.ceil(epochs)
    if last <= 1 and select != "best":
        return []  # one epoch: the final evaluation judges the same model
    every = 1 if select == "best" else math.ceil(last / 3)
    return sorted({*range(every, last + 1, every), last})


def plan(
    epochs: float,
    steps_per_epoch: int,
    select: str,
    patience: int | None,
    head_dev: int | None = None,
    batch_size: int = 32,
    from_epoch: float = 0,
) -> Plan:
    """The judgements of a run of ``epochs`` (the cap) with ``steps_per_epoch`` of ``batch_size``: where the run's
    head judges on ``head_dev`` dev texts, from ``from_epoch`` epochs on (the objective's own), every half epoch or
    every ``TRAINED_PER_DEV_TEXT * head_dev / batch_size`` steps, the longer; where kNN judges (``head_dev`` None),
    every epoch when ``select`` or ``patience`` chooses, else :func:`evaluation_epochs`."""
    chooses = select == "best" or bool(patience)
    if head_dev is not None and chooses:
        every = max(math.ceil(steps_per_epoch / 2), math.ceil(TRAINED_PER_DEV_TEXT * head_dev / batch_size))
        return Plan("steps", steps=max(1, every), start=math.ceil(from_epoch * steps_per_epoch))
    judged = evaluation_epochs(epochs, "best" if chooses else select)
    return Plan("epoch", epochs=tuple(judged)) if judged else Plan("no")


def evaluate_as_planned(run_plan: Plan):
    """A trainer callback that lets the trainer judge dev only as ``run_plan`` says: at an epoch's end only after
    ``run_plan.epochs``; with ``steps``, also at the last step (the trainer judges multiples of ``eval_steps`` only)."""

    class EvaluateAsPlanned(TrainerCallback):
        def on_epoch_end(self, args, state, control, **kwargs):
            if run_plan.strategy == "epoch" and math.ceil((state.epoch or 0) - 1e-6) not in run_plan.epochs:
                control.should_evaluate = False  # a run of 2.5 epochs ends its third at 2.5

        def on_step_end(self, args, state, control, **kwargs):
            if run_plan.strategy == "steps" and state.global_step >= state.max_steps:
                control.should_evaluate = True
            elif run_plan.strategy == "steps" and state.global_step < run_plan.start:
                control.should_evaluate = False

    return EvaluateAsPlanned()


def best_weights(module, evaluator: str, primary: str, patience: int | None):
    """A trainer callback that copies ``module``'s state (the encoder, its head and memory) to memory whenever the
    dev judgement ``primary`` of ``evaluator`` beats every one before, and with ``patience`` stops training after that
    many judgements in a row without a better one. ``restore()`` puts the best state back and returns its step (None:
    none judged in this process)."""
    key = f"eval_{primary}"

    class BestWeights(TrainerCallback):
        best, step, state, waited, stopped = -math.inf, None, None, 0, False

        def on_train_begin(self, args, state, control, **kwargs):  # a resumed run: the judgements made before
            for h in judged_before(state.log_history, evaluator, []):
                self._judged(h.get(primary, -math.inf), h["steps"], control, keep=False)

        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            if metrics and key in metrics:
                self._judged(metrics[key], state.global_step, control, keep=True)

        def _judged(self, value, step, control, keep):
            if value > self.best:
                self.best, self.waited = value, 0
                self.step, self.state = (
                    (step, {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()})
                    if keep
                    else (None, None)
                )
                return
            self.waited += 1
            if patience and self.waited >= patience:
                control.should_training_stop, self.stopped = True, True

        def restore(self) -> int | None:
            if self.state is None:
                return None
            module.load_state_dict(self.state)
            return self.step

    return BestWeights()
