"""Embed a large corpus in shards, over several processes, resumably; vectors land in ``.npy`` shards.

    torchrun --nproc_per_node 4 -m cea embed CORPUS --model M -o DIR    # or plain `cea embed` for one

Process ``r`` of ``w`` encodes shards ``r, r + w, ...`` of ``shard_size`` texts, each written as
``DIR/shard-NNNNN.npy`` (unit float32) by a temporary file and a rename; a rerun skips the shards that exist.
``DIR/manifest.json`` pins the model, the corpus and the shard size (a rerun with another is refused). No collective:
each process reads ``RANK`` and ``WORLD_SIZE``. :func:`cea.knn.shards.build_index_from_shards` indexes the folder.
sentence-transformers' multi-process pool encodes in memory; a corpus that must survive a kill and never be held
twice in memory needs shards on disk, hence this module.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from ..errors import CeaError
from ..paths import read_json, write_json, write_npy
from .embeddings import model_fingerprint, normalize, text_fingerprint

FORMAT = "cea.shards/1"


def shard_path(folder: Path, index: int) -> Path:
    return folder / f"shard-{index:05d}.npy"


def embed_corpus(texts: list[str], model, output: str | Path, shard_size: int = 10_000, batch_size: int = 64,
                 rank: int | None = None, world: int | None = None, progress: bool = True) -> dict:
    """Encode this process's share of ``texts`` with ``model`` (anything with ``encode``) into shards under
    ``output``; returns this process's rank, world, shard count, shards written and skipped, and seconds."""
    from tqdm.auto import tqdm

    if shard_size < 1:
        raise CeaError(f"--shard-size must be at least 1, got {shard_size}")
    if not texts:
        raise CeaError("the corpus has no texts")
    rank = int(os.environ.get("RANK", "0")) if rank is None else rank  # torchrun's environment, or alone
    world = int(os.environ.get("WORLD_SIZE", "1")) if world is None else world
    output = Path(output)
    manifest = {"format": FORMAT, "n": len(texts), "shard_size": shard_size,
                "shards": (len(texts) + shard_size - 1) // shard_size, "model_fingerprint": model_fingerprint(model),
                "corpus_fingerprint": text_fingerprint(texts), "dim": int(model.get_embedding_dimension())}
    path = output / "manifest.json"
    if path.exists():
        old = read_json(path, FORMAT, "remove the folder and embed again")
        for key in ("format", "n", "shard_size", "model_fingerprint", "corpus_fingerprint", "dim"):
            if old.get(key) != manifest[key]:
                raise CeaError(f"{output} holds shards of another {key.replace('_', ' ')} ({old.get(key)} vs "
                               f"{manifest[key]}); choose another -o or remove it")
    else:
        try:
            write_json(path, manifest)  # several processes may race here: each rename is atomic, the content equal
        except OSError as exc:
            if not path.exists():
                raise CeaError(f"cannot write {path} ({exc})") from None
    started = time.perf_counter()
    written, skipped = [], []
    mine = list(range(rank, manifest["shards"], world))
    for index in tqdm(mine, desc=f"embed (process {rank}/{world})", unit="shard", disable=not progress):
        path = shard_path(output, index)
        if _valid_shard(path, index, manifest):
            skipped.append(index)
            continue
        write_npy(path, normalize(model.encode(texts[index * shard_size:(index + 1) * shard_size],
                                               batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)))
        written.append(index)
    return {"rank": rank, "world": world, "shards": manifest["shards"], "written": written, "skipped": skipped,
            "seconds": round(time.perf_counter() - started, 2)}


def _valid_shard(path: Path, index: int, manifest: dict) -> bool:
    """True when the shard exists, loads and holds its share of the corpus."""
    expected = min(manifest["shard_size"], manifest["n"] - index * manifest["shard_size"])
    try:
        shape = np.load(path, mmap_mode="r", allow_pickle=False).shape
    except (ValueError, OSError):
        return False
    return shape == (expected, manifest["dim"])


def read_manifest(folder: str | Path) -> dict:
    return read_json(Path(folder) / "manifest.json", FORMAT, "run cea embed first")


def missing_shards(folder: str | Path) -> list[int]:
    folder = Path(folder)
    manifest = read_manifest(folder)
    return [i for i in range(manifest["shards"]) if not _valid_shard(shard_path(folder, i), i, manifest)]
