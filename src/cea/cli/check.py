"""The labelling loop: ``cea check DATA`` (the labels that are probably wrong, and a cleaned copy:
:mod:`cea.labelling.check`) and ``cea suggest BUNDLE`` (the texts to label next: :mod:`cea.labelling.suggest`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from ..defaults import DEFAULT_MODEL
from ..errors import CeaError
from ..paths import atomic_path
from . import DATASET_HELP, DEVICE, app, data_name, print_table

out = Console(soft_wrap=True)  # a line a message, in a log too (rich would wrap it at 80 columns)


LABEL_STUDIO = typer.Option(
    None,
    "--label-studio",
    help="also create the rows as tasks in this Label Studio "
    "(URL; an API key in LABEL_STUDIO_API_KEY), with cea's label as a prediction",
)
PROJECT = typer.Option(None, help="with --label-studio: the project's id")


def connect(url: str | None, project: int | None):
    """The Label Studio of ``--label-studio`` (its project checked now, before any work), or None."""
    from ..labelling.label_studio import LabelStudio

    if url is None:
        if project is not None:
            raise CeaError("--project names a Label Studio project; pass --label-studio URL too")
        return None
    if project is None:
        raise CeaError("--label-studio needs --project ID, the project to create the tasks in")
    studio = LabelStudio(url)
    studio.config(project)  # reachable, the key taken, the project there with a config cea can fill
    return studio


def push(studio, project: int, what: str, tasks, known: set[str]) -> None:
    """Create ``tasks(config)`` in ``project`` (the config read against the ``known`` labels), saying how far."""
    with studio:
        made = studio.create_tasks(
            project,
            tasks(studio.config(project, known)),
            say=lambda done, total: out.print(f"label studio: {done} of {total} tasks"),
        )
    out.print(
        f"{len(made)} tasks created in Label Studio project {project} ({studio.url}/projects/{project}); "
        f"cea {what}'s label is each one's prediction"
    )


@app.command()
def check(
    dataset: str = typer.Argument(..., metavar="DATA", help=DATASET_HELP),
    model: str = typer.Option(
        DEFAULT_MODEL, help="the encoder: a name, a folder, or a bundle (cea fit's: its chosen encoder)"
    ),
    split: str = typer.Option(
        "all", help="the split whose labels are checked, or all (the copy keeps a split column, which cea reads back)"
    ),
    folds: int = typer.Option(5, help="the classifier answers each fold fitted on the others"),
    knn_share: float = typer.Option(
        None,
        help="share of the nearest texts' vote in the probabilities (default: "
        "the share that found flipped labels best in cea's benchmarks)",
    ),
    output: Path = typer.Option(None, "-o", "--output", help="CSV of the flagged rows (default check-DATA.csv)"),
    fix: str = typer.Option(
        None,
        help="drop or relabel: also write a copy of the split without the flagged rows, "
        "or with their suggested labels (--fixed; the input is never touched)",
    ),
    fixed_output: Path = typer.Option(None, "--fixed", help="the cleaned copy (default check-DATA.fixed.csv)"),
    text_column: str = typer.Option("text"),
    label_column: str = typer.Option("label"),
    label_studio: str = LABEL_STUDIO,
    project: int = PROJECT,
    device: str = DEVICE,
) -> None:
    """Labels the classifier does not believe out of fold (cleanlab), duplicates labelled differently, and the
    classes confused most."""
    import numpy as np
    import pandas as pd

    from ..bundle.examples import encode
    from ..data import load_dataset
    from ..encoders import load_encoder
    from ..labelling.check import FIXES, check_labels, fixed
    from ..labelling.label_studio import check_tasks

    if fix is not None and fix not in FIXES:
        raise CeaError(f"--fix must be drop or relabel, got {fix!r}")
    studio = connect(label_studio, project)  # before the work: a Label Studio that is down fails first
    name = data_name(dataset)
    output = output or Path(f"check-{name}.csv")
    fixed_output = fixed_output or output.with_name(output.stem + ".fixed.csv")
    sources = {p.resolve() for p in [Path(dataset), *(Path(dataset).iterdir() if Path(dataset).is_dir() else ())]}
    if {output.resolve(), fixed_output.resolve()} & sources:
        raise CeaError(f"{output} or {fixed_output} is the input; name other files with -o and --fixed")
    ds = load_dataset(dataset, text_column=text_column, label_column=label_column)
    if split != "all" and split not in ds.splits:
        raise CeaError(f"{name} has no {split!r} split (it has {', '.join(ds.splits)}); pass --split")
    frame = pd.concat(
        [ds[s][["text", "label"]].assign(split=s) for s in (ds.splits if split == "all" else [split])],
        ignore_index=True,
    )
    if len(frame) and isinstance(frame["label"].iloc[0], (list, tuple)):
        raise CeaError("cea check takes one label per text; label sets are not checked yet")
    texts, labels = list(frame["text"]), frame["label"].astype(str).to_numpy()
    bundle = (Path(model) / "manifest.json").exists()
    if bundle:  # the encoder it serves
        model = str(Path(model) / "encoder")
    out.print(f"encoding {len(texts)} texts of {name}/{split} with {model}")
    embeddings = encode(load_encoder(model, device=device), texts)
    result = check_labels(
        texts, labels, embeddings, folds=folds, **({} if knn_share is None else {"knn_share": knn_share})
    )
    conflicts = result.conflicts
    rows = pd.concat(
        [
            result.issues,
            pd.DataFrame(
                {
                    "row": conflicts["row_b"],
                    "text": conflicts["text_b"],
                    "label": conflicts["label_b"],
                    "suggested": conflicts["label_a"],
                    "score": conflicts["cosine"],
                    "reason": [
                        f"labelled otherwise than row {a} ({label!r}), cosine {c:.3f}"
                        for a, label, c in zip(conflicts["row_a"], conflicts["label_a"], conflicts["cosine"])
                    ],
                }
            ),
        ]
    )
    with atomic_path(output) as tmp:
        rows.to_csv(tmp, index=False)
    print_table(
        f"{len(result.issues)} of {len(texts)} labels probably wrong (the likeliest first; all in {output})",
        ["row", "label", "suggested", "score", "text"],
        [(r.row, r.label, r.suggested, f"{r.score:.3f}", str(r.text)[:60]) for r in result.issues[:10].itertuples()],
    )
    out.print(f"{len(conflicts)} pairs of (near-)duplicate texts labelled differently")
    if not bundle:  # bench/label_fix.py's notes: trec50, 10 % flips: precision 0.73 on the fit's encoder, 0.36 frozen
        out.print(
            "checked on an encoder that has not seen these labels; the bundle cea fit made from them "
            "(--model BUNDLE) finds wrong labels more precisely"
        )
    print_table("classes confused most (out of fold)", ["label", "taken for", "texts"], result.confused[:5])
    if studio is not None:
        push(
            studio,
            project,
            "check",
            lambda config: check_tasks(config, result.issues, f"cea-check-{name}"),
            set(np.unique(labels)),
        )
    if fix:
        frame = frame.rename(columns={"text": text_column, "label": label_column})
        with atomic_path(fixed_output) as tmp:
            fixed(frame, result, fix, label_column).to_csv(tmp, index=False)
        out.print(f"{fix}: {len(result.issues)} rows; the copy is {fixed_output}")


@app.command()
def suggest(
    bundle_dir: Path = typer.Argument(..., metavar="BUNDLE", help="a folder written by cea bundle or cea fit"),
    texts: Path = typer.Option(
        None,
        help="unlabelled texts: .txt (a line each), .csv, .tsv, .jsonl or .parquet "
        "(default: the traffic the bundle's service kept, cea serve --keep-traffic N)",
    ),
    n: int = typer.Option(20, "--n", help="how many texts to suggest"),
    output: Path = typer.Option(
        None, "-o", "--output", help="CSV of the suggestions (default: suggest-TEXTS.csv, suggest-traffic.csv)"
    ),
    text_column: str = typer.Option("text"),
    seed: int = typer.Option(0, help="seed of the k-means spread"),
    label_studio: str = LABEL_STUDIO,
    project: int = PROJECT,
    device: str = DEVICE,
) -> None:
    """The texts whose labels would help the bundle most: the least sure, one from each tight group."""
    from ..bundle import Bundle
    from ..data.readers import read_table
    from ..labelling.label_studio import suggestion_tasks
    from ..labelling.suggest import MOST_UNSURE, from_traffic, suggest as rank

    if n < 1:
        raise CeaError(f"--n must be at least 1, got {n}")
    output = output or Path(f"suggest-{texts.stem if texts else 'traffic'}.csv")
    pool = []
    if texts is not None:
        frame = read_table(texts)
        if text_column not in frame.columns:
            raise CeaError(f"{texts.name} has no column {text_column!r}; choose one with --text-column")
        pool = [str(t) for t in frame[text_column].dropna() if str(t).strip()]
        if not pool:
            raise CeaError(f"{texts.name} holds no texts; pass a file with some")
    studio = connect(label_studio, project)
    with Bundle.load(bundle_dir, device=device) as loaded:
        chosen = rank(loaded, pool, n, seed) if texts is not None else from_traffic(loaded, n, seed)
        version, known = loaded.version, set(loaded.label_counts)
    if studio is not None:
        push(studio, project, "suggest", lambda config: suggestion_tasks(config, chosen, version, MOST_UNSURE), known)
    with atomic_path(output) as tmp:
        chosen.to_csv(tmp, index=False)
    print_table(
        f"{len(chosen)} texts to label next (all in {output})",
        ["text", "prediction", "runner-up", "score"],
        [(str(r.text)[:70], r.prediction, r.runner_up, f"{r.score:.3f}") for r in chosen.itertuples()],
    )
    out.print(
        "once labelled, add them to the bundle: POST /examples on cea serve (kept traffic by id: "
        '{"suggestions": [id], "labels": [label]}), or Bundle.add in Python'
    )
