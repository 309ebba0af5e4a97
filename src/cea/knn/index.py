"""One index layer: the kinds of vector index in one registry, :data:`INDEXES`, with one interface.

A kind is a :class:`VectorIndex` over unit vectors registered by ``@register(name)``: ``exact`` (fp32), ``int8``
(certified exact, :mod:`cea.knn.search`) and the FAISS ``flat``, ``hnsw`` and ``ivf``. Removed rows are tombstones.
Saved as ``.npy`` and FAISS's ``index.faiss``, never pickled. Rows live in buffers that grow by half when full
(:func:`grow`), so adding rows costs in proportion to the rows added.
"""

from __future__ import annotations

import abc
import math
import time
from pathlib import Path

import numpy as np
import torch

from ..errors import CeaError
from ..paths import atomic_path, write_npy
from .search import code_levels, int8_available, int8_session, search_int8, search_torch

# auto's kinds (docs/decisions.md#index): exact up to EXACT_MAX references, where one query's search stays about as
# fast as encoding it; the certified int8 kind from INT8_FROM, where it beats fp32; HNSW beyond
EXACT_MAX = 50_000
INT8_FROM = 8_000
# rows added to an int8 index are searched in fp32 until they pass this share of the coded rows (or TAIL_MIN)
TAIL_SHARE, TAIL_MIN = 1 / 16, 256
INDEXES: dict[str, type[VectorIndex]] = {}


def register(name: str):
    def add(cls):
        cls.kind, INDEXES[name] = name, cls
        return cls

    return add


def _unit(x, dim: int, what: str) -> np.ndarray:
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    if x.ndim != 2 or x.shape[1] != dim:
        raise CeaError(
            f"{what} have shape {x.shape} but the index holds vectors of {dim} dimensions; pass an (n, {dim}) array"
        )
    norms = np.linalg.norm(x[:1024], axis=1)  # a sample: constant cost, catches raw embeddings
    if np.any((np.abs(norms - 1) > 1e-3) & (norms > 0)):
        raise CeaError(f"{what} are not unit length; normalise them first (cea.knn.normalize)")
    return x


