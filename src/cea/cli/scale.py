"""``cea embed`` and ``cea index``: very large reference sets, embedded in shards and indexed from them."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from ..data import load_dataset
from ..defaults import DEFAULT_MODEL
from ..encoders import load_encoder
from . import DEVICE, PRECISION, app

out = Console(stderr=True)


def corpus_texts(corpus: str, text_column: str = "text") -> list[str]:
    """Every text of a data set (its splits in order) or of a local file."""
    ds = load_dataset(corpus, text_column=text_column)
    texts = []
    for split in ds.splits.values():
        texts += [str(t) for t in split["text"]]
        if ds.task == "similarity" and "text2" in split:
            texts += [str(t) for t in split["text2"]]
    return texts


@app.command()
def embed(
    corpus: str = typer.Argument(..., help="a data set name or a local file (.txt: one text per line)"),
    model: str = typer.Option(DEFAULT_MODEL, help="catalog name, hub id or local folder"),
    output: Path = typer.Option(..., "-o", "--output", help="folder of .npy shards (reruns resume it)"),
    shard_size: int = typer.Option(10_000, help="texts per shard"),
    batch_size: int = typer.Option(64),
    text_column: str = typer.Option("text"),
    device: str = DEVICE, precision: str = PRECISION,
) -> None:
    """Embed a corpus into .npy shards; under torchrun each process takes every n-th shard."""
    from ..encoders.corpus import embed_corpus, missing_shards

    texts = corpus_texts(corpus, text_column)
    encoder = load_encoder(model, device=device, precision=precision)
    done = embed_corpus(texts, encoder, output, shard_size=shard_size, batch_size=batch_size)
    left = missing_shards(output)
    out.print(f"process {done['rank']} of {done['world']}: {len(done['written'])} shards written, "
              f"{len(done['skipped'])} already there, {done['seconds']:.0f} s; "
              + (f"{len(left)} of {done['shards']} shards still missing" if left
                 else f"all {done['shards']} shards of {len(texts)} texts are in {output}"))


@app.command()
def index(
    folder: Path = typer.Argument(..., help="a folder written by cea embed"),
    kind: str = typer.Option("ivf", help="flat, hnsw or ivf"),
    nlist: int = typer.Option(None, help="IVF lists (default 4 x sqrt(n))"),
    nprobe: int = typer.Option(16, help="IVF lists searched per query"),
    m: int = typer.Option(32, help="HNSW links per node"),
) -> None:
    """Build DIR/index.faiss from the shards, one shard in memory at a time; recall@5 is measured."""
    from ..knn.shards import build_index_from_shards

    params = {"nprobe": nprobe, **({"nlist": nlist} if nlist else {})} if kind == "ivf" else {"m": m} if kind == "hnsw" else {}
    info = build_index_from_shards(folder, kind, params)
    out.print(f"{folder}/index.faiss: {info['kind']} over {info['n']} vectors in {info['build_seconds']:.1f} s, "
              f"recall@{info['recall_k']} {info['recall_at_k']:.3f} against exact search")
