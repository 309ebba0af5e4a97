"""Embed a large corpus into Parquet parts, resumably, in this process or on Ray actors; ``cea index`` builds a FAISS
index from the parts.

    cea embed CORPUS --model M -o DIR                           # this process
    cea embed CORPUS --model M -o DIR --engine ray [--address]  # a pool of Ray actors, each loading M once

The corpus is cut into numbered parts (:mod:`cea.batch.parts`); part ``i`` is written as ``DIR/part-NNNNN.parquet``
(the input's ``id`` or ``row`` and ``embedding``, unit float32) by a temporary file and a rename, so a rerun writes
only the parts missing. ``DIR/manifest.json`` pins the model, the input and the part size (a rerun with another is
refused). :func:`cea.batch.indexing.build_index_from_parts` indexes the folder, its rows in the parts' order.
sentence-transformers' multi-process pool encodes in memory; a corpus that must survive a kill and never be held
whole needs parts on disk, hence this module.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..encoders.build import load_encoder
from ..encoders.embeddings import encode, model_fingerprint, text_fingerprint
from ..errors import CeaError
from ..knn.search import normalize
from ..paths import atomic_path, read_json, write_json
from .engines import run_parts, spent
from .parts import PART_ROWS, Part, plan_parts, read_part

FORMAT = "cea.embeddings/1"


def part_path(folder: Path, index: int) -> Path:
    return Path(folder) / f"part-{index:05d}.parquet"


def read_vectors(path: Path, dim: int) -> np.ndarray:
    """A part's embeddings as an (n, dim) float32 array."""
    import pyarrow.parquet as pq

    column = pq.read_table(path, columns=["embedding"]).column(0).combine_chunks()
    return np.ascontiguousarray(column.flatten().to_numpy(zero_copy_only=False).reshape(-1, dim), dtype=np.float32)


class PartEmbedder:
    """The encoder ``model`` (a name, or one loaded) made once; each part given (:meth:`__call__`) encoded into
    ``folder/part-NNNNN.parquet``. A worker of :func:`cea.batch.engines.run_parts`."""

    def __init__(
        self,
        model,
        folder: str,
        text_column: str = "text",
        batch_size: int = 64,
        device: str | None = None,
        precision: str = "fp32",
    ):
        self.encoder = load_encoder(model, device=device, precision=precision) if isinstance(model, str) else model
        self.folder, self.text_column, self.batch_size = Path(folder), text_column, batch_size

    def __call__(self, part: dict) -> dict:
        import pyarrow as pa
        import pyarrow.parquet as pq

        part, clock = Part(**part), [time.perf_counter()]
        frame = read_part(part, self.text_column)
        clock.append(time.perf_counter())
        vectors = normalize(encode(self.encoder, frame["text"].tolist(), batch_size=self.batch_size))
        clock.append(time.perf_counter())
        key = "id" if "id" in frame.columns else "row"
        table = pa.table(
            {
                key: frame[key].to_numpy(),
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1]),
            }
        )
        with atomic_path(part_path(self.folder, part.index)) as tmp:
            pq.write_table(table, tmp)
        clock.append(time.perf_counter())
        return {"part": part.index, "rows": len(frame), **spent(clock)}


def embed_corpus(
    corpus: str | list[str],
    model,
    output: str | Path,
    part_rows: int = PART_ROWS,
    batch_size: int = 64,
    text_column: str = "text",
    engine: str = "local",
    address: str | None = None,
    actors: int | None = None,
    device: str | None = None,
    precision: str = "fp32",
    say=None,
) -> dict:
    """Encode the parts of ``corpus`` (a file, folder or glob; or texts) that ``output`` lacks with ``model`` (a
    name; a loaded encoder on the local engine) on ``engine``; returns the parts in all, those written (with the node
    that wrote each) and skipped, the rows, and seconds. ``say(result)``: told after each part."""
    output = Path(output)
    parts = plan_parts(corpus, part_rows)
    encoder = load_encoder(model, device=device, precision=precision) if isinstance(model, str) else model
    inputs = (
        corpus
        if isinstance(corpus, list)
        else [f"{Path(f).name}:{Path(f).stat().st_size}" for f in sorted({p.file for p in parts})]
    )
    manifest = {
        "format": FORMAT,
        "n": sum(p.rows for p in parts),
        "part_rows": part_rows,
        "parts": [p.rows for p in parts],
        "model_fingerprint": model_fingerprint(encoder),
        "corpus_fingerprint": text_fingerprint(inputs),
        "dim": int(encoder.get_embedding_dimension()),
    }
    path = output / "manifest.json"
    if path.exists():
        old = read_json(path, FORMAT, "remove the folder and embed again")
        for key in ("n", "part_rows", "model_fingerprint", "corpus_fingerprint", "dim"):
            if old.get(key) != manifest[key]:
                raise CeaError(
                    f"{output} holds parts of another {key.replace('_', ' ')} ({old.get(key)} vs "
                    f"{manifest[key]}); choose another -o or remove it"
                )
    else:
        write_json(path, manifest)
    started = time.perf_counter()
    todo = [p for p in parts if not _valid_part(output, p.index, p.rows)]
    options = {
        "model": encoder if engine == "local" else model,
        "folder": str(output),
        "text_column": text_column,
        "batch_size": batch_size,
        "device": device,
        "precision": precision,
    }
    done = (
        run_parts(
            PartEmbedder, options, todo, engine, address, actors, gpus=str(device or "").startswith("cuda"), say=say
        )
        if todo
        else []
    )
    return {
        "parts": len(parts),
        "written": done,
        "skipped": len(parts) - len(todo),
        "rows": manifest["n"],
        "seconds": round(time.perf_counter() - started, 2),
    }


def _valid_part(folder: Path, index: int, rows: int) -> bool:
    """True when the part exists, reads and holds its rows (written whole: by a rename)."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(part_path(folder, index)).metadata.num_rows == rows
    except Exception:  # noqa: BLE001 (pyarrow raises kinds of its own on a missing or damaged file)
        return False


def read_manifest(folder: str | Path) -> dict:
    return read_json(Path(folder) / "manifest.json", FORMAT, "run cea embed first")


def missing_parts(folder: str | Path) -> list[int]:
    return [i for i, rows in enumerate(read_manifest(folder)["parts"]) if not _valid_part(folder, i, rows)]
