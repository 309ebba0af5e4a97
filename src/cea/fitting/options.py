"""What a user asks of ``cea fit``, as one record its stages read.

What it holds
    :class:`FitOptions`: every argument of :func:`cea.fitting.fit` by name, with the same defaults: the data and how
    to read it, the candidate encoders, the budget, the work folder, where and how encoders run and train, the seed,
    the label names, how progress and the stage lines are shown, the trackers and the latency.

How
    :func:`cea.fitting.fit` builds it once from its arguments and passes it down: :mod:`cea.fitting.run` reads the
    data, the training asked and the output from it; :class:`cea.fitting.candidates.Candidates` holds it, so each
    stage finds the device, the progress style and the latency there.

What it expects
    The values :func:`cea.fitting.fit` documents; they are checked where they are used (an unknown tracker, a bad
    latency or output folder: an :class:`cea.errors.OptionError` before anything runs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

DEFAULT_BUDGET = "15m"


@dataclasses.dataclass(frozen=True)
class FitOptions:
    """The arguments of one :func:`cea.fitting.fit`, as given (its docstring says what each means)."""

    dataset: str | dict = "trec6"
    output: str | Path = "cea-bundle"
    models: list[str] | None = None
    budget: str | float = DEFAULT_BUDGET
    text_column: str = "text"
    label_column: str = "label"
    split_map: str | None = None
    work: str | Path | None = None
    device: str | None = None
    precision: str | None = None
    seed: int = 0
    label_names: str = "auto"
    label_separator: str | None = None
    progress: bool | str = True
    say: Callable[[str], object] = print
    report_to: str = "none"
    latency: float | None = None

    @property
    def bars(self) -> bool:
        """Whether progress is drawn as bars (else plain lines, or only the stage lines)."""
        return self.progress is True

    def shown(self) -> dict:
        """The options as the trackers log them: every one but how progress and the stage lines are shown."""
        return {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if field.name not in ("say", "progress")
        }
