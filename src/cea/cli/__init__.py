"""The ``cea`` command: a thin typer layer over the Python API.

Every user error is a :class:`cea.errors.CeaError`; :func:`main` prints it as one line and exits
with code 2, never with a traceback. The commands import the API they run inside their bodies, for start-up time:
``cea --help`` loads typer, the defaults and the objectives' options, not training, serving or evaluation.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from pathlib import Path

import typer
from rich.console import Console

from ..errors import CeaError, OptionError
from ..progress import VERBOSE, interactive, verbose

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="cea: class-driven embedding alignment. Probe, train and ship label-aware embeddings.",
)
err = Console(stderr=True)


@app.callback()
def _group(
    verbose: bool = typer.Option(
        False,
        "--verbose",
        help="show the libraries' own progress bars, logs and "
        "warnings (cea says what a user acts on; these are off by default)",
    ),
) -> None:
    """Keep ``cea`` a group of commands when only one command's module is imported (typer would make a
    lone command the root, and ``cea fit ...`` would read ``fit`` as its first argument). ``--verbose`` (``cea
    --verbose COMMAND``): read by :func:`main` before the command runs."""


# where and how encoders run (cea.encoders.device), the same two flags on every command that runs one
DEVICE = typer.Option("auto", help="auto (CUDA, then MPS, then the CPU), cpu, cuda, cuda:N or mps")
REPORT_TO = typer.Option(
    "none",
    help="follow the run in none, tensorboard, mlflow, wandb or all (installed ones); pip install 'cea\\[track]'",
)
PRECISION = typer.Option(
    "fp32",
    help="the encoder's weights: fp32, bf16, fp16 or tf32 (CUDA) or auto (bf16 on "
    "CPUs with AVX512_BF16 or AMX, else fp32)",
)
TRAIN_PRECISION = typer.Option(
    "auto",
    help="training's autocast: auto (bf16 on CPUs with AVX512_BF16 or AMX, "
    "else fp32, CUDA included), fp32, bf16, fp16 or tf32 (CUDA)",
)
# where batch work runs (cea.batch.engines): cea predict --output DIR and cea embed
ENGINE = typer.Option(
    "local",
    help="local (this process) or ray (a pool of actors that each load the model once; pip install 'cea\\[ray]')",
)
ADDRESS = typer.Option(
    None, help="with --engine ray: auto or HOST:PORT of a running cluster (default: a Ray on this machine)"
)
ACTORS = typer.Option(
    None,
    help="with --engine ray: actors, each loading the model once (default: one per CPU, or per GPU with --device cuda)",
)
# the data set: a name, a file, a folder, hub:ORG/NAME, or one file per split
BATCH = typer.Option(
    "auto",
    help="texts per training step: auto (32; 128 on a GPU, the learning rate scaled by the "
    "square root of the ratio) or N",
)
TRAIN_FILE = typer.Option(None, "--train", help="a file of training examples, instead of --dataset")
DEV_FILE = typer.Option(None, "--dev", help="with --train: the dev examples (default: carved from --train)")
TEST_FILE = typer.Option(None, "--test", help="with --train: the test examples (default: carved from --train)")
SPLIT_MAP = typer.Option(None, help="hub:ORG/NAME's splits: train=NAME,dev=NAME,test=NAME (default: by name)")
LABEL_NAMES_HELP = (
    "a label's name as one more example of it where names are words (lost_or_stolen_card -> 'lost or "
    "stolen card'): auto (where most names are words), on or off"
)
DATASET_HELP = "catalog name (cea datasets list), file, folder of train/dev/test files, or hub:ORG/NAME"


def dataset_spec(dataset: str, train, dev, test) -> str | dict:
    """``--dataset``, or the ``--train``/``--dev``/``--test`` files as :func:`cea.data.load_dataset`'s
    ``{split: file}``."""
    if train is None and (dev or test):
        raise CeaError("--dev and --test go with --train FILE")
    return dataset if train is None else {s: str(p) for s, p in (("train", train), ("dev", dev), ("test", test)) if p}


def data_name(spec: str | dict) -> str:
    """A short name of a data set spec, for run folders: ``banking77``, ``intents`` (intents.csv), ``train``."""
    return Path(spec["train"] if isinstance(spec, dict) else spec.removeprefix("hub:").rstrip("/")).stem


def print_table(title: str, header: list[str], rows, left: int = 1, styles=None, console: Console | None = None):
    """Print a rich table: the first ``left`` columns aligned left, the others right; ``styles``, one per row. Where
    the output is not a terminal (a log, a pipe, a notebook's captured cell), or a terminal too narrow for the table,
    it is Markdown instead, a row a line at its full width: rich would fit it into the width, wrapping rows and cutting
    names ("stati…", "train…")."""
    from rich.table import Table

    console = console or Console()
    rows = [[str(v) for v in row] for row in rows]
    table = Table(title=title)
    for i, col in enumerate(header):
        table.add_column(col, justify="left" if i < left else "right")
    for i, row in enumerate(rows):
        table.add_row(*row, style=styles[i] if styles else None)
    natural = console.measure(table, options=console.options.update_width(10_000)).maximum  # its width, uncut
    if console.is_terminal and natural <= console.width:
        console.print(table)
        return
    lines = [
        title,
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if i < left else "---:" for i in range(len(header))) + "|",
    ]
    lines += ["| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in row) + " |" for row in rows]
    console.print("\n".join(lines), markup=False, highlight=False, emoji=False, soft_wrap=True)


def read_option(text: str, option: str, read, fix: str):
    """``read(text)``; a ValueError said as ``cannot read OPTION 'TEXT'; FIX``."""
    try:
        return read(text)
    except ValueError:
        raise CeaError(f"cannot read {option} {text!r}; {fix}") from None


def parse_ints(text: str | None, option: str) -> list[int] | None:
    """``"3,4"`` -> [3, 4]; None stays None."""
    return (
        None
        if text is None
        else read_option(
            text,
            option,
            lambda t: [int(v) for v in t.split(",") if v.strip()],
            "write whole numbers separated by commas, e.g. 3,4",
        )
    )


# command -> the module that registers it on import; only that one is imported (cea --help: all of them)
MODULES = {
    "analyze": "analyze",
    "report": "analyze",
    "attention": "analyze",
    "check": "check",
    "data": "data",
    "datasets": "catalog",
    "discover": "discover",
    "distill": "distill",
    "models": "catalog",
    "probe": "probe",
    "pull": "share",
    "push": "share",
    "retrieval": "probe",
    "embed": "scale",
    "index": "scale",
    "fit": "fit",
    "bundle": "serve",
    "bundle-compact": "serve",
    "predict": "serve",
    "serve": "serve",
    "suggest": "check",
    "train": "train",
    "compare": "train",
    "sweep-layers": "train",
}


def _register(command: str | None = None) -> None:
    for module in [MODULES[command]] if command in MODULES else sorted(set(MODULES.values())):
        importlib.import_module(f"{__name__}.{module}")


# the loggers of the libraries cea calls, errors only unless --verbose: their warnings are notes to their own users
# (model2vec's tokenizer backend, skeletoken, on every distillation: "Setting it to '[PAD]'")
LIBRARIES = (
    "transformers",
    "sentence_transformers",
    "datasets",
    "huggingface_hub",
    "model2vec",
    "skeletoken",
    "onnxruntime",
    "torch",
)


def main() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if "--verbose" in sys.argv[1:2]:  # cea --verbose COMMAND: the libraries say all they say (cea.progress.verbose)
        os.environ[VERBOSE] = "1"
    if not verbose():  # the libraries: errors only, no hub bars
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        for name in LIBRARIES:
            logging.getLogger(name).setLevel(logging.ERROR)
        if not interactive():  # a log or a pipe: no tqdm bar at all (tqdm reads it once, when first imported)
            os.environ.setdefault("TQDM_DISABLE", "1")
    first = 2 if sys.argv[1:2] == ["--verbose"] else 1  # where the command's name is
    if sys.argv[first : first + 2] == ["bundle", "compact"]:  # a verb on a bundle beside cea bundle MODEL, which
        sys.argv[first : first + 2] = ["bundle-compact"]  # makes one
    _register(sys.argv[first] if len(sys.argv) > first else None)
    try:
        app()
    except CeaError as exc:
        message = exc.cli if isinstance(exc, OptionError) else exc  # parameters named as flags
        err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
