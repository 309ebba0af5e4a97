"""``cea train`` and ``cea compare``: fine-tune with an objective, judged by kNN or by Spearman."""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect
import re
import typing
from pathlib import Path

import typer
from rich.console import Console

from ..defaults import DEFAULT_MODEL, PATIENCE, UNKNOWN_RATE
from ..errors import CeaError, flag
from ..objectives.catalog import objectives_for, option_fields
from . import (
    BATCH,
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
    parse_ints,
    print_table,
    read_option,
)

out = Console(soft_wrap=True)  # a line a message, in a log too (rich would wrap it at 80 columns)


def _objective_help() -> str:
    kinds = {"classes": "labelled texts", "pairs": "scored pairs", "triplets": "triplet rows", "sentences": "sentences"}
    return "; ".join(f"{', '.join(objectives_for(data))} ({words})" for data, words in kinds.items())


def _is_list(owners: list) -> bool:
    spec, f = owners[0]
    return "list[" in str(typing.get_type_hints(spec.options)[f.name])


def _flag(owners: list) -> inspect.Parameter:
    """The ``cea train`` flag of an objective option (None: each objective's own default); lists as 3,4."""
    spec, f = owners[0]
    kind = str if _is_list(owners) else typing.get_type_hints(spec.options)[f.name]
    where = ", ".join(s.name + ("" if o.default is None else f" ({o.default})") for s, o in owners)
    help = (
        where
        + ": "
        + f.metadata["help"]
        + (f"; one of {', '.join(f.metadata['choices'])}" if "choices" in f.metadata else "")
    )
    return inspect.Parameter(
        f.name, inspect.Parameter.KEYWORD_ONLY, default=typer.Option(None, help=help), annotation=kind | None
    )


