"""``cea models list``."""

from __future__ import annotations

import typer

from . import app, print_table

models_app = typer.Typer(help="The model catalog.", no_args_is_help=True)
app.add_typer(models_app, name="models")


@models_app.command("list")
def list_cmd() -> None:
    """Named encoders; any hub id or local model folder works too."""
    from ..encoders import DEFAULT_MODEL, MODELS

    print_table("cea models", ["name", "description", "source"], left=3, rows=[
        [spec.name + (" (default)" if spec.name == DEFAULT_MODEL else ""), spec.description,
         ", ".join(a.label for a in spec.archives[:1]) + (" ..." if len(spec.archives) > 1 else "")]
        for spec in MODELS.values()])
