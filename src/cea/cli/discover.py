"""``cea discover``: group unlabelled texts into known classes and new ones (:mod:`cea.discover`)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import typer
from rich.console import Console

from ..defaults import DISCOVER_ESTIMATES as ESTIMATES, DISCOVER_MODEL, DISCOVER_OVER as OVER
from ..errors import CeaError, OptionError
from . import DATASET_HELP, DEVICE, REPORT_TO, app, data_name, print_table

out = Console(soft_wrap=True)


@app.command()
def discover(
    texts: Path = typer.Argument(
        None,
        help="a file of texts (.csv, .tsv, .jsonl, .parquet, .txt): column text, and "
        "label where some are labelled (empty: to group); or a bundle folder: "
        "group the texts it answered unknown (cea serve --keep-unknowns)",
    ),
    dataset: str = typer.Option(None, help=f"the benchmark protocol on a labelled set: {DATASET_HELP}"),
    known_classes: float = typer.Option(None, help="with --dataset: the share of classes known (0.25, 0.5, 0.75)"),
    labelled: float = typer.Option(0.1, help="with --dataset: the share of the known classes' training texts labelled"),
    clusters: str = typer.Option(
        None,
        help="clusters in all (known + new): a number, auto (estimated) or given (the "
        "number of classes; the default with --dataset, auto otherwise); with a "
        "bundle: groups of its kept texts (auto: cut where its examples group best)",
    ),
    estimate: str = typer.Option(
        None,
        help="how --clusters auto estimates: labelled (the count at which the "
        "labelled texts' clusters best match their classes; among tied counts, "
        "the best silhouette), sizes (the same, but not above the count at which "
        "new groups are as large as the known classes on average: the default "
        "with --dataset, whose known classes are a random draw; labelled "
        "otherwise) or silhouette",
    ),
    model: str = typer.Option(
        DISCOVER_MODEL, help="the encoder: a catalog name or a folder (a bundle's unknowns: the bundle's own)"
    ),
    seed: int = typer.Option(0, help="seed of the protocol's draws and of k-means"),
    n_init: int = typer.Option(10, help="k-means draws of the new centres; the one of least inertia is kept"),
    text_column: str = typer.Option("text", help="the texts' column in TEXTS"),
    label_column: str = typer.Option("label", help="the labels' column in TEXTS (empty cells: texts to group)"),
    output: Path = typer.Option(
        None, "-o", "--output", help="folder for results.json and groups.json (default: cea-runs/discover-NAME-TIME)"
    ),
    whiten: bool = typer.Option(True, help="cluster in the space the known classes' within-class covariance whitens"),
    contrast: bool = typer.Option(
        True,
        help="first draw each text towards its nearest neighbours and the labelled "
        "texts to their classes (a small network trained over the embeddings)",
    ),
    fine_tune: bool = typer.Option(
        None,
        "--fine-tune/--no-fine-tune",
        show_default="on where 10 texts of 2 classes or more are labelled",
        help="first train the encoder on the labelled texts (cea train's defaults) and "
        "group in its space: a training run more (its embeddings cached: a second "
        "run on the same labelled texts and seed trains nothing)",
    ),
    keep_frozen: bool = typer.Option(
        True,
        "--keep-frozen/--tuned-only",
        help="with the fine-tuning: cluster the frozen encoder's embeddings and the "
        "trained one's side by side (the frozen space keeps the classes the "
        "training never saw together; one encode more, cached)",
    ),
    over: float = typer.Option(
        OVER,
        help="k-means first draws this many clusters per cluster asked for, then drops "
        "the smallest new ones and runs again (1: none drawn beyond)",
    ),
    show: int = typer.Option(10, help="new groups printed (the largest)"),
    accept: list[int] = typer.Option(
        None,
        help="with a bundle: add group ACCEPT of its last grouping as examples of "
        "--label (repeat it for a class split in several groups)",
    ),
    label: str = typer.Option(None, help="with --accept: the label of the group's texts (new or known)"),
    report_to: str = REPORT_TO,
    device: str = DEVICE,
) -> None:
    """Group unlabelled texts into known classes and new ones: size, central texts, words, nearest known class."""
    from ..discover import AUTO, GIVEN
    from ..progress import progress_bars
    from ..training.tracking import trackers

    bars = progress_bars()  # where not a terminal (a log file, a pipe): whole lines only
    if texts is not None and (texts / "manifest.json").exists():
        if fine_tune:
            raise CeaError(
                "--fine-tune goes with texts or --dataset; a bundle's unknowns are grouped in the space of "
                "its own encoder"
            )
        return _bundle(texts, clusters, seed, accept, label, show)
    if accept or label is not None:
        raise CeaError("--accept and --label go with a bundle folder: cea discover BUNDLE --accept GROUP --label NAME")
    if (texts is None) == (dataset is None):
        raise CeaError(
            "give a file of TEXTS to group, or --dataset NAME --known-classes SHARE for the benchmark "
            "protocol (not both)"
        )
    if dataset is not None and known_classes is None:
        raise CeaError("--dataset runs the benchmark protocol and needs --known-classes SHARE, e.g. 0.75")
    if dataset is None and known_classes is not None:
        raise CeaError(
            "--known-classes goes with --dataset (the protocol); a TEXTS file's labelled rows are the known classes"
        )
    if n_init < 1:
        raise OptionError("n_init", f"must be at least 1, got {n_init}")
    trackers(report_to)  # an unknown or missing tracker: said before anything runs
    if estimate is not None and estimate not in ESTIMATES:
        raise OptionError("estimate", f"must be one of {', '.join(ESTIMATES)}, got {estimate!r}")
    name = data_name(dataset) if dataset else texts.stem
    folder = output or Path("cea-runs") / f"discover-{name}-{dt.datetime.now():%Y%m%d-%H%M%S}"

    def say(line: str) -> None:
        out.print(line, highlight=False)

    tune = AUTO if fine_tune is None else fine_tune  # neither flag: where 10 texts of 2 classes are labelled
    common = dict(
        output=folder,
        model=model,
        n_init=n_init,
        whiten=whiten,
        contrast=contrast,
        device=device,
        say=say,
        progress=bars,
        fine_tune=tune,
        keep_frozen=keep_frozen,
        over=over,
        report_to=report_to,
    )
    if dataset is not None:
        _protocol(dataset, name, known_classes, labelled, seed, clusters or GIVEN, estimate or "sizes", common)
    else:
        _texts(texts, text_column, label_column, _count(clusters), estimate or "labelled", seed, show, common)
    out.print(f"written: {folder}/results.json and groups.json", highlight=False)


def _protocol(
    dataset: str, name: str, known_classes: float, labelled: float, seed: int, clusters, estimate: str, common
):
    """``cea discover --dataset``: the benchmark protocol, its test scores in a line."""
    from ..discover import discover_protocol

    results = discover_protocol(dataset, known_classes, labelled, seed, clusters=clusters, estimate=estimate, **common)
    test, guess = results["metrics"]["test"], results["clusters_estimate"]
    count = (
        f"{results['n_clusters']} clusters (estimated; {results['n_classes']} classes, error {guess['error']:+d})"
        if guess
        else f"{results['n_clusters']} clusters (given)"
    )
    out.print(
        f"{name}, {known_classes:.0%} known, seed {seed}, {count}: test accuracy {test['accuracy']:.2f}, "
        f"NMI {test['nmi']:.2f}, ARI {test['ari']:.2f} (known {test['known_accuracy']:.2f}, new "
        f"{test['new_accuracy']:.2f}); {results['total_seconds']:.0f} s",
        highlight=False,
    )


def _texts(texts: Path, text_column: str, label_column: str, clusters, estimate: str, seed: int, show: int, common):
    """``cea discover TEXTS``: its unlabelled rows grouped, the largest new groups in a table."""
    from ..data.readers import read_table
    from ..discover import discover_texts

    frame = read_table(texts)
    if text_column not in frame.columns:
        raise CeaError(
            f"{texts.name} has no column {text_column!r}; pass --text-column (it has "
            f"{', '.join(map(str, frame.columns))})"
        )
    frame = frame.rename(columns={text_column: "text", label_column: "label"})  # a label column it lacks: skipped
    frame = frame[frame["text"].notna() & (frame["text"].astype(str).str.strip() != "")]
    _, found = discover_texts(frame, clusters=clusters, estimate=estimate, seed=seed, **common)
    new = [g for g in found.groups if g["kind"] == "new"]
    print_table(
        f"{len(new)} new groups (largest {min(show, len(new))})",
        ["group", "size", "words", "central text", "nearest known"],
        left=3,
        console=out,
        rows=[
            [
                g["id"],
                g["size"],
                " ".join(g["words"][:5]),
                (g["central_texts"] or [""])[0][:60],
                f"{g['nearest_known']['label']} {g['nearest_known']['similarity']:.2f}" if g["nearest_known"] else "-",
            ]
            for g in new[:show]
        ],
    )


def _bundle(
    bundle: Path, clusters: str | None, seed: int, accept: list[int] | None, label: str | None, show: int
) -> None:
    """``cea discover BUNDLE``: group the texts it answered unknown; ``--accept G --label NAME`` adds group G."""
    from ..discover.unknowns import GROUPS, PAGE, accept_group, group_unknowns

    if (not accept) != (label is None):
        raise CeaError("--accept GROUP and --label NAME go together: the group to add and the label of its texts")
    if accept:
        ids = accept_group(bundle, list(accept), label, say=lambda line: out.print(f"note: {line}", highlight=False))
        out.print(
            f"added {len(ids)} examples of {label!r} to {bundle} (ids {ids[0]}-{ids[-1]}); a service serving "
            "it predicts them from its next request",
            highlight=False,
        )
        return
    count = _count(clusters)
    found = group_unknowns(bundle, clusters=count, seed=seed, say=lambda line: out.print(line, highlight=False))
    print_table(
        f"{found['n_unknowns']} texts answered unknown in {len(found['groups'])} groups",
        ["group", "kind", "texts", "words", "central text", "nearest known"],
        left=4,
        console=out,
        rows=[
            [
                g["id"],
                g["known_class"] or "new",
                g["size"],
                " ".join(g["words"][:5]),
                (g["central_texts"] or [""])[0][:60],
                f"{g['nearest_known']['label']} {g['nearest_known']['similarity']:.2f}" if g["nearest_known"] else "-",
            ]
            for g in found["groups"][:show]
        ],
    )
    out.print(
        f"written: {bundle / GROUPS} and {bundle / PAGE}; add a group with cea discover {bundle} --accept "
        "GROUP --label NAME",
        highlight=False,
    )


def _count(clusters: str | None) -> int | str:
    """``--clusters`` where texts are grouped (a file or a bundle's unknowns): a whole number, or auto (the default)."""
    from ..discover import AUTO

    if not clusters or clusters == AUTO:
        return AUTO
    try:
        return int(clusters)
    except ValueError:
        raise OptionError("clusters", f"must be auto or a whole number; got {clusters!r}") from None