def _with_objective_flags(command):
    """Give ``command`` a flag for every objective option in the catalog, gathered in its ``**options``."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    command.__signature__ = signature.replace(parameters=own + [_flag(o) for o in option_fields().values()])
    command.__annotations__ = {p.name: p.annotation for p in command.__signature__.parameters.values()}
    return command


def objective_options(given: dict) -> dict:
    """The objective options given on the command line (None: not given), lists read from ``3,4``."""
    fields = option_fields()
    return {k: parse_ints(v, flag(k)) if _is_list(fields[k]) else v for k, v in given.items() if v is not None}


@app.command()
@_with_objective_flags
def train(
    dataset: str = typer.Option("trec6", help=DATASET_HELP),
    train_file: Path = TRAIN_FILE,
    dev_file: Path = DEV_FILE,
    test_file: Path = TEST_FILE,
    split_map: str = SPLIT_MAP,
    model: str = typer.Option(DEFAULT_MODEL, help="catalog name, hub id or local folder"),
    objective: str = typer.Option(
        "auto",
        help="auto: softmax (its head started from a logistic regression on the "
        "frozen embeddings) for texts with one label, cea for texts with several; or " + _objective_help(),
    ),
    output: Path = typer.Option(None, help="run folder (default: cea-runs/train-DATASET-OBJECTIVE-TIME)"),
    epochs: float = typer.Option(
        None, help="default: the objective's own (softmax 3, or up to 10 where 3 are under 800 steps; the others 1)"
    ),
    batch_size: str = BATCH,
    lr: float = typer.Option(None, help="default: the objective's own (softmax 5e-5, the others 2e-5)"),
    seed: int = typer.Option(0),
    sampler: str = typer.Option("pk", help="pk: P labels x K examples per batch; shuffle: plain shuffling"),
    k_per_class: int = typer.Option(4, help="K of the P x K sampler"),
    train_limit: int = typer.Option(
        None, "--limit", help="train on N random sentences, pairs or texts (drawn with --limit-seed)"
    ),
    limit_seed: int = typer.Option(0, help="seed of the --limit draw"),
    eval_dataset: str = typer.Option(None, help="judge on this data set (e.g. stsb for simcse on a text file)"),
    shots: int = typer.Option(None, help="train on N examples per label (drawn with --shots-seed)"),
    imbalance: str = typer.Option(None, help="LABEL:FRACTION,...: keep that fraction of a label's train examples"),
    unknown_classes: float = typer.Option(
        None,
        help="open intent: hide this share of the labels from training (test "
        "texts of hidden labels must come out unknown)",
    ),
    unknown_rate: float = typer.Option(
        UNKNOWN_RATE,
        help="with --unknown-classes: the share of known dev texts the "
        "unknown threshold turns away (the best mean over three sets at 25, 50 and 75% "
        "known: the figures page, docs/benchmarks.md, open intent)",
    ),
    shots_seed: int = typer.Option(0, help="seed of the --shots, --imbalance and --unknown-classes draws"),
    label_names: str = typer.Option("auto", help=LABEL_NAMES_HELP),
    aux_label_column: str = typer.Option(None, help="multitask: push same-value pairs of this column apart"),
    layers: int = typer.Option(None, help="keep only the first l transformer blocks"),
    max_seq_length: int = typer.Option(
        None, help="cut each text at this many tokens, in training and in the saved model (default: the model's own)"
    ),
    select: str = typer.Option(
        None,
        help="keep the best dev judgement's weights or the last step's (default: best "
        "where dev is judged; the trained head's accuracy where the objective has one, else kNN)",
    ),
    patience: int = typer.Option(
        PATIENCE,
        help="stop after N dev judgements in a row without a better one (judged "
        "every half epoch where a trained head judges, else every epoch); 0: run every epoch",
    ),
    save_steps: int = typer.Option(None, help="checkpoint every N steps (default: every epoch)"),
    max_steps: int = typer.Option(-1, help="stop after N steps (overrides epochs)"),
    device: str = DEVICE,
    precision: str = TRAIN_PRECISION,
    frozen_layers: str = typer.Option(
        "auto",
        help="keep the word embeddings and the first N transformer blocks as "
        "they are: auto (the objective's own: softmax 0, the word "
        "embeddings only; the others none), none, or N",
    ),
    chunk_size: str = typer.Option(
        "auto",
        help="encode each batch in length-sorted chunks: auto (boundaries chosen "
        "per batch on the CPU, all at once on a GPU), N texts each, or 0 "
        "(all at once)",
    ),
    resume: bool = typer.Option(False, help="continue the run in --output from its last checkpoint"),
    text_column: str = typer.Option("text"),
    label_column: str = typer.Option("label"),
    label_separator: str = typer.Option(
        None, help="several labels per text in one column, split at this (e.g. '|'); JSONL and Parquet lists need none"
    ),
    report_to: str = REPORT_TO,
    text2_column: str = typer.Option(None, help="a local file of scored pairs: the second text column"),
    score_column: str = typer.Option(None, help="a local file of scored pairs: the score column"),
    score_range: str = typer.Option(None, help="declared range of a local file's scores, LOW,HIGH (default 0,5)"),
    **options,  # one flag per objective option (cea.objectives.catalog), added by _with_objective_flags
) -> None:
    """Fine-tune an encoder; report kNN accuracy (labelled texts) or Spearman (scored pairs) on dev and test."""
    from ..progress import LINES, progress_bars
    from ..training import TrainConfig, train as train_run
    from ..training.config import RUN_FIELDS, configure, load_data

    progress = True if progress_bars() else LINES  # where not a terminal (a log file, a pipe): whole lines only
    dataset = dataset_spec(dataset, train_file, dev_file, test_file)
    run_level = {k: v for k, v in locals().items() if k in RUN_FIELDS - {"output", "score_range"}}
    folder = output or Path("cea-runs") / f"train-{data_name(dataset)}-{objective}-{dt.datetime.now():%Y%m%d-%H%M%S}"
    config = TrainConfig(
        **{
            **run_level,
            "chunk_size": parse_chunk_size(chunk_size),
            "batch_size": parse_batch(batch_size),
            "frozen_layers": parse_frozen_layers(frozen_layers),
        },
        output=str(folder),
        score_range=parse_range(score_range),
    )
    config = configure(config, **objective_options(options))  # the same check as compare's settings
    if imbalance and imbalance.startswith("each:"):  # one run per label, that label reduced
        fraction = imbalance.partition(":")[2]
        labels = load_data(config).labels
        for label in labels:
            sub = folder / ("imbalance-" + re.sub(r"[^\w.-]+", "_", str(label)))
            result = train_run(dataclasses.replace(config, imbalance=f"{label}:{fraction}", output=str(sub)), progress)
            out.print(f"{label} kept at {fraction}: test {json_metrics({'test': result['metrics']['test']})}")
        out.print(f"{len(labels)} runs in {folder}/imbalance-*; compare them with cea analyze")
        return
    result = train_run(config, progress)
    if "metrics" not in result:  # another process than the main one under torchrun: it reports
        return
    print_metrics(f"{objective} on {data_name(dataset)}", result["metrics"])
    out.print(
        f"model: {folder}/model  results: {folder}/results.json  "
        f"({result['train_seconds']:.0f} s training, {result['seconds_per_epoch']:.0f} s/epoch)"
    )


def parse_frozen_layers(text: str) -> int | str | None:
    """``--frozen-layers``: ``auto``, ``none`` (None: every weight trains) or a number of blocks."""
    text = text.strip().lower()
    if text in ("auto", "none"):
        return None if text == "none" else text
    return read_option(text, "--frozen-layers", int, "use auto, none or a number of blocks such as 0")


def parse_batch(text: str) -> int | str:
    """``--batch-size``: ``auto`` or a positive number of texts."""
    if text.strip().lower() == "auto":
        return "auto"
    if not text.strip().lstrip("-").isdigit():
        raise CeaError(f"cannot read --batch-size {text!r}; use auto or a number of texts such as 32")
    if int(text) < 1:
        raise CeaError(f"--batch-size must be positive, got {int(text)}")
    return int(text)


def parse_chunk_size(text: str) -> int | str | None:
    """``--chunk-size``: ``auto``, ``0`` (None: one pass) or a number of rows."""
    if text.strip().lower() == "auto":
        return "auto"
    return read_option(text, "--chunk-size", lambda t: int(t) or None, "use auto, 0 or a number of texts such as 8")


def parse_range(text: str | None) -> tuple[float, float] | None:
    """``--score-range`` LOW,HIGH: one comma (a missing or second one leaves a part float() cannot read)."""
    return (
        None
        if text is None
        else read_option(
            text, "--score-range", lambda t: tuple(float(v) for v in t.partition(",")[::2]), "write LOW,HIGH, e.g. 0,5"
        )
    )


GROUPS = (("open set", ("open_", "known_", "unknown_")), ("retrieval", ("top", "mrr")))


def print_metrics(title: str, metrics: dict) -> None:
    """One row per split, one column per metric; open-set and retrieval scores in tables of their own."""
    columns = list(dict.fromkeys(k for m in metrics.values() for k in m))
    grouped = {name: [c for c in columns if c.startswith(prefixes)] for name, prefixes in GROUPS}
    tables = [(title, [c for c in columns if not any(c in g for g in grouped.values())])]
    tables += [(f"{title}: {name}", cols) for name, cols in grouped.items() if cols]
    for heading, cols in tables:
        rows = [
            [split, *(f"{m[c]:.2f}" if c in m else "-" for c in cols)]
            for split, m in metrics.items()
            if any(c in m for c in cols)
        ]
        print_table(heading, ["split", *(c.replace("_", " ") for c in cols)], console=out, rows=rows)


@app.command()
def compare(
    dataset: str = typer.Option("trec6", help="catalog name or local file"),
    model: str = typer.Option(DEFAULT_MODEL, help="catalog name, hub id or local folder"),
    objectives: str = typer.Option("softmax,cea", help="settings, e.g. softmax,cea[pairs=all,memory=bank],triplet"),
    seeds: str = typer.Option("0,1,2", help="comma-separated seeds"),
    epochs: float = typer.Option(None, help="every setting's epochs [default: each objective's own]"),
    batch_size: str = BATCH,
    lr: float = typer.Option(None, help="every setting's learning rate [default: each objective's own]"),
    sampler: str = typer.Option("pk"),
    k_per_class: int = typer.Option(4),
    output: Path = typer.Option(None, help="grid folder (finished runs in it are reused)"),
    device: str = DEVICE,
    precision: str = TRAIN_PRECISION,
) -> None:
    """A grid of runs: mean and std per setting of accuracy, macro-F1, time per epoch and peak memory."""
    from ..training import TrainConfig
    from ..training.compare import compare as run, parse_settings

    folder = output or Path("cea-runs") / f"compare-{data_name(dataset)}-{dt.datetime.now():%Y%m%d-%H%M%S}"
    base = TrainConfig(
        dataset=dataset,
        model=model,
        epochs=epochs,
        batch_size=parse_batch(batch_size),
        lr=lr,
        sampler=sampler,
        k_per_class=k_per_class,
        device=device,
        precision=precision,
    )
    summary = run(
        base,
        parse_settings(objectives),
        parse_ints(seeds, "--seeds"),
        folder,
        on_run=lambda label, seed, r: out.print(
            f"{label} seed {seed}: test kNN accuracy {r['metrics']['test']['knn_accuracy']:.2f}"
        ),
    )
    budget = (
        "each objective's own lr and epochs"
        if epochs is None and lr is None
        else ", ".join(f"{name} {v:g}" for name, v in (("epochs", epochs), ("lr", lr)) if v is not None)
    )
    print_table(
        f"{dataset}, {model}, {budget}, seeds {seeds}: test kNN (k=5)",
        ["setting", "accuracy", "macro-F1", "s/epoch", "peak MB"],
        console=out,
        rows=[
            [
                r["setting"],
                f"{r['accuracy_mean']:.2f} ± {r['accuracy_std']:.2f}",
                f"{r['macro_f1_mean']:.2f} ± {r['macro_f1_std']:.2f}",
                f"{r['seconds_per_epoch']:.0f}",
                f"{r['peak_memory_mb']:.0f}",
            ]
            for r in summary["rows"]
        ],
    )
    out.print(f"written {folder}/compare.json")


@app.command("sweep-layers")
def sweep_layers(
    dataset: str = typer.Option("stsb", help="scored pairs (Spearman) or labelled texts (kNN accuracy)"),
    model: str = typer.Option(DEFAULT_MODEL, help="catalog name, hub id or local folder"),
    objective: str = typer.Option("cosine-regression", help="the objective every truncated model trains with"),
    layers: str = typer.Option("all", help="depths to train: all, or e.g. 2,4,6"),
    seeds: str = typer.Option("0,1,2", help="the first trains every depth; all of them train the best depth"),
    epochs: float = typer.Option(1.0),
    batch_size: int = typer.Option(16),
    lr: float = typer.Option(2e-5),
    output: Path = typer.Option(None, help="sweep folder (finished runs in it are reused)"),
    score_range: str = typer.Option(None, help="declared range of a local file's scores, LOW,HIGH (default 0,5)"),
    device: str = DEVICE,
    precision: str = TRAIN_PRECISION,
) -> None:
    """Truncated-model fine-tuning: one model per depth, the best by dev, its test mean and std over seeds."""
    from ..training import TrainConfig
    from ..training.sweep import sweep_layers as run

    seed_list = parse_ints(seeds, "--seeds") or []
    layer_list = None if layers == "all" else parse_ints(layers, "--layers")
    folder = output or Path("cea-runs") / f"sweep-{data_name(dataset)}-{dt.datetime.now():%Y%m%d-%H%M%S}"
    base = TrainConfig(
        dataset=dataset,
        model=model,
        objective=objective,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        score_range=parse_range(score_range),
        device=device,
        precision=precision,
    )
    summary = run(
        base,
        layer_list,
        seed_list,
        folder,
        on_run=lambda layer, seed, r: out.print(f"layer {layer} seed {seed}: {json_metrics(r['metrics'])}"),
    )
    tuned = summary["fine_tuned"]
    print_table(
        f"{dataset}, {model}: {summary['metric']} by depth (x 100)",
        ["layer", "frozen dev", "frozen test", "tuned dev", "tuned test"],
        left=0,
        console=out,
        rows=[
            [
                layer,
                f"{v['dev']:.2f}",
                f"{v['test']:.2f}",
                *(f"{tuned[layer][s]:.2f}" if layer in tuned else "-" for s in ("dev", "test")),
            ]
            for layer, v in summary["frozen"].items()
        ],
    )
    out.print(
        f"best depth {summary['best_layer']} (by dev): test {summary['best_test_mean']:.2f} ± "
        f"{summary['best_test_std']:.2f} over seeds {seeds}; plot {folder}/layer_curve.png"
    )


def json_metrics(metrics: dict) -> str:
    return "; ".join(f"{split} " + ", ".join(f"{k} {v:.2f}" for k, v in m.items()) for split, m in metrics.items())
