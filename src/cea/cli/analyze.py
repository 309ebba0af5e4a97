"""``cea analyze`` (cohesion, separation, imbalance, maps) and ``cea report`` (one HTML page)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import typer
from rich.console import Console

from ..defaults import DEFAULT_MODEL
from ..errors import CeaError
from ..paths import write_json
from . import DEVICE, PRECISION, app, parse_ints, print_table

out = Console(soft_wrap=True)  # a line a message, in a log too (rich would wrap it at 80 columns)


@app.command()
def analyze(
    model: str = typer.Argument(DEFAULT_MODEL, help="catalog name, hub id or local folder (e.g. RUN/model)"),
    dataset: str = typer.Option("trec6", help="labelled data set"),
    split: str = typer.Option("test", help="the split whose embeddings are analysed"),
    small: str = typer.Option(None, help="comma-separated small labels for the imbalance indicators"),
    smallest: int = typer.Option(None, help="or: the N labels with the fewest train examples"),
    imbalance: str = typer.Option(None, help="LABEL:FRACTION,...: the labels a run was trained with reduced"),
    map_method: str = typer.Option("tsne", "--map", help="embedding map: tsne, umap or none"),
    perplexity: float = typer.Option(30.0, help="t-SNE perplexity (below the number of points)"),
    k: int = typer.Option(5, help="kNN for the predicted-label map (train references)"),
    output: Path = typer.Option(None, help="folder for analysis.json and the plots (default cea-runs/analyze-...)"),
    text_column: str = typer.Option("text"),
    label_column: str = typer.Option("label"),
    device: str = DEVICE,
    precision: str = PRECISION,
) -> None:
    """Cohesion per label, separation between class centroids, imbalance indicators, and a map."""
    import numpy as np

    from ..data import load_dataset
    from ..data.dataset import parse_imbalance
    from ..encoders import load_encoder
    from ..encoders.store import run_store
    from ..evaluation.classification import evaluate_encoder
    from ..evaluation.geometry import analyze as run, smallest_labels
    from ..reports.plots import confusion_view, embedding_map

    ds = load_dataset(dataset, text_column=text_column, label_column=label_column)
    if ds.task != "classification":
        raise CeaError(f"analyze needs labelled texts; {ds.name} is {ds.task}")
    frame = ds[split]
    small_labels = [s.strip() for s in small.split(",")] if small else []
    if imbalance:
        small_labels += [label for label, _ in parse_imbalance(imbalance)]
    if smallest:
        small_labels += smallest_labels(ds["train"]["label"], smallest)
    encoder = load_encoder(model, device=device, precision=precision)
    store = run_store(model)  # a training run's final embeddings are read there: no encoding
    if map_method == "none":  # no map: the split's embeddings are all it needs
        saved = {"embeddings": store.encode(encoder, frame["text"])}
    else:
        saved = vars(
            evaluate_encoder(
                encoder,
                ds["train"]["text"],
                ds["train"]["label"].to_numpy(),
                {split: (frame["text"], frame["label"].to_numpy())},
                k,
                retrieval=(),
                keep_embeddings=(split,),
                store=store,
            )[split]
        )
    emb = saved["embeddings"]
    result = run(emb, frame["label"].to_numpy(), small_labels or None)
    folder = output or Path("cea-runs") / f"analyze-{ds.name}-{dt.datetime.now():%Y%m%d-%H%M%S}"
    if map_method != "none":
        pred = np.asarray(saved["predicted"])
        embedding_map(
            emb,
            frame["label"],
            folder / f"map-{map_method}.png",
            predicted=pred,
            method=map_method,
            perplexity=perplexity,
            title=f"{split}:",
        )
        confusion_view(folder / "confusions.png", frame["label"], pred)
    write_json(
        folder / "analysis.json",
        {"format": "cea.analyze/1", "model": model, "dataset": ds.name, "split": split, **result},
    )
    coh, sep = result["cohesion"], result["separation"]
    print_table(
        f"{model} on {ds.name}/{split}: cohesion (mean cosine within a label)",
        ["label", "cohesion", "nearest other label (centroid cosine)"],
        console=out,
        rows=[
            [label, f"{value:.3f}", "{label} ({cosine:.3f})".format(**sep["nearest"][label])]
            for label, value in sorted(coh["per_label"].items(), key=lambda kv: kv[1])
        ],
    )
    out.print(f"mean cohesion {coh['mean']:.3f}; centroid cosine mean {sep['mean']:.3f}, max {sep['max']:.3f}")
    if "imbalance" in result:
        imb = result["imbalance"]
        out.print(
            f"small labels {', '.join(str(v) for v in imb['small_labels'])}: cohesion {imb['small_cohesion']:.3f} "
            f"(higher is better), to large {imb['small_to_large']:.3f}, to each other "
            f"{imb['small_to_small']:.3f} (lower is better)"
        )
    out.print(
        f"written {folder}/analysis.json" + (f" and {folder}/map-{map_method}.png" if map_method != "none" else "")
    )


@app.command()
def report(
    runs: list[Path] = typer.Argument(..., help="run folders: cea train, probe, sweep-layers or compare outputs"),
    output: Path = typer.Option(Path("report.html"), "-o", "--output", help="the HTML file"),
    title: str = typer.Option("cea report", help="page title"),
    maps: bool = typer.Option(True, help="t-SNE maps and confusions of labelled runs (encodes the test split)"),
) -> None:
    """One self-contained HTML page (no external assets) with the runs' tables, plots and settings."""
    from ..reports.html import build_report

    path = build_report(runs, output, title=title, maps=maps)
    out.print(f"written {path} ({path.stat().st_size / 1024:.0f} KB); open it in any browser")


@app.command()
def attention(
    model: str = typer.Argument(DEFAULT_MODEL, help="catalog name, hub id or local folder"),
    sentence: str = typer.Option(..., help="the sentence to look at"),
    compare: str = typer.Option(None, help="a second model shown beside the first (e.g. RUN/model)"),
    layers: str = typer.Option("all", help="blocks to draw, 1-based: all or e.g. 1,6"),
    output: Path = typer.Option(Path("cea-runs/attention"), help="folder for attention-layer-L.png"),
    device: str = DEVICE,
) -> None:
    """Attention maps for a sentence, per layer and head, base model beside a fine-tuned one."""
    from ..encoders import load_encoder, num_layers
    from ..reports.plots import attention_maps

    models = {Path(model).name or model: load_encoder(model, device=device)}
    if compare:
        name = Path(compare).name if Path(compare).name != "model" else Path(compare).parent.name
        models[name] = load_encoder(compare, device=device)
    depth = min(num_layers(m) for m in models.values())
    chosen = list(range(1, depth + 1)) if layers == "all" else parse_ints(layers, "--layers")
    for layer in chosen:
        path = attention_maps(output / f"attention-layer-{layer}.png", models, sentence, layer)
        out.print(f"written {path}")