def grow(buffer: np.ndarray, used: int, rows: np.ndarray) -> np.ndarray:
    """``rows`` written after the first ``used`` rows of ``buffer``; a buffer too small is replaced by one half as
    large again as needed (amortised constant cost per row). Returns the buffer that holds them."""
    need = used + len(rows)
    if need > len(buffer):
        bigger = np.empty((max(need, len(buffer) + len(buffer) // 2, 16),) + buffer.shape[1:], dtype=buffer.dtype)
        bigger[:used] = buffer[:used]
        buffer = bigger
    buffer[used:need] = rows
    return buffer


class VectorIndex(abc.ABC):
    """Rows are numbered in the order they were added; ``vectors`` keeps them all (recall, rebuilds)."""

    kind, defaults, approximate = "", {}, False  # approximate: build_index measures its recall

    def __init__(self, dim: int, params: dict | None = None):
        self.dim, self.params = dim, {**self.defaults, **(params or {})}
        self._rows(np.zeros((0, dim), np.float32))

    def _rows(self, vectors: np.ndarray) -> None:
        """Hold exactly ``vectors``, every one live."""
        self._vectors, self._alive, self._n = vectors, np.ones(len(vectors), dtype=bool), len(vectors)
        self._live = self._n

    vectors = property(lambda self: self._vectors[: self._n], doc="every row, removed ones included (a view)")
    alive = property(lambda self: self._alive[: self._n], doc="False for removed rows (a view)")

    def __len__(self) -> int:
        return self._live  # removed rows left out

    def add(self, vectors) -> None:
        vectors = _unit(vectors, self.dim, "vectors")
        self._vectors = grow(self._vectors, self._n, vectors)
        self._alive = grow(self._alive, self._n, np.ones(len(vectors), dtype=bool))
        self._n += len(vectors)
        self._live += len(vectors)
        self._add(vectors)

    def _add(self, vectors: np.ndarray) -> None:
        """What a kind keeps beside ``self.vectors`` (exact search keeps nothing more)."""

    def remove(self, rows) -> None:
        """Tombstones: ``rows`` are never returned again (compact by building anew)."""
        rows = np.unique(np.asarray(rows, dtype=np.int64))
        self._live -= int(self.alive[rows].sum())
        self.alive[rows] = False

    def search(self, queries, k: int, exclude_self: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Cosines and rows of the ``k`` nearest live vectors, nearest first (row -1 where fewer exist);
        ``exclude_self``: query i is row i, left out of its own neighbours (leave-one-out)."""
        queries = _unit(queries, self.dim, "queries")
        if exclude_self and len(queries) != len(self.vectors):
            raise CeaError(f"exclude_self needs the {len(self.vectors)} indexed vectors as queries; got {len(queries)}")
        removed = len(self.vectors) - len(self)
        wanted = min(k + removed, len(self.vectors) - int(exclude_self))
        if wanted < 1 or k < 1:
            raise CeaError(f"cannot search for k = {k} neighbours among {len(self)} vectors; add vectors first")
        sims, rows = self._search(queries, wanted, exclude_self)
        if removed:  # live rows first, in order; the rest becomes -1
            live = (rows >= 0) & self.alive[rows]
            order = np.argsort(~live, axis=1, kind="stable")
            sims, rows, live = (np.take_along_axis(a, order, 1) for a in (sims, rows, live))
            sims[~live], rows[~live] = -np.inf, -1
        if rows.shape[1] >= k:  # nothing to pad (np.pad's own cost is a tenth of a small search)
            return sims[:, :k], rows[:, :k]
        pad = ((0, 0), (0, k - rows.shape[1]))
        return np.pad(sims, pad, constant_values=-np.inf)[:, :k], np.pad(rows, pad, constant_values=-1)[:, :k]

    @abc.abstractmethod
    def _search(self, queries: np.ndarray, k: int, exclude_self: bool) -> tuple[np.ndarray, np.ndarray]:
        """Cosines and rows of the ``k`` nearest of all rows, removed ones included (``search`` filters)."""

    def save(self, folder: str | Path, vectors: bool = True) -> None:
        """``vectors.npy`` (unless the caller keeps the vectors), ``removed.npy`` if any, the kind's files."""
        files = {"vectors.npy": self.vectors} if vectors else {}
        if not self.alive.all():
            files["removed.npy"] = np.flatnonzero(~self.alive)
        for name, array in files.items():
            write_npy(Path(folder) / name, array)

    @classmethod
    def load(cls, folder: str | Path, params: dict | None = None, vectors=None) -> VectorIndex:
        """Read what :meth:`save` wrote; ``vectors`` given: they are the rows (no vectors.npy read)."""
        folder = Path(folder)
        vectors = np.load(folder / "vectors.npy", allow_pickle=False) if vectors is None else vectors
        index = cls(vectors.shape[1], params)
        index._rows(vectors)
        if (folder / "removed.npy").exists():
            index.remove(np.load(folder / "removed.npy", allow_pickle=False))
        index._read(folder)
        return index

    def _read(self, folder: Path) -> None:
        """Restore what the kind keeps beside the rows: by default rebuilt from them (FAISS reads its file)."""
        self._add(self.vectors)


@register("exact")
class ExactIndex(VectorIndex):
    def _search(self, queries, k, exclude_self):
        return search_torch(self.vectors, queries, k, self_match=exclude_self)


@register("int8")
class Int8Index(VectorIndex):
    """Quantised references for :func:`~cea.knn.search.search_int8`, quantised anew as rows are added;
    ``n_fallback`` counts the queries it could not certify and searched again in fp32."""

    # n: the rows quantised; rows after them are the tail. block: references per block maximum (8 queries over 13k
    # rows of 256: 0.44 ms at 32, 0.52 at 64 and 0.48 at 8; a throwaway timing)
    n_fallback, block, n = 0, 32, 0

    def _add(self, vectors):
        if self.n and len(self.vectors) - self.n <= max(TAIL_MIN, TAIL_SHARE * self.n):
            return  # the tail: searched in fp32 until the next quantisation
        self._quantise()

    def _quantise(self) -> None:
        """Code every row (the scale from the largest component of all)."""
        self.n, self.pad = len(self.vectors), (-self.dim) % 8
        t = torch.from_numpy(self.vectors)
        self.scale = code_levels() / max(float(t.abs().max()), 1e-12)
        # rows padded to whole blocks, columns to a multiple of 8; padding scores are masked later
        codes = torch.zeros(self.n + (-self.n) % self.block, self.dim + self.pad, dtype=torch.int8)
        self.residual = 0.0
        for start in range(0, self.n, 8192):  # in slices that stay in cache
            scaled = t[start : start + 8192] * self.scale
            q = torch.round(scaled)
            self.residual = max(self.residual, float((scaled - q).norm(dim=1).max()) / self.scale)
            codes[start : start + len(q), : self.dim] = q.to(torch.int8)
        self.codes = codes.numpy()
        self._codes_t = codes.T.contiguous().numpy()  # owned here, read by the session
        self._session = int8_session(self._codes_t, self.block)

    def scores(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """int32 dot products of int8 query ``codes`` with every reference, and their block maxima."""
        if self._session is not None:
            return self._session.run(None, {"A": (codes.astype(np.int16) + 128).astype(np.uint8)})
        scores = torch._int_mm(torch.from_numpy(codes), torch.from_numpy(self.codes).T).numpy()
        return scores, scores.reshape(len(codes), -1, self.block).max(-1)

    def _search(self, queries, k, exclude_self):
        if exclude_self and self.n < len(self.vectors):
            self._quantise()  # leave-one-out: query i is row i, every row coded
        tail = len(self.vectors) - self.n
        sims, rows, fallback = search_int8(self, queries, min(k, self.n - int(exclude_self)), self_match=exclude_self)
        self.n_fallback += fallback
        if tail:  # the rows added since the quantisation, exactly; both parts exact, so their best k are
            more, at = search_torch(self.vectors[self.n :], queries, min(k, tail))
            sims, rows = np.concatenate([sims, more], 1), np.concatenate([rows, at + self.n], 1)
            order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
            sims, rows = np.take_along_axis(sims, order, 1), np.take_along_axis(rows, order, 1)
        return sims, rows


@register("flat")
class FaissIndex(VectorIndex):
    """FAISS exhaustive search, and the base of the FAISS kinds: ``self.faiss`` is made by ``_make``
    (None: by ``train`` on the first vectors) and ``_tune`` sets its search parameters."""

    def __init__(self, dim: int, params: dict | None = None):
        super().__init__(dim, params)
        self.faiss = self._make()
        if self.faiss is not None:
            self._tune()

    def _make(self):
        import faiss

        return faiss.IndexFlatIP(self.dim)

    def _tune(self) -> None:
        """Set the search parameters of ``self.faiss`` from ``self.params`` (flat search has none)."""

    def _add(self, vectors):
        if self.faiss is None:
            self.train(vectors)
        self.faiss.add(vectors)

    def _search(self, queries, k, exclude_self):
        sims, rows = self.faiss.search(queries, k + int(exclude_self))
        if not exclude_self:
            return sims, rows
        own = rows == np.arange(len(queries))[:, None]
        own[~own.any(1), -1] = True  # self not found (duplicates, approximate search): drop the last
        return sims[~own].reshape(len(queries), k), rows[~own].reshape(len(queries), k)

    def save(self, folder: str | Path, vectors: bool = True) -> None:
        import faiss

        super().save(folder, vectors)
        with atomic_path(Path(folder) / "index.faiss") as tmp:
            faiss.write_index(self.faiss, str(tmp))

    def _read(self, folder):
        import faiss

        self.faiss = faiss.read_index(str(folder / "index.faiss"))
        self._tune()


@register("hnsw")
class HNSWIndex(FaissIndex):
    defaults, approximate = {"m": 32, "ef_construction": 80, "ef_search": 64}, True

    def _make(self):
        import faiss

        index = faiss.IndexHNSWFlat(self.dim, self.params["m"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.params["ef_construction"]
        return index

    def _tune(self):
        self.faiss.hnsw.efSearch = self.params["ef_search"]


@register("ivf")
class IVFIndex(FaissIndex):
    defaults, approximate = {"nprobe": 16}, True

    def _make(self):
        return None  # made by train(): nlist follows from the number of vectors

    def nlist(self, n: int) -> int:
        """Lists for an index of ``n`` vectors: 4 x sqrt(n) (at most 65,536) unless given."""
        return self.params.setdefault("nlist", max(1, min(65536, int(4 * math.sqrt(n)))))

    def train(self, vectors: np.ndarray, n: int | None = None) -> None:
        """Train the coarse quantiser on ``vectors`` for an index of ``n`` vectors (default: as many)."""
        import faiss

        nlist = self.nlist(n or len(vectors))
        if len(vectors) < nlist:
            raise CeaError(
                f"an IVF index with {nlist} lists needs at least {nlist} vectors to train; "
                f"got {len(vectors)}: lower nlist or use hnsw or exact"
            )
        self.quantizer = faiss.IndexFlatIP(self.dim)  # kept referenced: the IVF index does not own it
        self.faiss = faiss.IndexIVFFlat(self.quantizer, self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
        self.faiss.train(vectors)
        self._tune()

    def _tune(self):
        self.faiss.nprobe = self.params["nprobe"]


def choose_kind(n: int, kind: str = "auto") -> str:
    if kind == "auto":
        return "hnsw" if n > EXACT_MAX else "int8" if n >= INT8_FROM and int8_available() else "exact"
    if kind not in INDEXES:
        raise CeaError(f"unknown index kind {kind!r}; use auto or one of {', '.join(INDEXES)}")
    return kind


def recall(truth: np.ndarray, found: np.ndarray) -> float:
    """Mean share of each row of ``truth`` (exact neighbour rows) found in the same row of ``found``."""
    return float(np.mean([len(set(t) & set(f)) / len(t) for t, f in zip(truth.tolist(), found.tolist())]))


def recall_at_k(index: VectorIndex, k: int = 5, queries: int = 1000, seed: int = 0) -> float:
    """Share of the exact top-k found by ``index`` for up to ``queries`` of its vectors as queries."""
    n = len(index.vectors)
    q = index.vectors[np.random.default_rng(seed).choice(n, size=min(queries, n), replace=False)]
    return recall(search_torch(index.vectors, q, min(k, n))[1], index.search(q, min(k, n))[1])


def build_index(vectors, kind: str = "auto", params: dict | None = None, k: int | None = 5) -> tuple[VectorIndex, dict]:
    """An index of ``kind`` over unit ``vectors`` (a 2-d array; no rows: an empty index), and what it cost: build
    seconds and, for approximate kinds, recall@k (None: exact by construction, or ``k=None``: not measured)."""
    kind = choose_kind(len(vectors), kind)
    t0 = time.perf_counter()
    index = INDEXES[kind](np.shape(vectors)[1], params)
    if len(vectors):
        index.add(vectors)
    seconds = round(time.perf_counter() - t0, 3)
    measured = round(recall_at_k(index, k), 4) if index.approximate and k is not None else None
    return index, {
        "kind": kind,
        "n": len(index),
        "params": index.params,
        "build_seconds": seconds,
        "recall_at_k": measured,
        "recall_k": k,
    }


def load_index(folder: str | Path, info: dict, vectors=None) -> VectorIndex:
    """What :meth:`VectorIndex.save` wrote to ``folder``, of the kind and params in ``info``."""
    return INDEXES[choose_kind(0, info.get("kind", "exact"))].load(folder, info.get("params"), vectors)
