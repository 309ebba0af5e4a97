"""``cea probe``: which encoder, layer and pooling suit a labelled data set (frozen, by kNN)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import typer
from rich.console import Console

from ..defaults import DEFAULT_MODEL
from ..errors import CeaError
from . import (
    DATASET_HELP,
    DEV_FILE,
    DEVICE,
    PRECISION,
    SPLIT_MAP,
    TEST_FILE,
    TRAIN_FILE,
    app,
    dataset_spec,
    print_table,
)

out = Console(soft_wrap=True)  # a line a message, in a log too (rich would wrap it at 80 columns)


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


@app.command()
def probe(
    dataset: str = typer.Option("trec6", help=DATASET_HELP),
    train_file: Path = TRAIN_FILE,
    dev_file: Path = DEV_FILE,
    test_file: Path = TEST_FILE,
    split_map: str = SPLIT_MAP,
    models: str = typer.Option(DEFAULT_MODEL, help="comma-separated models; a+b concatenates"),
    layers: str = typer.Option("all", help="all, last, a number or a list like 2,4,6 (0 = embeddings)"),
    pooling: str = typer.Option("mean,cls", help="comma-separated poolings: mean, cls"),
    k: int = typer.Option(5, help="neighbours that vote"),
    mode: str = typer.Option("split", help="split: train+dev references, test queries; loo: leave-one-out"),
    references: str = typer.Option("train+dev", help="reference splits in split mode"),
    text_column: str = typer.Option("text", help="text column of a local file"),
    label_column: str = typer.Option("label", help="label column of a local file"),
    label_separator: str = typer.Option(None, help="several labels per text in one column, split at this (e.g. '|')"),
    output: Path = typer.Option(
        None, help="folder for results.csv and results.json (default: cea-runs/probe-DATASET-TIME)"
    ),
    batch_size: int = typer.Option(None, help="texts per encoder pass (default 64, 512 on a GPU)"),
    cache: bool = typer.Option(True, help="read and write the embedding cache"),
    shots: int = typer.Option(None, help="keep N train examples per label (references: train only)"),
    imbalance: str = typer.Option(None, help="LABEL:FRACTION,...: keep that fraction of a label's train examples"),
    seed: int = typer.Option(0, help="seed of the --shots and --imbalance draws"),
    max_seq_length: int = typer.Option(None, help="cut each text at this many tokens (default: each model's own)"),
    device: str = DEVICE,
    precision: str = PRECISION,
) -> None:
    """Probe frozen encoders by kNN: accuracy, macro-F1 and top-k accuracy per model x layer x pooling."""
    from ..data import load_dataset
    from ..data.dataset import subsample
    from ..evaluation import probe as run_probe
    from ..progress import progress_bars

    bars = progress_bars()  # where not a terminal (a log file, a pipe): whole lines only
    ds = load_dataset(
        dataset_spec(dataset, train_file, dev_file, test_file),
        text_column=text_column,
        label_column=label_column,
        split_map=split_map,
        label_separator=label_separator,
    )
    if shots or imbalance:
        ds = subsample(ds, shots, imbalance, seed)
        references = "train"  # dev would add back what --shots / --imbalance took away
    out.print(f"probing [bold]{ds.name}[/] ({ds.source}) with {models}, layers {layers}, pooling {pooling}, k={k}")
    result = run_probe(
        ds,
        models=_split(models),
        layers=layers,
        poolings=_split(pooling),
        k=k,
        mode=mode,
        references=references,
        batch_size=batch_size,
        cache=cache,
        progress=bars,
        device=device,
        precision=precision,
        max_seq_length=max_seq_length,
    )
    best, metric = result.best(), result.metric
    columns = (
        {"micro_f1": "micro-F1", "macro_f1": "macro-F1", "subset_accuracy": "subset acc"}
        if metric == "micro_f1"
        else {"accuracy": "accuracy", "macro_f1": "macro-F1", "top_k_accuracy": f"top-{k} acc"}
    )
    print_table(
        f"{ds.name}: kNN (k={k}) on frozen embeddings, {result.meta['references']} -> "
        f"{'test' if mode == 'split' else 'itself'}",
        ["model", "layer", "pooling", *columns.values()],
        left=3,
        console=out,
        rows=[
            [
                r["model"],
                r["layer"],
                r["pooling"],
                *(f"{r[c]:.2f}" + (" *" if r is best and c == metric else "") for c in columns),
            ]
            for r in result.rows
        ],
        styles=["bold green" if r is best else None for r in result.rows],
    )
    out.print(
        f"* best: {best['model']} layer {best['layer']} {best['pooling']} pooling, {columns[metric]} {best[metric]:.2f}"
    )
    folder = output or Path("cea-runs") / f"probe-{ds.name}-{dt.datetime.now():%Y%m%d-%H%M%S}"
    result.save(folder)
    out.print(f"results written to {folder}/results.csv and results.json ({result.meta['timings']['total']:.1f} s)")


@app.command()
def retrieval(
    model: str = typer.Argument(DEFAULT_MODEL, help="catalog name, hub id or local folder (e.g. RUN/model)"),
    dataset: str = typer.Option("banking77", help="labelled data set: its train split is indexed, test queries it"),
    index: str = typer.Option("exact", help="exact search or a FAISS HNSW index"),
    text_column: str = typer.Option("text"),
    label_column: str = typer.Option("label"),
    device: str = DEVICE,
    precision: str = PRECISION,
) -> None:
    """Top-1/2/3 accuracy (gold among the labels of the k nearest) and MRR of test queries."""
    from ..data import load_dataset
    from ..encoders import load_encoder
    from ..evaluation.retrieval import INDEXES, evaluate_retrieval

    if index not in INDEXES:
        raise CeaError(f"unknown --index {index!r}; use exact or hnsw")
    ds = load_dataset(dataset, text_column=text_column, label_column=label_column)
    if ds.task != "classification":
        raise CeaError(f"retrieval needs labelled texts; {ds.name} is {ds.task}")
    scores = evaluate_retrieval(load_encoder(model, device=device, precision=precision), ds, index=index)
    print_table(
        f"{model} on {dataset}: train indexed ({index}), test queries",
        [col.replace("_", " ") for col in scores],
        [[f"{v:.2f}" for v in scores.values()]],
        left=0,
        console=out,
    )
