"""``cea fit DATA -o BUNDLE``: from labelled data to a shipped classifier in one command (:mod:`cea.fitting`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from ..defaults import DEFAULT_MODEL
from . import (
    DATASET_HELP,
    DEV_FILE,
    DEVICE,
    LABEL_NAMES_HELP,
    REPORT_TO,
    SPLIT_MAP,
    TEST_FILE,
    TRAIN_FILE,
    TRAIN_PRECISION,
    app,
    data_name,
    dataset_spec,
    print_table,
)

out = Console(soft_wrap=True)  # paths in the stage lines are not cut


@app.command()
def fit(
    dataset: str = typer.Argument("trec6", help=DATASET_HELP),
    output: Path = typer.Option(
        None, "-o", "--output", help="the bundle folder (default: NAME-bundle; must not exist)"
    ),
    train_file: Path = TRAIN_FILE,
    dev_file: Path = DEV_FILE,
    test_file: Path = TEST_FILE,
    split_map: str = SPLIT_MAP,
    budget: str = typer.Option(
        "15m", help="time for the whole search, e.g. 15m, 90s, 1h: candidates are skipped and training cut to fit"
    ),
    models: str = typer.Option(None, help=f"candidate encoders, comma-separated (default: {DEFAULT_MODEL})"),
    text_column: str = typer.Option("text"),
    label_column: str = typer.Option("label"),
    work: Path = typer.Option(None, help="folder for the probe and training runs (default: cea-runs/fit-NAME-TIME)"),
    seed: int = typer.Option(0, help="training seed"),
    label_names: str = typer.Option("auto", help=LABEL_NAMES_HELP),
    label_separator: str = typer.Option(None, help="several labels per text in one column, split at this (e.g. '|')"),
    device: str = DEVICE,
    precision: str = TRAIN_PRECISION,
    report_to: str = REPORT_TO,
    latency: float = typer.Option(
        None,
        help="the p99 in ms a one-text request may take among 16 clients': static "
        "encoders, the trained one cut to fewer blocks, and int8 ones join the "
        "candidates; the most accurate that fits ships",
    ),
) -> None:
    """Probe, train, choose the encoder and the classifier on top on dev, then bundle every labelled example with
    report.html."""
    from ..fitting import fit as run
    from ..progress import LINES, progress_bars

    bars = progress_bars()  # where not a terminal (a log file, a pipe): whole lines only
    spec = dataset_spec(dataset, train_file, dev_file, test_file)
    output = output or Path(f"{data_name(spec)}-bundle")
    summary = run(
        spec,
        output,
        models=models and models.split(","),
        budget=budget,
        text_column=text_column,
        label_column=label_column,
        split_map=split_map,
        work=work,
        device=device,
        precision=precision,
        seed=seed,
        label_names=label_names,
        label_separator=label_separator,
        say=out.print,
        progress=True if bars else LINES,
        report_to=report_to,
        latency=latency,
    )
    metric, rare = summary["metric"], bool(summary["rare"]["labels"])  # labels of under 5 training texts
    served = summary["latency_ms"] is not None  # each candidate's bundle timed (--latency)

    def cell(value):
        return "-" if value is None else f"{value:.2f}"

    print_table(
        f"{summary['dataset']}: test figures (train and dev as references)",
        ["encoder", "classifier", "dev kNN", "dev linear head", f"test {metric.replace('_', '-')}", "test macro-F1"]
        + ["dev rare-F1", "test rare-F1"] * rare
        + ["p50 / p99 ms, 16 clients", "texts/s, 64 a request", "frontier"] * served,
        left=2,
        console=out,
        rows=[
            [
                name + (" *" if name == summary["chosen"] else ""),
                c["described"],
                f"{c['dev']['knn'][metric]:.2f}",
                f"{c['dev']['linear'][metric]:.2f}",
                f"{c['test'][metric]:.2f}",
                f"{c['test']['macro_f1']:.2f}",
            ]
            + [cell(c["dev"].get("rare_f1")), cell(c["test"].get("rare_f1"))] * rare
            + (
                [
                    f"{c['served']['p50_ms']:g} / {c['served']['p99_ms']:g}",
                    f"{c['served']['texts_per_second']:,.0f}",
                    "yes" if c["served"].get("frontier") else "",
                ]
                if served
                else []
            )
            for name, c in summary["candidates"].items()
        ],
    )
    for line in summary["skipped"]:
        out.print(f"skipped: {line}")
    out.print(f"report: {output}/report.html  serve it: cea serve {output}")
