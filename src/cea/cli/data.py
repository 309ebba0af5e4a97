"""``cea data entity-swap``: build training rows from other data."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from ..errors import CeaError
from ..paths import atomic_path
from . import app

data_app = typer.Typer(help="Build training data (entity-swap triplets).", no_args_is_help=True)
app.add_typer(data_app, name="data")
out = Console(soft_wrap=True)  # a line a message, in a log too (rich would wrap it at 80 columns)


@data_app.command("entity-swap")
def entity_swap(
    file: Path = typer.Argument(..., help="FewRel-shaped JSON (relation -> sentences) or JSONL (one per line)"),
    output: Path = typer.Option(
        None, "-o", "--output", help="triplets file, .jsonl or .csv (default FILE.triplets.jsonl)"
    ),
    per_anchor: int = typer.Option(1, help="partners (triplets) per anchor sentence"),
    seed: int = typer.Option(0, help="seed of the partner draw"),
) -> None:
    """(anchor, positive, negative) rows: same wording with other entities beats other wording with the same."""
    from ..data.entity_swap import entity_swap_triplets, read_fewrel

    output = output or file.with_name(file.stem + ".triplets.jsonl")
    if output.suffix.lower() not in (".jsonl", ".csv"):
        raise CeaError(f"cannot write {output.name}: use a .jsonl or .csv output")
    frame = entity_swap_triplets(read_fewrel(file), per_anchor=per_anchor, seed=seed)
    with atomic_path(output) as tmp:
        if output.suffix.lower() == ".csv":
            frame.to_csv(tmp, index=False)
        else:
            frame.to_json(tmp, orient="records", lines=True, force_ascii=False)
    out.print(
        f"{len(frame)} triplets from {frame['relation'].nunique()} relations written to {output}; "
        f"train with: cea train --dataset {output} --objective triplet"
    )
