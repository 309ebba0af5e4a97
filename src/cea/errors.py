"""The one error type users see: every problem caused by the user's input raises :class:`CeaError` with a one-line
message that names the problem and the fix; the CLI prints ``error: <message>`` and exits with code 2.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class CeaError(ValueError):
    """A user-facing error: one line, the problem and its fix (a ValueError, as Python's and scikit-learn's are)."""


def unknown_name(kind: str, name: str, known: Iterable[str], hint: str = "") -> CeaError:
    """An error for an unknown catalog name that lists the closest known names."""
    known = sorted(known)
    lower = {k.lower(): k for k in known}
    close = [lower[c] for c in difflib.get_close_matches(name.lower(), list(lower), n=3, cutoff=0.5)]
    listed = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(known)}"
    return CeaError(f"unknown {kind} {name!r}; {listed}" + (f" {hint}" if hint else ""))


def flag(parameter: str) -> str:
    """The command-line flag of a Python parameter: ``memory_size`` -> ``--memory-size``."""
    return "--" + parameter.replace("_", "-")


class OptionError(CeaError):
    """A bad option: names the parameter (``memory_size must be ...``); ``cli`` the flag (``--memory-size``)."""

    def __init__(self, parameter: str, problem: str, cli: str | None = None, prefix: str = ""):
        super().__init__(f"{prefix}{parameter} {problem}")
        self.parameter, self.cli = parameter, cli or f"{flag(parameter)} {problem}"
