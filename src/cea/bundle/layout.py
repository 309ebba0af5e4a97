"""How a bundle sits on disk (:mod:`cea.bundle.bundle` is the behaviour): its format name, checksums, fsync'd
generations, log lines.

Layout (no pickle anywhere: JSON, .npy read with ``allow_pickle=False``, safetensors, FAISS's own index format)::

    BUNDLE/manifest.json       format, generation, versions, fingerprints, index settings, store, checksums
    BUNDLE/encoder/            a sentence-transformers folder
    BUNDLE/gen-N/embeddings.npy  unit-length float32 reference embeddings
    BUNDLE/gen-N/index.faiss   the FAISS index (flat, hnsw, ivf; none for exact search)
    BUNDLE/gen-N/ids.npy       int64 example ids
    BUNDLE/gen-N/examples.json labels and texts, in the order of the embeddings (and the sources of those added
                               for an annotation: cea.service.ml_backend)
    BUNDLE/gen-N/head.npz      the linear head's weights (classifier "linear"; plain arrays, no pickle)
    BUNDLE/wal.jsonl           changes since generation N (add, remove, relabel), one JSON line each
    BUNDLE/unknowns.jsonl      texts answered unknown, kept where a service was asked to (cea serve --keep-unknowns)

The ``gen-N`` folders and the log are the folder store's (:class:`cea.bundle.references.FolderStore`); a bundle made
with a PostgreSQL store keeps its examples in a table instead (:mod:`cea.bundle.postgres`) and the folder holds the
encoder and the manifest only.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

import numpy as np

from ..paths import read_json, sha256_file as sha256

FORMAT = "cea.bundle/1"
FORMAT_VERSION = 1
WAL = "wal.jsonl"  # the write-ahead log beside the generations
# the bundle's first encoder's folder: kept through renewals, as every background fit starts from it
# (cea.service.fine_tuning); a renewal's own are encoder-N
FIRST_ENCODER = "encoder"


def read_manifest(root: Path) -> dict:
    """The bundle's ``manifest.json``, its format checked."""
    return read_json(
        root / "manifest.json",
        FORMAT,
        "a newer cea.bundle format needs a newer cea (upgrade it); anything else: rebuild or restore the bundle",
    )


def retired_encoder(manifest: dict) -> str | None:
    """The encoder folder a renewal deletes: the one in use, unless it is the bundle's first (:data:`FIRST_ENCODER`,
    kept for the background fits to start from)."""
    used = manifest.get("encoder", FIRST_ENCODER)
    return None if used == FIRST_ENCODER else used


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def checksums(root: Path, folders: list[str]) -> dict[str, str]:
    return {
        str(p.relative_to(root)): sha256(p)
        for folder in folders
        for p in sorted((root / folder).rglob("*"))
        if p.is_file()
    }


def write_generation(folder: Path, embeddings, ids, labels, texts, index, head=None, sources=None) -> None:
    """Generation files of these rows; ``sources``: where each example came from (an annotation's key, None: added
    as itself), kept in examples.json where any has one."""
    folder.mkdir(parents=True, exist_ok=True)
    index.save(folder, vectors=False)  # its own files (index.faiss); embeddings.npy holds the vectors
    if head is not None:
        head.save(folder)  # fsync'd; the folder is fsync'd below
    for name, array in (
        ("embeddings.npy", np.ascontiguousarray(embeddings, dtype=np.float32)),
        ("ids.npy", np.asarray(ids, dtype=np.int64)),
    ):
        with open(folder / name, "wb") as fh:
            np.save(fh, array, allow_pickle=False)
            fh.flush()
            os.fsync(fh.fileno())
    with open(folder / "examples.json", "w") as fh:
        json.dump(
            {
                "labels": list(labels),
                "texts": list(texts),
                **({"sources": list(sources)} if sources is not None and any(sources) else {}),
            },
            fh,
        )
        fh.flush()
        os.fsync(fh.fileno())
    fsync_dir(folder)


def decode_line(line: bytes) -> dict | None:
    try:
        crc, body = line.decode().split(" ", 1)
        return json.loads(body) if int(crc, 16) == zlib.crc32(body.encode()) else None
    except ValueError:  # UnicodeDecodeError and json's JSONDecodeError are ValueErrors
        return None


def encode_line(record: dict) -> bytes:
    """One log line: the CRC32 of the JSON body, a space, the body, a newline."""
    body = json.dumps(record, separators=(",", ":"), sort_keys=True)
    return f"{zlib.crc32(body.encode()):08x} {body}\n".encode()


def cut_torn_line(path: Path) -> None:
    """A last line torn by a crash was never acknowledged: cut it off the log, so that appends start clean (read
    from the end, a block at a time; the intact lines are read by whoever follows the log)."""
    if not path.exists():
        return
    with open(path, "r+b") as fh:
        end = pos = fh.seek(0, os.SEEK_END)
        keep = 0
        while pos > 0:
            step = min(pos, 1 << 16)
            fh.seek(pos - step)
            newline = fh.read(step).rfind(b"\n")
            if newline >= 0:
                keep = pos - step + newline + 1
                break
            pos -= step
        if keep < end:
            fh.truncate(keep)
            os.fsync(fh.fileno())


def append_record(fh, record: dict) -> None:
    """Append one record to an open log file and fsync it: durable when this returns."""
    fh.write(encode_line(record))
    fh.flush()
    os.fsync(fh.fileno())
