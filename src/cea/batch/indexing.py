"""A FAISS index built from the Parquet parts of :mod:`cea.batch.corpus`, one part in memory at a time.

    cea index DIR --kind ivf       # DIR/index.faiss and DIR/index.json

Parts are read one after another and streamed into the index, so memory holds one part beside the index. Row ``n`` of
the index is the ``n``-th row of the parts in their order (its ``id`` or ``row`` is in the part). FAISS's own streaming
builders target sharded *indexes*; building one index from vector parts in bounded memory is the few lines here.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..errors import CeaError
from ..knn.index import INDEXES, FaissIndex, choose_kind, recall
from ..paths import write_json
from .corpus import missing_parts, part_path, read_manifest, read_vectors


def _parts(folder: Path, manifest: dict):
    return (read_vectors(part_path(folder, i), manifest["dim"]) for i in range(len(manifest["parts"])))


def exact_topk(folder: Path, manifest: dict, queries: np.ndarray, k: int) -> np.ndarray:
    """Row numbers of the exact k nearest corpus vectors of each query, streaming over the parts."""
    best_s = np.full((len(queries), k), -np.inf, np.float32)
    best_i = np.full((len(queries), k), -1, np.int64)
    offset = 0
    for vectors in _parts(folder, manifest):
        scores = queries @ vectors.T
        take = min(k, scores.shape[1])
        top = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        s = np.concatenate([best_s, np.take_along_axis(scores, top, 1)], axis=1)
        i = np.concatenate([best_i, top + offset], axis=1)
        keep = np.argsort(-s, axis=1, kind="stable")[:, :k]
        best_s, best_i = np.take_along_axis(s, keep, 1), np.take_along_axis(i, keep, 1)
        offset += len(vectors)
    return best_i


def build_index_from_parts(
    folder: str | Path,
    kind: str = "ivf",
    params: dict | None = None,
    k: int = 5,
    queries: int = 1000,
    seed: int = 0,
    progress: bool = True,
) -> dict:
    """Write ``folder/index.faiss`` (flat, hnsw or ivf) from every part, and ``index.json``: the build time and the
    recall@k against exact search (streamed over the parts) for ``queries`` corpus vectors. IVF trains on a
    random sample of at most 40 x nlist vectors drawn across the parts first."""
    from tqdm.auto import tqdm

    folder = Path(folder)
    manifest = read_manifest(folder)
    if missing := missing_parts(folder):
        raise CeaError(
            f"{folder} lacks {len(missing)} of {len(manifest['parts'])} parts (first: {missing[0]}); "
            "rerun cea embed with the same arguments to finish them"
        )
    n, dim = manifest["n"], manifest["dim"]
    cls = INDEXES[choose_kind(n, kind)]
    if not issubclass(cls, FaissIndex):
        raise CeaError(f"index kind {kind!r} keeps its vectors in memory; use flat, hnsw or ivf for parts")
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    index = cls(dim, params)
    if index.faiss is None:  # ivf: nlist from the whole corpus, trained on a sample of 40 x nlist
        index.train(_rows(folder, manifest, np.sort(rng.choice(n, size=min(n, 40 * index.nlist(n)), replace=False))), n)
    for part in tqdm(
        _parts(folder, manifest),
        total=len(manifest["parts"]),
        desc=f"index ({kind})",
        unit="part",
        disable=not progress,
    ):
        index.faiss.add(part)  # streamed: one part in memory at a time
    build_seconds = time.perf_counter() - started
    probe_rows = np.sort(rng.choice(n, size=min(queries, n), replace=False))
    q = _rows(folder, manifest, probe_rows)
    measured = recall(exact_topk(folder, manifest, q, min(k, n)), index.faiss.search(q, min(k, n))[1])
    index.save(folder, vectors=False)
    info = {
        "kind": kind,
        "params": index.params,
        "n": n,
        "dim": dim,
        "build_seconds": round(build_seconds, 2),
        "recall_at_k": round(measured, 4),
        "recall_k": k,
        "recall_queries": len(probe_rows),
    }
    write_json(folder / "index.json", info)
    return info


def _rows(folder: Path, manifest: dict, rows: np.ndarray) -> np.ndarray:
    """Corpus vectors at sorted global ``rows``, read part by part."""
    out, start = [], 0
    for part in _parts(folder, manifest):
        local = rows[(rows >= start) & (rows < start + len(part))] - start
        start += len(part)
        if len(local):
            out.append(part[local])
    return np.ascontiguousarray(np.concatenate(out), dtype=np.float32)
