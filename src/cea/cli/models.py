"""``cea models list``."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from . import app

models_app = typer.Typer(help="The model catalog.", no_args_is_help=True)
app.add_typer(models_app, name="models")


@models_app.command("list")
def list_cmd() -> None:
    """Named encoders; any hub id or local model folder works too."""
    from ..encoders import DEFAULT_MODEL, MODELS

    table = Table(title="cea models")
    for col in ("name", "description", "source"):
        table.add_column(col)
    for spec in MODELS.values():
        star = " (default)" if spec.name == DEFAULT_MODEL else ""
        table.add_row(spec.name + star, spec.description,
                      ", ".join(a.label for a in spec.archives[:1]) + (" ..." if len(spec.archives) > 1 else ""))
    Console().print(table)
