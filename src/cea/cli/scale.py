"""``cea embed`` and ``cea index``: very large reference sets, embedded in parts and indexed from them."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from ..defaults import DEFAULT_MODEL
from . import ACTORS, ADDRESS, DEVICE, ENGINE, PRECISION, app

out = Console(stderr=True, soft_wrap=True)  # a line a message, in a log too


def corpus_texts(corpus: str, text_column: str = "text") -> list[str]:
    """Every text of a data set (its splits in order) or of a local file."""
    from ..data import load_dataset

    ds = load_dataset(corpus, text_column=text_column)
    columns = ("text", "text2") if ds.task == "similarity" else ("text",)  # a split's texts, and its pairs' second ones
    return [str(t) for split in ds.splits.values() for c in columns if c == "text" or c in split for t in split[c]]


@app.command()
def embed(
    corpus: str = typer.Argument(
        ..., help="a .txt, .jsonl, .csv or .parquet file, a folder or a glob of them, or a data set name"
    ),
    model: str = typer.Option(DEFAULT_MODEL, help="catalog name, hub id or local folder"),
    output: Path = typer.Option(..., "-o", "--output", help="folder of Parquet parts (reruns write the missing ones)"),
    part_rows: int = typer.Option(2_000, help="texts per part"),
    batch_size: int = typer.Option(64),
    text_column: str = typer.Option("text"),
    engine: str = ENGINE,
    address: str = ADDRESS,
    actors: int = ACTORS,
    device: str = DEVICE,
    precision: str = PRECISION,
) -> None:
    """Embed a corpus into Parquet parts (id or row, embedding), here or on Ray actors; cea index builds an index."""
    import sys

    from ..batch.corpus import embed_corpus
    from ..batch.engines import shares_said

    source = corpus if Path(corpus).exists() or any(c in corpus for c in "*?[") else corpus_texts(corpus, text_column)
    done = embed_corpus(
        source,
        model,
        output,
        part_rows,
        batch_size,
        text_column,
        engine,
        address,
        actors,
        device,
        precision,
        say=lambda r: print(f"part {r['part']} embedded ({r['rows']} texts)", file=sys.stderr, flush=True),
    )
    out.print(
        f"{len(done['written'])} parts written, {done['skipped']} already there, {done['seconds']:.0f} s: all "
        f"{done['parts']} parts of {done['rows']} texts are in {output}" + shares_said(done["written"])
    )


@app.command()
def index(
    folder: Path = typer.Argument(..., help="a folder written by cea embed"),
    kind: str = typer.Option("ivf", help="flat, hnsw or ivf"),
    nlist: int = typer.Option(None, help="IVF lists (default 4 x sqrt(n))"),
    nprobe: int = typer.Option(16, help="IVF lists searched per query"),
    m: int = typer.Option(32, help="HNSW links per node"),
) -> None:
    """Build DIR/index.faiss from cea embed's parts, one part in memory at a time; recall@5 is measured."""
    from ..batch.indexing import build_index_from_parts

    params = (
        {"nprobe": nprobe, **({"nlist": nlist} if nlist else {})}
        if kind == "ivf"
        else {"m": m}
        if kind == "hnsw"
        else {}
    )
    info = build_index_from_parts(folder, kind, params)
    out.print(
        f"{folder}/index.faiss: {info['kind']} over {info['n']} vectors in {info['build_seconds']:.1f} s, "
        f"recall@{info['recall_k']} {info['recall_at_k']:.3f} against exact search"
    )
