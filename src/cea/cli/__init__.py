"""The ``cea`` command: a thin typer layer over the Python API.

Every user error is a :class:`cea.errors.CeaError`; :func:`main` prints it as one line and exits
with code 2, never with a traceback.
"""

from __future__ import annotations

import logging
import os
import sys

import typer
from rich.console import Console

from ..errors import CeaError, OptionError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="cea: class-driven embedding alignment. Probe, train and ship label-aware embeddings.")
err = Console(stderr=True)


def _quiet() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for name in ("transformers", "sentence_transformers", "datasets", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _register() -> None:
    from . import analyze, data, datasets, models, probe, scale, serve, train  # noqa: F401  (commands register themselves on import)


def main() -> None:
    _quiet()
    _register()
    try:
        app()
    except CeaError as exc:
        message = exc.cli if isinstance(exc, OptionError) else exc  # parameters named as flags
        err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
