"""How long work shows where it is: bars on a terminal, plain lines in a log file or a pipe.

A bar redrawn with carriage returns suits a terminal, not a log file. Commands ask :func:`progress_bars` once: on a
terminal the libraries draw their bars (tqdm's); elsewhere :func:`plain` turns those off and long work says where it
is in whole lines: each stage of ``cea fit`` (its ``say``), and each epoch of training and each minute of a long one
(:func:`epoch_lines`, a trainer callback: steps done, their rate, the time left and the last dev figure). Written
here because the trainer's ``ProgressCallback`` draws a bar or nothing, and its ``PrinterCallback`` prints every log
record with no time left.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from functools import partial

from .errors import OptionError

LINES = "lines"  # the progress value of a run that reports in plain lines (train, fit)
VERBOSE = "CEA_VERBOSE"  # "1" (cea --verbose): the libraries' own bars, logs and warnings stay as they draw them


def verbose() -> bool:
    """Whether the libraries cea calls keep their own bars, logs and warnings (``cea --verbose``)."""
    return os.environ.get(VERBOSE) == "1"


def interactive(stream=None) -> bool:
    """Whether ``stream`` (default: standard error, where bars go) is a terminal."""
    return bool(getattr(stream or sys.stderr, "isatty", lambda: False)())


def progress_bars() -> bool:
    """Whether a command draws bars (standard error is a terminal); where not, the libraries' own bars go off too
    (:func:`plain`) and the command writes whole lines."""
    if interactive():
        return True
    plain()
    return False


def plain() -> None:
    """Turn the libraries' own bars off (loading and saving weights, downloads, the model card's examples): output is
    not a terminal. ``TQDM_DISABLE`` is tqdm's own default for every bar not told otherwise."""
    from huggingface_hub.utils import disable_progress_bars
    from transformers.utils import logging

    if verbose():
        return
    os.environ["TQDM_DISABLE"] = "1"  # read by tqdm where it is imported after this
    disable_progress_bars()
    # sentence-transformers' model card draws its own bar when a trainer starts and takes no setting for it; a
    # version without that module (or its tqdm) draws none, and nothing is wrapped
    try:
        from sentence_transformers.base import model_card
    except ImportError:
        return
    bar = getattr(model_card, "tqdm", None)
    if bar is not None and not isinstance(bar, partial):
        model_card.tqdm = partial(bar, disable=True)
    logging.disable_progress_bar()


@contextlib.contextmanager
def no_loading_bars():
    """transformers' own bars off inside ("Loading weights", "Writing model shards"), as they were after: a local
    model loads or saves in a second, and a bar's carriage returns fill a log or a notebook cell with nothing a user
    acts on. Only around local folders: a download keeps the hub's bar."""
    if verbose():
        yield
        return
    from transformers.utils import logging

    was = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            logging.enable_progress_bar()


def parse_duration(value: str | float | int, parameter: str = "budget") -> float:
    """``"15m"``, ``"90s"``, ``"1h"``, ``"1h30m"`` or a number of seconds -> seconds (an OptionError names
    ``parameter``): ``cea fit --budget``, ``cea serve --train-budget``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        parts = re.fullmatch(
            r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", str(value)
        )
        if not parts or not any(parts.groups()):
            raise OptionError(parameter, f"must be a duration such as 15m, 90s or 1h; got {value!r}")
        hours, minutes, secs = (float(g or 0) for g in parts.groups())
        seconds = 3600 * hours + 60 * minutes + secs
    if seconds <= 0:
        raise OptionError(parameter, f"must be positive, got {value!r}")
    return seconds


def duration(seconds: float) -> str:
    """``42 s`` or ``3 min 05 s``."""
    seconds = max(0, round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def epoch_lines(say=None, every: float = 60.0):
    """A trainer callback saying one line per epoch (to ``say``, default standard error): ``epoch 2/10: step
    240/1200, 3.4 steps/s, about 4 min 42 s left, dev head_accuracy 91.20`` (the latest dev figure; time to the cap),
    and within a long epoch the same line at most every ``every`` seconds (``epoch 0.31: step 480/1563, ...``), so
    that a log shows a one-epoch run of an hour moving."""
    from transformers import TrainerCallback

    say = say or (lambda line: print(line, file=sys.stderr, flush=True))

    class EpochLines(TrainerCallback):
        """The line is said after the epoch's dev judgement (which follows ``on_epoch_end``), or at the next step."""

        line, dev = None, ""

        def on_train_begin(self, args, state, control, **kwargs):
            self.start, self.first = time.perf_counter(), state.global_step
            self.said = self.start

        def on_epoch_end(self, args, state, control, **kwargs):
            self.line = self._where(state)

        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            dev = [(k, v) for k, v in (metrics or {}).items() if k.startswith("eval_dev_") and k.endswith("accuracy")]
            if dev:
                self.dev = f", dev {dev[0][0].removeprefix('eval_dev_')} {100 * dev[0][1]:.2f}"
            self._say()

        def on_step_end(self, args, state, control, **kwargs):
            if self.line is None and time.perf_counter() - self.said >= every:
                self.line = self._where(state)
            self._say()

        def on_train_end(self, args, state, control, **kwargs):
            self._say()

        def _where(self, state) -> str:
            done, used = state.global_step - self.first, time.perf_counter() - self.start
            rate = done / used if used > 0 else 0.0
            left = (state.max_steps - state.global_step) / rate if rate else 0.0
            return (
                f"epoch {state.epoch or 0:.3g}: step {state.global_step}/{state.max_steps}, "
                f"{rate:.2f} steps/s, about {duration(left)} left"
            )

        def _say(self):
            if self.line:
                say(self.line + self.dev)
                self.line, self.said = None, time.perf_counter()

    return EpochLines()
