"""Top-k retrieval (seed 004): index the references, query with the test split.

Top-k accuracy is the share of queries whose gold label is among the labels of their k nearest
references; MRR is the mean of 1 / rank of the first reference carrying the gold label, counted
within the first ``depth`` neighbours (0 beyond), so exact and approximate search are scored alike.
"""

from __future__ import annotations

import numpy as np

from ..errors import CeaError
from ..knn.search import normalize, search_torch

INDEXES = ("exact", "hnsw")


def search_hnsw(refs: np.ndarray, queries: np.ndarray, k: int, m: int = 32, ef_construction: int = 40,
                ef_search: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Approximate inner-product search with a FAISS HNSW index (unit vectors: cosine)."""
    import faiss

    index = faiss.IndexHNSWFlat(refs.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_construction
    index.add(np.ascontiguousarray(refs, dtype=np.float32))
    index.hnsw.efSearch = max(ef_search or 64, k)
    sims, idx = index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
    return sims, idx


def retrieval_scores(refs, ref_labels, queries, query_labels, ks=(1, 2, 3), index: str = "exact",
                     depth: int = 100) -> dict[str, float]:
    """``top{k}_accuracy`` for each k and ``mrr`` (x 100), by exact or HNSW search."""
    if index not in INDEXES:
        raise CeaError(f"unknown --index {index!r}; use exact or hnsw")
    refs, queries = normalize(refs), normalize(queries)
    if refs.shape[1] != queries.shape[1]:
        raise CeaError(f"queries have {queries.shape[1]} dimensions but the references {refs.shape[1]}")
    depth = min(max(depth, *ks), len(refs))
    if max(ks) > len(refs):
        raise CeaError(f"top-{max(ks)} needs at least {max(ks)} references; there are {len(refs)}")
    _, idx = search_torch(refs, queries, depth) if index == "exact" else search_hnsw(refs, queries, depth)
    ref_labels, query_labels = np.asarray(ref_labels), np.asarray(query_labels)
    hits = (ref_labels[idx] == query_labels[:, None]) & (idx >= 0)
    out = {f"top{k}_accuracy": round(100 * float(hits[:, :k].any(1).mean()), 2) for k in ks}
    first = np.where(hits.any(1), hits.argmax(1) + 1, np.inf)
    out["mrr"] = round(100 * float(np.mean(1.0 / first)), 2)
    return out


def evaluate_retrieval(model, dataset, ks=(1, 2, 3), index: str = "exact", references: str = "train",
                       batch_size: int = 64) -> dict[str, float]:
    """Encode the reference split and the test split of a classification set and score retrieval."""
    refs = dataset[references]
    test = dataset["test"]
    ref_emb = model.encode(list(refs["text"]), batch_size=batch_size, convert_to_numpy=True)
    query_emb = model.encode(list(test["text"]), batch_size=batch_size, convert_to_numpy=True)
    return retrieval_scores(ref_emb, refs["label"].to_numpy(), query_emb, test["label"].to_numpy(), ks, index)
