"""``cea bundle``, ``cea predict`` and ``cea serve``: ship a classifier that grows without retraining."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console

from ..defaults import UNKNOWN_RATE
from ..errors import CeaError
from . import ACTORS, ADDRESS, DEVICE, ENGINE, LABEL_NAMES_HELP, PRECISION, app

out = Console(stderr=True, soft_wrap=True)  # a line a message, in a log too
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@app.command()
def bundle(
    model: str = typer.Argument(..., help="catalog name, hub id or local folder (e.g. RUN/model)"),
    dataset: str = typer.Option(
        None,
        help="labelled data set whose examples become the references (none: an empty "
        "bundle, whose labels come with their names from Label Studio's label config, or "
        "with the first examples added)",
    ),
    output: Path = typer.Option(..., "-o", "--output", help="the bundle folder (must not exist)"),
    splits: str = typer.Option(
        "train,dev,test", help="splits that become references (default: every labelled example)"
    ),
    shots: int = typer.Option(None, help="keep N train examples per label, the sample cea train --shots drew"),
    shots_seed: int = typer.Option(0, help="seed of the --shots draw (as cea train's --shots-seed)"),
    classifier: str = typer.Option(
        "linear",
        help="linear (a logistic regression on the embeddings, refitted after "
        "additions) or knn (the vote of the --k nearest examples)",
    ),
    head_c: float = typer.Option(10.0, "--head-c", help="the linear head's C (inverse L2 strength)"),
    head: str = typer.Option(
        "fit",
        help="linear: fit (on the references) or trained (the head cea train saved beside "
        "RUN/model, the one its dev judgements chose the weights by)",
    ),
    knn_share: float = typer.Option(
        0.0, help="linear: mix the --k nearest examples' vote into the head's probabilities with this weight (0-1)"
    ),
    class_weight: str = typer.Option(
        "median",
        help="linear: median (a label with fewer examples than the median "
        "label weighs as if it had the median count, so labels added with a few "
        "examples get predicted) or none (every example weighs 1)",
    ),
    k: int = typer.Option(5, help="neighbours listed with each prediction (and that vote, with --classifier knn)"),
    unknown_rate: float = typer.Option(
        None,
        help="answer unknown below a threshold that turns away this share of "
        f"held-out examples ({UNKNOWN_RATE:g}, as cea train: the best mean over nine "
        "open-intent settings; 0.05-0.1 where nearly all traffic is known: the figures "
        "page, docs/benchmarks.md, open intent; default: never answer unknown)",
    ),
    unknown_threshold: float = typer.Option(
        None, help="answer unknown when a prediction's evidence (score x nearest cosine) falls below this"
    ),
    label_names: str = typer.Option("auto", help=LABEL_NAMES_HELP),
    index: str = typer.Option(
        "auto", help="auto, exact, int8, flat, hnsw or ivf (auto: exact up to 50,000 references)"
    ),
    store: str = typer.Option(
        None,
        help="keep the examples in PostgreSQL with pgvector, shared by every service "
        "process: postgresql://USER@HOST:PORT/DB (no password: PGPASSWORD or ~/.pgpass; "
        "default: in the bundle folder)",
    ),
    backend: str = typer.Option(
        "auto",
        help="auto (int8 ONNX where it encodes faster and keeps held-out accuracy "
        "within 0.3 point of PyTorch, measured now), torch, onnx (fp32) or onnx-int8",
    ),
    text_column: str = typer.Option("text"),
    label_column: str = typer.Option("label"),
    label_separator: str = typer.Option(None, help="several labels per text in one column, split at this (e.g. '|')"),
    device: str = DEVICE,
    precision: str = PRECISION,
) -> None:
    """Encoder, reference embeddings, labels, texts and an index in one verified folder (no pickle); label lists
    make a multi-label bundle; no --dataset, an empty bundle to start labelling from. (cea bundle compact BUNDLE folds
    a folder bundle's log into a new generation.)"""
    import pandas as pd

    from ..bundle import Bundle
    from ..data import load_dataset
    from ..data.dataset import subsample
    from ..knn.decision import Classifier
    from ..progress import progress_bars

    spec = Classifier(
        classifier,
        k=k,
        C=head_c,
        knn_share=knn_share,
        unknown_threshold=unknown_threshold,
        class_weight=None if class_weight == "none" else class_weight,
        head=head,
    )
    frame, labels = pd.DataFrame({"text": []}), []
    if dataset is not None:
        ds = load_dataset(dataset, text_column=text_column, label_column=label_column, label_separator=label_separator)
        if ds.task not in ("classification", "multilabel"):
            raise CeaError(f"a bundle needs labelled texts; {ds.name} is {ds.task}")
        if shots:
            ds = subsample(ds, shots, seed=shots_seed)
        frame = pd.concat([ds[s.strip()] for s in splits.split(",") if s.strip()])
        labels = list(frame["labels"] if ds.task == "multilabel" else frame["label"])
    bars = progress_bars()  # where not a terminal (a log file, a pipe): whole lines only
    made = Bundle.create(
        output,
        model,
        list(frame["text"]),
        labels,
        classifier=spec,
        unknown_rate=unknown_rate,
        index=index,
        progress=bars,
        backend=backend,
        device=device,
        precision=precision,
        store=store,
        label_names=label_names,
    )
    info = made.manifest["index"]
    recall = f", recall@{info['recall_k']} {info['recall_at_k']:.3f}" if info["recall_at_k"] is not None else ""
    out.print(
        f"bundle {output}: {len(made.ids)} examples, {len(made.label_counts)} labels, "
        f"{made.embeddings.shape[1]} dims, {info['kind']} index{recall}, {made.manifest['backend']} encoder"
        + (f" ({made.manifest['backend_choice']['reason']})" if made.manifest.get("backend_choice") else "")
        + ", "
        + ("multi-label " if made.multi_label else "")
        + f"{classifier} classifier"
        + (f", examples in {made.store.url} table {made.store.table}" if store else "")
        + (f", unknown below evidence {made.unknown_threshold:.4f}" if made.unknown_threshold is not None else "")
    )


@app.command("bundle-compact", hidden=True)
def bundle_compact(
    bundle_dir: Path = typer.Argument(..., metavar="BUNDLE", help="a folder written by cea bundle"),
    device: str = DEVICE,
    precision: str = PRECISION,
) -> None:
    """cea bundle compact BUNDLE: fold the log into a new generation and drop removed examples (it also runs by itself
    past a share of removed or logged rows); safe while cea serve runs on the bundle."""
    from ..bundle import Bundle

    with Bundle.load(bundle_dir, device=device, precision=precision) as loaded:
        if loaded.store.kind != "folder":
            raise CeaError(
                f"{bundle_dir} keeps its examples in PostgreSQL, which has no log to fold (its autovacuum "
                "reclaims removed rows)"
            )
        before = len(loaded.index.vectors)
        loaded.compact()
        out.print(
            f"bundle {bundle_dir}: generation {loaded.manifest['generation']}, {len(loaded.index)} examples "
            f"({before - len(loaded.index)} removed rows dropped)"
        )


def _part_done(output: Path):
    """A line per part done (on stderr), with the rows so far."""
    rows = [0]

    def say(result: dict) -> None:
        rows[0] += result["rows"]
        print(f"part {result['part']} done ({rows[0]} rows so far, {output})", file=sys.stderr, flush=True)

    return say


@app.command()
def predict(
    bundle_dir: Path = typer.Argument(..., metavar="BUNDLE", help="a folder written by cea bundle"),
    input: str = typer.Option(
        "-",
        "--input",
        help='text lines or JSONL ({"text": ...}); - reads stdin. With '
        "--output: a .txt, .jsonl, .csv or .parquet file, a folder or a glob of them",
    ),
    output: Path = typer.Option(
        None,
        "-o",
        "--output",
        help="a .jsonl, .csv or .parquet file of the input's rows with "
        "label, score, evidence (and closest, labels, top), or a folder of Parquet parts "
        "(--engine ray writes one); default: JSONL on stdout",
    ),
    text_column: str = typer.Option("text", help="with --output: the input's text column"),
    top: int = typer.Option(0, help="with --output: also the N likeliest labels and their probabilities"),
    overwrite: bool = typer.Option(False, help="replace an existing --output"),
    batch_rows: int = typer.Option(
        None,
        help="rows read, predicted and written at a time (default 10,000 into a "
        "file, 2,000 a part into a folder: many parts, so actors share them evenly): the texts and answers held at "
        "once. The encoder's memory is bounded apart: each of its passes holds a set number of tokens (texts x the "
        "longest), whatever this is and however long the texts",
    ),
    engine: str = ENGINE,
    address: str = ADDRESS,
    actors: int = ACTORS,
    k: int = typer.Option(None, help="neighbours listed (and that vote in a knn bundle; default: the bundle's)"),
    threshold: float = typer.Option(None, help="answer unknown below this evidence (default: the bundle's; 0: never)"),
    device: str = DEVICE,
    precision: str = PRECISION,
) -> None:
    """Predict a stream of texts: JSONL out, a line per input (label or unknown, score, evidence, neighbours), or
    with --output a corpus's rows written batch by batch."""
    from ..bundle import Bundle

    if (batch_rows is not None and batch_rows < 1) or top < 0:
        raise CeaError("--batch-rows must be at least 1 and --top at least 0")
    if output is None and (engine != "local" or address or actors):
        raise CeaError("--engine, --address and --actors go with --output")
    if output is not None:
        from ..batch.engines import shares_said
        from ..batch.parts import PART_ROWS
        from ..batch.predict import is_folder, predict_files, predict_folder
        from ..batch.streams import BATCH_ROWS, BatchWriter, input_files

        if input == "-":
            raise CeaError("--output needs --input PATH: a file, folder or glob of texts")
        input_files(input)
        if is_folder(output):
            done = predict_folder(
                bundle_dir,
                input,
                output,
                text_column,
                k,
                threshold,
                top,
                batch_rows or PART_ROWS,
                overwrite,
                engine,
                address,
                actors,
                device,
                precision,
                say=_part_done(output),
            )
            out.print(f"{sum(d['rows'] for d in done)} rows in {len(done)} parts in {output}" + shares_said(done))
            return
        if engine != "local":
            raise CeaError(f"--engine {engine} writes a folder of Parquet parts; pass --output DIR")
        BatchWriter(output, overwrite)  # refused now, before the bundle loads, where it exists or cannot be written
        loaded = Bundle.load(bundle_dir, device=device, precision=precision)
        written = predict_files(
            loaded,
            input,
            str(output),
            text_column,
            k,
            threshold,
            top,
            batch_rows or BATCH_ROWS,
            overwrite,
            say=lambda n: print(f"{n} rows predicted", file=sys.stderr, flush=True),
        )
        print(f"{written} rows in {output}", file=sys.stderr)
        return
    _predict_lines(bundle_dir, input, k, threshold, device, precision)


def _predict_lines(
    bundle_dir: Path, input: str, k: int | None, threshold: float | None, device: str, precision: str
) -> None:
    """A JSONL answer on stdout per text line (or ``{"text": ...}`` line) of ``input``, 256 texts at a time."""
    from ..bundle import Bundle

    source = sys.stdin if input == "-" else open(input, encoding="utf-8")  # noqa: SIM115
    loaded, texts, any_text = Bundle.load(bundle_dir, device=device, precision=precision), [], False

    def flush():
        for text, p in zip(texts, loaded.predict(texts, k, threshold)):
            print(json.dumps({"text": text, **p.as_dict()}))
        texts.clear()

    with source:
        for number, line in enumerate(source, start=1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            if line.lstrip().startswith("{"):
                try:
                    line = json.loads(line)["text"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    raise CeaError(f'input line {number} looks like JSON but has no "text" field') from None
            texts.append(line)
            any_text = True
            if len(texts) == 256:  # a batch at a time: memory holds one whatever the input's length
                flush()
    if not any_text:
        raise CeaError('no input texts; pass lines of text or JSONL with a "text" field')
    if texts:
        flush()


# cea serve's numeric flags: the least each takes, and what its least means
LEAST = {
    "workers": (1, ""),
    "max_batch": (1, ""),
    "max_wait": (0, " (milliseconds)"),
    "keep_unknowns": (0, " (0: keep none)"),
    "keep_traffic": (0, " (0: keep none)"),
    "train_from": (0, " (0: only on START_TRAINING)"),
}


def _at_least(**given) -> None:
    """Refuse a flag of ``cea serve`` given below its least (:data:`LEAST`), naming the flag."""
    for name, value in given.items():
        least, note = LEAST[name]
        if value is not None and value < least:
            raise CeaError(f"--{name.replace('_', '-')} must be at least {least}{note}, got {value}")


@app.command()
def serve(
    bundle_dir: str = typer.Argument(
        ..., metavar="BUNDLE", help="a folder written by cea bundle, or hub:ORG/NAME (pulled and verified on first use)"
    ),
    host: str = typer.Option("127.0.0.1", help="address to bind (loopback by default)"),
    port: int = typer.Option(8000),
    token: str = typer.Option(None, envvar="CEA_TOKEN", help="bearer token for changes (required off loopback)"),
    workers: int = typer.Option(
        None,
        help="service processes behind the one address, each with the bundle in "
        "memory; a change made through one is seen by every other from its next request; "
        "default 1, one per core for a static encoder",
    ),
    max_batch: int = typer.Option(
        None,
        help="concurrent predictions are encoded together, up to this many texts "
        "in one batch (one batch per core at a time); default 8, on a GPU 128 (two at "
        "a time)",
    ),
    max_wait: float = typer.Option(
        None, help="milliseconds a batch waits for more requests after its first; default 5, 0 for a static encoder"
    ),
    keep_unknowns: int = typer.Option(
        0,
        help="keep the latest this many texts answered unknown in the bundle's "
        "store (GET /unknowns; cea discover BUNDLE groups them); 0: keep none",
    ),
    keep_traffic: int = typer.Option(
        0,
        help="keep the latest this many predicted texts and their embeddings in the "
        "bundle's store (GET /suggest, cea suggest BUNDLE rank them); 0: keep none",
    ),
    train: bool = typer.Option(
        True,
        "--train/--no-train",
        help="fine-tune in the background: cea fit on the "
        "bundle's examples on Label Studio's START_TRAINING and whenever its annotations have "
        "doubled (--train-from), swapped in where better on annotations it did not train on",
    ),
    train_budget: str = typer.Option("15m", help="each background fit's budget (cea fit --budget)"),
    train_from: int = typer.Option(
        50,
        help="annotations at the first background fit started by itself, the next "
        "each time they have doubled (0: only on Label Studio's START_TRAINING)",
    ),
    train_work: Path = typer.Option(
        None, help="folder of the background fits' data, runs and bundles (default: cea-runs/serve-NAME)"
    ),
    device: str = DEVICE,
    precision: str = PRECISION,
) -> None:
    """POST /predict, POST /examples, DELETE /examples/{id}, GET /labels, /unknowns, /suggest, /health, /metrics;
    Label Studio's ML backend under /label-studio."""
    import os

    import uvicorn

    from ..bundle import Bundle
    from ..progress import parse_duration
    from ..service.app import SETTINGS, batching, create_app, logged, service_threads, serving_defaults
    from ..service.processes import listening_socket, reuse_port, serve_processes
    from ..sharing import pulled

    if host not in LOOPBACK and not token:
        raise CeaError(f"serving on {host} lets other machines change the bundle; set --token or CEA_TOKEN")
    _at_least(workers=workers, max_batch=max_batch, max_wait=max_wait, keep_unknowns=keep_unknowns)
    _at_least(keep_traffic=keep_traffic, train_from=train_from)
    budget = parse_duration(train_budget, "train_budget")  # said as --train-budget
    bundle_dir = pulled(bundle_dir) if bundle_dir.startswith("hub:") else Path(bundle_dir)
    work = train_work or Path("cea-runs") / f"serve-{bundle_dir.resolve().name}"
    fine_tune = {"budget": budget, "work": str(work.resolve()), "first": train_from} if train else None
    service_threads(workers or 1)  # before loading: an ONNX encoder takes its threads from torch's
    loaded = Bundle.load(bundle_dir, device=device, precision=precision)  # errors said here, once
    default_workers, default_wait = serving_defaults(loaded)
    workers, max_wait = workers or default_workers, default_wait * 1000 if max_wait is None else max_wait
    batch, batchers = batching(loaded, workers, max_batch)
    if workers > 1 and reuse_port():
        try:
            listening_socket(host, port, shared=False).close()  # nothing else serves there
        except OSError as exc:
            loaded.close()
            raise CeaError(
                f"cannot listen on {host}:{port} ({exc.strerror}); stop what serves there or pass --port"
            ) from None
    out.print(
        f"serving {bundle_dir} ({len(loaded)} examples, {loaded.store.kind} store) on http://{host}:{port}"
        + (f" with {workers} workers" if workers > 1 else "")
    )
    logged()
    if workers == 1:
        uvicorn.run(
            create_app(
                loaded,
                token=token,
                max_batch=batch,
                max_wait=max_wait / 1000,
                batchers=batchers,
                keep_unknowns=keep_unknowns,
                keep_traffic=keep_traffic,
                fine_tune=fine_tune,
            ),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
        )
        return
    loaded.close()
    settings = {
        "bundle": str(bundle_dir.resolve()),
        "token": token,
        "device": device,
        "precision": precision,
        "workers": workers,
        "max_batch": max_batch,
        "max_wait": max_wait / 1000,
        "keep_unknowns": keep_unknowns,
        "keep_traffic": keep_traffic,
        "fine_tune": fine_tune,
    }
    if reuse_port():  # a socket each: the kernel spreads the connections over the workers
        raise typer.Exit(serve_processes(settings, workers, host, port))
    os.environ[SETTINGS] = json.dumps(settings)
    uvicorn.run(
        "cea.service.app:from_environment",
        factory=True,
        workers=workers,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
    )
