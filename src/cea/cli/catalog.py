"""``cea datasets list``, ``cea datasets show NAME`` and ``cea models list``: the catalogs."""

from __future__ import annotations

import typer
from rich.console import Console

from ..defaults import DEFAULT_MODEL
from . import app, print_table

datasets_app = typer.Typer(help="The data catalog.", no_args_is_help=True)
app.add_typer(datasets_app, name="datasets")
models_app = typer.Typer(help="The model catalog.", no_args_is_help=True)
app.add_typer(models_app, name="models")
out = Console(soft_wrap=True)  # a line a message, in a log too (rich would wrap it at 80 columns)


@datasets_app.command("list")
def list_cmd() -> None:
    """Named data sets and where each comes from."""
    from ..data import list_datasets

    print_table(
        "cea data sets",
        ["name", "task", "description", "source"],
        left=4,
        console=out,
        rows=[[s.name, s.task, s.description, "; ".join(x.label for x in s.sources)] for s in list_datasets()],
    )
    out.print("Any .csv, .tsv, .jsonl or .parquet file works too: --dataset FILE --text-column C --label-column C")


@datasets_app.command("show")
def show_cmd(
    name: str = typer.Argument(..., help="catalog name or local file"),
    text_column: str = typer.Option("text", help="text column of a local file"),
    label_column: str = typer.Option("label", help="label column of a local file"),
    top: int = typer.Option(20, help="label counts to list"),
) -> None:
    """Splits, sizes, label counts, source and licence of one data set."""
    from ..data import load_dataset

    ds = load_dataset(name, text_column=text_column, label_column=label_column)
    info = ds.summary()
    out.print(f"[bold]{ds.name}[/] ({ds.task})  source: {ds.source}")
    if ds.licence:
        out.print(f"licence: {ds.licence}")
    for note in ds.notes:
        out.print(f"note: {note}")
    print_table("splits", ["split", "rows"], info["splits"].items(), console=out)
    if ds.task in ("classification", "multilabel"):
        counts = (ds["train"]["labels"].explode() if ds.task == "multilabel" else ds["train"]["label"]).value_counts()
        if ds.task == "multilabel":
            out.print("labels per text: " + ", ".join(f"{s} {n:.2f}" for s, n in info["labels_per_text"].items()))
        print_table(
            f"{info['num_labels']} labels (train counts, {min(top, len(counts))} most frequent)",
            ["label", *info["splits"]],
            console=out,
            rows=[
                [label, *(info["label_counts"][s].get(label, 0) for s in info["splits"])]
                for label in counts.index[:top]
            ],
        )


@models_app.command("list")
def list_models() -> None:
    """Named encoders; any hub id or local model folder works too."""
    from ..encoders.catalog import MODELS

    print_table(
        "cea models",
        ["name", "description", "source"],
        left=3,
        console=out,
        rows=[
            [
                spec.name + (" (default)" if spec.name == DEFAULT_MODEL else ""),
                spec.description,
                ", ".join(a.label for a in spec.archives[:1]) + (" ..." if len(spec.archives) > 1 else ""),
            ]
            for spec in MODELS.values()
        ],
    )
