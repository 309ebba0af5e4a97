"""Indexes for large reference sets: exact search or FAISS (flat, HNSW, IVF), with measured recall.

``build_index(vectors, kind="auto")`` returns an index and what it cost: build time and, for the
approximate kinds, recall@k against exact search measured when it is built (on up to 1,000 of the
references as queries). ``auto`` is exact search up to ``EXACT_MAX`` references and HNSW beyond.
Vectors are unit length and scores are cosines (inner products). Indexes are saved in FAISS's own
format (``faiss.write_index``) or as ``.npy``, never pickled.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..errors import CeaError
from .search import normalize, search_torch

KINDS = ("auto", "exact", "flat", "hnsw", "ivf")
# One query by exact fp32 search costs about 1.7 ms per 10,000 references on 2 cores (17 ms at 100k,
# 165 ms at 1M) against 0.3-0.4 ms for HNSW at recall@5 0.97-1.0 (docs/benchmarks.md, section 8):
# exact stays under about 9 ms, the order of encoding the query, up to here.
EXACT_MAX = 50_000


@dataclass
class IndexInfo:
    kind: str
    n: int
    params: dict = field(default_factory=dict)
    build_seconds: float = 0.0
    recall_at_k: float | None = None  # None: exact by construction
    recall_k: int = 5

    def as_dict(self) -> dict:
        return asdict(self)


class VectorIndex:
    """One interface over exact search and the FAISS indexes: ``add``, ``search``, ``save``."""

    def __init__(self, kind: str, dim: int, params: dict | None = None):
        if kind not in KINDS[1:]:
            raise CeaError(f"unknown index {kind!r}; use one of {', '.join(KINDS)}")
        self.kind, self.dim, self.params = kind, dim, dict(params or {})
        self.vectors = np.zeros((0, dim), np.float32)  # kept for exact search and rebuilds
        self.faiss = None if kind == "exact" else self._make()

    def _make(self):
        import faiss

        if self.kind == "flat":
            return faiss.IndexFlatIP(self.dim)
        if self.kind == "hnsw":
            index = faiss.IndexHNSWFlat(self.dim, self.params.setdefault("m", 32), faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self.params.setdefault("ef_construction", 80)
            index.hnsw.efSearch = self.params.setdefault("ef_search", 64)
            return index
        quantizer = faiss.IndexFlatIP(self.dim)
        index = faiss.IndexIVFFlat(quantizer, self.dim, self.params.setdefault("nlist", 1024), faiss.METRIC_INNER_PRODUCT)
        index.nprobe = self.params.setdefault("nprobe", 16)
        return index

    def __len__(self) -> int:
        return len(self.vectors)

    def add(self, vectors) -> None:
        vectors = normalize(vectors)
        if vectors.shape[1] != self.dim:
            raise CeaError(f"vectors have {vectors.shape[1]} dimensions but the index {self.dim}")
        if self.faiss is not None:
            if self.kind == "ivf" and not self.faiss.is_trained:
                nlist = self.faiss.nlist
                if len(vectors) < nlist:
                    raise CeaError(f"an IVF index with {nlist} lists needs at least {nlist} vectors to train; "
                                   f"got {len(vectors)}: use --index hnsw or exact")
                self.faiss.train(vectors)
            self.faiss.add(vectors)
        self.vectors = np.concatenate([self.vectors, vectors]) if len(self.vectors) else vectors

    def search(self, queries, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Cosines and row numbers of the ``k`` nearest references (row -1 where fewer were found)."""
        queries = normalize(queries)
        k = min(k, len(self))
        if k == 0:
            raise CeaError("the index is empty")
        if self.faiss is None:
            return search_torch(self.vectors, queries, k)
        return self.faiss.search(queries, k)

    def save(self, folder: str | Path) -> None:
        from ..paths import atomic_path

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if self.faiss is not None:
            import faiss

            with atomic_path(folder / "index.faiss") as tmp:
                faiss.write_index(self.faiss, str(tmp))
        with atomic_path(folder / "vectors.npy") as tmp:
            with open(tmp, "wb") as fh:
                np.save(fh, self.vectors, allow_pickle=False)

    @classmethod
    def load(cls, folder: str | Path, kind: str, params: dict | None = None, vectors=None) -> VectorIndex:
        """Read what :meth:`save` wrote; ``vectors`` given: they are the references (no vectors.npy read)."""
        folder = Path(folder)
        if vectors is None:
            vectors = np.load(folder / "vectors.npy", allow_pickle=False)
        index = cls(kind, vectors.shape[1], params)
        index.vectors = vectors
        if kind != "exact":
            import faiss

            index.faiss = faiss.read_index(str(folder / "index.faiss"))
            if kind == "hnsw":
                index.faiss.hnsw.efSearch = index.params.get("ef_search", 64)
            elif kind == "ivf":
                index.faiss.nprobe = index.params.get("nprobe", 16)
        return index


def choose_kind(n: int, kind: str = "auto") -> str:
    if kind not in KINDS:
        raise CeaError(f"unknown index {kind!r}; use one of {', '.join(KINDS)}")
    return ("exact" if n <= EXACT_MAX else "hnsw") if kind == "auto" else kind


def recall_at_k(index: VectorIndex, k: int = 5, queries: int = 1000, seed: int = 0) -> float:
    """Share of the exact top-k found by ``index`` for up to ``queries`` references used as queries."""
    n = len(index)
    rows = np.random.default_rng(seed).choice(n, size=min(queries, n), replace=False)
    q = index.vectors[rows]
    k = min(k, n)
    _, truth = search_torch(index.vectors, q, k)
    _, found = index.search(q, k)
    return float(np.mean([len(set(t) & set(f)) / k for t, f in zip(truth.tolist(), found.tolist())]))


def build_index(vectors, kind: str = "auto", params: dict | None = None, k: int = 5) -> tuple[VectorIndex, IndexInfo]:
    """Build an index over ``vectors``; approximate kinds get their recall@k measured."""
    vectors = normalize(vectors)
    kind = choose_kind(len(vectors), kind)
    t0 = time.perf_counter()
    index = VectorIndex(kind, vectors.shape[1], params)
    index.add(vectors)
    info = IndexInfo(kind, len(vectors), index.params, round(time.perf_counter() - t0, 3), recall_k=k)
    if kind in ("hnsw", "ivf"):
        info.recall_at_k = round(recall_at_k(index, k), 4)
    return index, info
