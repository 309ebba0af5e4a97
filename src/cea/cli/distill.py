"""``cea distill MODEL_OR_RUN -o DIR``: a static encoder distilled from a transformer (:mod:`cea.encoders.static`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from . import DEVICE, app

out = Console(soft_wrap=True)


@app.command()
def distill(
    model: str = typer.Argument(
        ...,
        metavar="MODEL_OR_RUN",
        help="catalog name, hub id, model folder, or a run folder of cea train (its trained encoder)",
    ),
    output: Path = typer.Option(..., "-o", "--output", help="the static encoder's folder (must not exist)"),
    dims: int = typer.Option(256, help="dimensions of the token vectors (PCA; at most the teacher's)"),
    device: str = DEVICE,
) -> None:
    """One vector per token, pooled by their mean (model2vec): tens of times the teacher's speed on a CPU; cea loads
    it like any encoder, and cea train --model DIR trains its vectors with the labels."""
    from ..encoders.static import distill as make

    folder = make(model, output, dims=dims, device=device)
    out.print(
        f"static encoder {folder} distilled from {model}; use it as --model {folder} (probe, train, bundle, "
        "fit --models)"
    )
