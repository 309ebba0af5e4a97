"""``cea datasets list`` and ``cea datasets show NAME``."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from . import app

datasets_app = typer.Typer(help="The data catalog.", no_args_is_help=True)
app.add_typer(datasets_app, name="datasets")
out = Console()


@datasets_app.command("list")
def list_cmd() -> None:
    """Named data sets and where each comes from."""
    from ..data import list_datasets

    table = Table(title="cea data sets")
    for col in ("name", "task", "description", "source"):
        table.add_column(col)
    for spec in list_datasets():
        table.add_row(spec.name, spec.task, spec.description, "; ".join(s.label for s in spec.sources))
    out.print(table)
    out.print("Any .csv, .tsv, .jsonl or .parquet file works too: --dataset FILE --text-column C --label-column C")


@datasets_app.command("show")
def show_cmd(name: str = typer.Argument(..., help="catalog name or local file"),
             text_column: str = typer.Option("text", help="text column of a local file"),
             label_column: str = typer.Option("label", help="label column of a local file"),
             top: int = typer.Option(20, help="label counts to list")) -> None:
    """Splits, sizes, label counts, source and licence of one data set."""
    from ..data import load_dataset

    ds = load_dataset(name, text_column=text_column, label_column=label_column)
    info = ds.summary()
    out.print(f"[bold]{ds.name}[/] ({ds.task})  source: {ds.source}")
    if ds.licence:
        out.print(f"licence: {ds.licence}")
    for note in ds.notes:
        out.print(f"note: {note}")
    sizes = Table(title="splits")
    sizes.add_column("split")
    sizes.add_column("rows", justify="right")
    for split, n in info["splits"].items():
        sizes.add_row(split, str(n))
    out.print(sizes)
    if ds.task == "classification":
        counts = ds["train"]["label"].value_counts()
        table = Table(title=f"{info['num_labels']} labels (train counts, {min(top, len(counts))} most frequent)")
        table.add_column("label")
        for split in info["splits"]:
            table.add_column(split, justify="right")
        for label in counts.index[:top]:
            table.add_row(str(label), *[str(info["label_counts"][s].get(label, 0)) for s in info["splits"]])
        out.print(table)
