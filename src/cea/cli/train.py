"""``cea train`` and ``cea compare``: fine-tune with a label-aware objective, judged by kNN."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from . import app

out = Console()


@app.command()
def train(
    dataset: str = typer.Option("trec6", help="catalog name or local file"),
    model: str = typer.Option("all-MiniLM-L6-v2", help="catalog name, hub id or local folder"),
    objective: str = typer.Option("cea", help="softmax, cea, triplet, supcon, normalized-softmax"),
    output: Path = typer.Option(None, help="run folder (default: cea-runs/train-DATASET-OBJECTIVE-TIME)"),
    epochs: float = typer.Option(1.0), batch_size: int = typer.Option(32), lr: float = typer.Option(5e-5),
    seed: int = typer.Option(0),
    sampler: str = typer.Option("pk", help="pk: P labels x K examples per batch; shuffle: plain shuffling"),
    k_per_class: int = typer.Option(4, help="K of the P x K sampler"),
    pairs: str = typer.Option("sampled", help="cea: sampled or all"),
    memory: str = typer.Option("none", help="cea: none, class, datapoint, mixed, bank"),
    memory_size: int = typer.Option(4096, help="cea: size of the bank"),
    reduction: str = typer.Option("mean", help="cea: mean or sum over pairs"),
    negative_target: float = typer.Option(0.0, help="cea: target cosine of different-label pairs"),
    margin: float = typer.Option(0.2, help="triplet: margin"),
    mining: str = typer.Option("all", help="triplet: all (batch-all) or hard (batch-hard)"),
    temperature: float = typer.Option(None, help="supcon (0.1) and normalized-softmax (0.05)"),
    aux_label_column: str = typer.Option(None, help="multitask: push same-value pairs of this column apart"),
    layers: int = typer.Option(None, help="keep only the first l transformer blocks"),
    select: str = typer.Option("last", help="test the last or the best (dev kNN accuracy) epoch"),
    save_steps: int = typer.Option(None, help="checkpoint every N steps (default: every epoch)"),
    max_steps: int = typer.Option(-1, help="stop after N steps (overrides epochs)"),
    resume: bool = typer.Option(False, help="continue the run in --output from its last checkpoint"),
    text_column: str = typer.Option("text"), label_column: str = typer.Option("label"),
) -> None:
    """Fine-tune an encoder so texts of the same class sit together; report kNN accuracy on dev and test."""
    from ..training import TrainConfig, train as run

    folder = output or Path("cea-runs") / f"train-{Path(dataset).stem}-{objective}-{dt.datetime.now():%Y%m%d-%H%M%S}"
    config = TrainConfig(dataset=dataset, model=model, objective=objective, output=str(folder), epochs=epochs,
                     batch_size=batch_size, lr=lr, seed=seed, sampler=sampler, k_per_class=k_per_class, pairs=pairs,
                     memory=memory, memory_size=memory_size, reduction=reduction, negative_target=negative_target,
                     margin=margin, mining=mining, temperature=temperature, aux_label_column=aux_label_column,
                     layers=layers, select=select, save_steps=save_steps, max_steps=max_steps, resume=resume,
                     text_column=text_column, label_column=label_column)
    result = run(config)
    table = Table(title=f"{objective} on {dataset}: kNN (k={config.knn_k}), train references")
    for col in ("split", "accuracy", "macro-F1", "top-k acc", "head acc"):
        table.add_column(col, justify="right")
    for split, m in result["metrics"].items():
        table.add_row(split, f"{m['knn_accuracy']:.2f}", f"{m['knn_macro_f1']:.2f}", f"{m['knn_top_k_accuracy']:.2f}",
                      f"{m['head_accuracy']:.2f}" if "head_accuracy" in m else "-")
    out.print(table)
    out.print(f"model: {folder}/model  results: {folder}/results.json  "
              f"({result['train_seconds']:.0f} s training, {result['seconds_per_epoch']:.0f} s/epoch)")


@app.command()
def compare(
    dataset: str = typer.Option("trec6", help="catalog name or local file"),
    model: str = typer.Option("all-MiniLM-L6-v2", help="catalog name, hub id or local folder"),
    objectives: str = typer.Option("softmax,cea", help="settings, e.g. softmax,cea[pairs=all,memory=bank],triplet"),
    seeds: str = typer.Option("0,1,2", help="comma-separated seeds"),
    epochs: float = typer.Option(1.0), batch_size: int = typer.Option(32), lr: float = typer.Option(5e-5),
    sampler: str = typer.Option("pk"), k_per_class: int = typer.Option(4),
    output: Path = typer.Option(None, help="grid folder (finished runs in it are reused)"),
) -> None:
    """A grid of runs: mean and std per setting of accuracy, macro-F1, time per epoch and peak memory."""
    from ..errors import CeaError
    from ..training import TrainConfig
    from ..training.compare import compare as run, parse_settings

    try:
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise CeaError(f"cannot read --seeds {seeds!r}; write e.g. 0,1,2") from None
    settings = parse_settings(objectives)
    folder = output or Path("cea-runs") / f"compare-{Path(dataset).stem}-{dt.datetime.now():%Y%m%d-%H%M%S}"
    base = TrainConfig(dataset=dataset, model=model, epochs=epochs, batch_size=batch_size, lr=lr, sampler=sampler,
                   k_per_class=k_per_class)
    summary = run(base, settings, seed_list, folder,
                  on_run=lambda label, seed, r: out.print(f"{label} seed {seed}: test kNN accuracy "
                                                          f"{r['metrics']['test']['knn_accuracy']:.2f}"))
    table = Table(title=f"{dataset}, {model}, {epochs:g} epoch(s), seeds {seeds}: test kNN (k=5)")
    for col in ("setting", "accuracy", "macro-F1", "s/epoch", "peak MB"):
        table.add_column(col, justify="left" if col == "setting" else "right")
    for row in summary["rows"]:
        table.add_row(row["setting"], f"{row['accuracy_mean']:.2f} ± {row['accuracy_std']:.2f}",
                      f"{row['macro_f1_mean']:.2f} ± {row['macro_f1_std']:.2f}", f"{row['seconds_per_epoch']:.0f}",
                      f"{row['peak_memory_mb']:.0f}")
    out.print(table)
    out.print(f"written {folder}/compare.json")
