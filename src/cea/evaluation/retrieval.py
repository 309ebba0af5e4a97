"""Top-k retrieval of the references by the queries (the entity-swap study's evaluation, :mod:`cea.data.entity_swap`):
top-k accuracy (the gold label among the k nearest references' labels) and MRR (1 / rank of the first reference with
the gold label within the first ``depth``, 0 beyond), so exact and approximate search are scored alike.
"""

from __future__ import annotations

import numpy as np

from ..encoders.embeddings import encode
from ..errors import CeaError
from ..knn.index import build_index
from ..knn.search import normalize

INDEXES = ("exact", "hnsw")


def retrieval_scores(
    refs, ref_labels, queries, query_labels, ks=(1, 2, 3), index: str = "exact", depth: int = 100
) -> dict[str, float]:
    """``top{k}_accuracy`` for each k and ``mrr`` (x 100), by exact or HNSW search (:mod:`cea.knn.index`)."""
    if index not in INDEXES:
        raise CeaError(f"unknown --index {index!r}; use exact or hnsw")
    refs, queries = normalize(refs), normalize(queries)
    if refs.shape[1] != queries.shape[1]:
        raise CeaError(f"queries have {queries.shape[1]} dimensions but the references {refs.shape[1]}")
    depth = min(max(depth, *ks), len(refs))
    if max(ks) > len(refs):
        raise CeaError(f"top-{max(ks)} needs at least {max(ks)} references; there are {len(refs)}")
    # HNSW as it has always been run here: M 32, efConstruction 40, efSearch >= depth
    params = {"m": 32, "ef_construction": 40, "ef_search": max(64, depth)} if index == "hnsw" else None
    _, idx = build_index(refs, index, params)[0].search(queries, depth)
    ref_labels, query_labels = np.asarray(ref_labels), np.asarray(query_labels)
    hits = (ref_labels[idx] == query_labels[:, None]) & (idx >= 0)
    out = {f"top{k}_accuracy": round(100 * float(hits[:, :k].any(1).mean()), 2) for k in ks}
    out["mrr"] = round(100 * float(np.mean(1.0 / np.where(hits.any(1), hits.argmax(1) + 1, np.inf))), 2)  # 1 / rank
    return out


def evaluate_retrieval(
    model, dataset, ks=(1, 2, 3), index: str = "exact", references: str = "train", batch_size: int = 64
) -> dict[str, float]:
    """Encode the reference split and the test split of a classification set and score retrieval."""
    refs, test = dataset[references], dataset["test"]
    return retrieval_scores(
        encode(model, refs["text"], batch_size),
        refs["label"].to_numpy(),
        encode(model, test["text"], batch_size),
        test["label"].to_numpy(),
        ks,
        index,
    )
