"""``cea fit``'s time budget: the duration a user gives is read by :func:`cea.progress.parse_duration`; here, the
clock its stages are told against (:class:`Clock`), the trainer callback that goes on only where a useful share of the
planned steps fits (:func:`budget_callback`), and the encode timing its estimates start from
(:func:`seconds_per_text`).
:mod:`cea.fitting.run` spends it.
"""

from __future__ import annotations

import time

from ..encoders.embeddings import encode
from ..progress import duration

USEFUL = 0.2  # the share of the planned training steps that must fit in the budget for training to go on
MEASURED = (2, 5)  # the steps after which a training step's time is measured: after 2 warm-up steps, over 5


class Clock:
    """The budget: seconds used and left, and a line per stage with an estimate of the time left."""

    NAMES = {1: "probe", 2: "frozen", 3: "train", 4: "choose", 5: "bundle"}

    def __init__(self, seconds: float, say):
        self.seconds, self.start, self.say = seconds, time.perf_counter(), say
        self.began: dict[str, float] = {}  # stage -> seconds into the run when it began

    @property
    def used(self) -> float:
        return time.perf_counter() - self.start

    @property
    def left(self) -> float:
        return self.seconds - self.used

    def stages(self) -> dict[str, float]:
        """Wall seconds of each stage that ran, up to now."""
        marks = sorted(self.began.items(), key=lambda item: item[1]) + [("end", self.used)]
        return {name: round(end - start, 1) for (name, start), (_, end) in zip(marks, marks[1:])}

    def stage(self, number: int, what: str, estimate: float | None = None, name: str | None = None) -> None:
        """Say stage ``number`` begins (``name``: a part of it timed apart, e.g. ``cea fit --latency``'s static)."""
        self.began.setdefault(name or self.NAMES[number], self.used)
        rest = f", about {duration(estimate)} to go" if estimate is not None else ""
        self.say(f"[{number}/5] {what} ({duration(self.used)} used of {duration(self.seconds)}{rest})")


def budget_callback(deadline: float):
    """A trainer callback that times the first training steps (:data:`MEASURED`), projects from them how many of the
    planned steps fit before ``deadline``, stops at once where that is under :data:`USEFUL` of them, and stops at the
    deadline otherwise. ``report()`` says what it measured and why it stopped (None: it did not)."""
    from transformers import TrainerCallback

    warm, over = MEASURED

    class Budget(TrainerCallback):
        stopped, seconds_per_step, fits, planned = None, None, None, None

        def on_train_begin(self, args, state, control, **kwargs):
            self.first, self.planned = state.global_step, state.max_steps

        def on_step_end(self, args, state, control, **kwargs):
            now, done = time.perf_counter(), state.global_step - self.first
            if done == warm:
                self.t0 = now
            elif done == warm + over:
                self.seconds_per_step = (now - self.t0) / over
                self.fits = min(state.max_steps, state.global_step + int((deadline - now) / self.seconds_per_step))
                if self.fits < USEFUL * state.max_steps:
                    self.stopped = (
                        f"{self.fits} of {state.max_steps} steps fit at {self.seconds_per_step:.2f} s a "
                        f"step, under {USEFUL:.0%}"
                    )
            if self.stopped is None and now > deadline:
                self.stopped = f"the budget's deadline, after {state.global_step} of {state.max_steps} steps"
            control.should_training_stop |= self.stopped is not None

        def report(self) -> dict:
            return {
                "planned_steps": self.planned,
                "seconds_per_step": self.seconds_per_step and round(self.seconds_per_step, 3),
                "steps_that_fit": self.fits,
                "budget_stopped": self.stopped,
            }

    return Budget()


def seconds_per_text(model, texts, n: int = 256) -> float:
    """Seconds per text of encoding (:func:`cea.encoders.embeddings.encode`) on (up to) ``n`` of ``texts``: the unit
    of the budget's estimates."""
    sample = list(texts[:n])
    encode(model, sample[:8])  # warm-up
    t0 = time.perf_counter()
    encode(model, sample)
    return (time.perf_counter() - t0) / len(sample)
