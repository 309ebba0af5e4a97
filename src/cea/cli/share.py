"""``cea push BUNDLE_OR_RUN ORG/NAME`` and ``cea pull ORG/NAME DIR``: the hub (:mod:`cea.sharing`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from . import app

out = Console(soft_wrap=True)


@app.command()
def push(
    folder: Path = typer.Argument(
        ..., metavar="BUNDLE_OR_RUN", help="a bundle, a run folder of cea train (its trained encoder) or a model folder"
    ),
    repo_id: str = typer.Argument(..., metavar="ORG/NAME", help="the hub repo (made where it does not exist)"),
    private: bool = typer.Option(False, help="make the repo private"),
) -> None:
    """Upload a bundle (less its kept traffic) or a trained encoder, with its model card, to the hub."""
    from ..sharing import push as upload

    out.print(f"pushed {folder} to {upload(folder, repo_id, private=private)}")


@app.command()
def pull(
    repo_id: str = typer.Argument(..., metavar="ORG/NAME", help="the hub repo"),
    output: Path = typer.Argument(..., metavar="DIR", help="a new folder"),
) -> None:
    """Download a bundle (verified against its manifest's sums) or an encoder from the hub."""
    from ..sharing import pull as download

    out.print(f"pulled {repo_id} into {download(repo_id, output)}")
