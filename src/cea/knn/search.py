"""Exact cosine top-k search in chunks: fp32, FAISS, or certified int8.

Three backends return the same neighbours (up to float rounding):

* ``torch``: fp32 matmul plus ``topk``, in query chunks, so memory stays at one chunk of scores.
* ``faiss``: ``faiss.knn`` with inner product (blocked BLAS plus heaps).
* ``int8``: written by hand because no library offers it: an exact search that is faster than the
  fp32 matmul limit. Vectors are quantised to int8 with one scale for all references and one per
  query; ONNX Runtime's ``MatMulInteger`` (MLAS, VNNI; ``torch._int_mm`` without onnxruntime)
  scores every reference; the top ``candidates`` by approximate
  score are re-scored in fp32. The quantisation error of each dot product is bounded by
  ``r_x + r_q (1 + r_x)`` (``r`` = norm of a vector's rounding residual), so when the k-th exact
  score of the candidates beats the best any non-candidate could reach, the answer is provably the
  exact one; queries that cannot be certified are searched again in fp32. Selection uses block
  maxima (the top-m entries lie in the m blocks with the largest maxima), which is far cheaper
  than ``topk`` over the whole score row.

``auto`` picks int8 for large reference sets and fp32 otherwise.
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import CeaError

BACKENDS = ("auto", "torch", "faiss", "int8")
SCORE_BUDGET = 1 << 25  # scores held at once per chunk (128 MB in fp32)
INT8_MIN_REFS = 20_000


def normalize(x) -> np.ndarray:
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    if x.ndim != 2:
        raise CeaError(f"expected a 2-d array of embeddings, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def _chunk(n_refs: int) -> int:
    return int(max(16, min(4096, SCORE_BUDGET // max(n_refs, 1))))


def _exclude_self(scores: torch.Tensor, start: int, fill) -> None:
    rows = torch.arange(scores.shape[0])
    scores[rows, rows + start] = fill


def search_torch(refs: np.ndarray, queries: np.ndarray, k: int, self_match: bool = False,
                 rows: np.ndarray | None = None):
    """fp32 exact search; ``self_match`` means query i is reference i (leave-one-out)."""
    R, Q = torch.from_numpy(refs), torch.from_numpy(queries)
    sims = np.empty((len(queries), k), np.float32)
    idx = np.empty((len(queries), k), np.int64)
    step = _chunk(len(refs))
    for s in range(0, len(queries), step):
        scores = Q[s:s + step] @ R.T
        if self_match:
            if rows is None:
                _exclude_self(scores, s, -np.inf)
            else:
                part = torch.from_numpy(rows[s:s + step])
                scores[torch.arange(len(part)), part] = -np.inf
        v, i = torch.topk(scores, k, dim=1)
        sims[s:s + step], idx[s:s + step] = v.numpy(), i.numpy()
    return sims, idx


def search_faiss(refs: np.ndarray, queries: np.ndarray, k: int, self_match: bool = False):
    import faiss

    sims, idx = faiss.knn(queries, refs, k + int(self_match), metric=faiss.METRIC_INNER_PRODUCT)
    if not self_match:
        return sims, idx
    own = idx == np.arange(len(queries))[:, None]
    own[~own.any(1), -1] = True  # self not found (duplicates): drop the last
    keep = ~own
    return sims[keep].reshape(len(queries), k), idx[keep].reshape(len(queries), k)


class Int8Index:
    """Quantised references for :func:`search_int8` (built once per ``fit``)."""

    def __init__(self, refs: np.ndarray, block: int = 64):
        self.refs = refs
        self.dim = refs.shape[1]
        self.pad = (-self.dim) % 8
        self.scale = 127.0 / max(float(np.abs(refs).max()), 1e-12)
        q = np.rint(refs * self.scale)
        self.residual = float(np.linalg.norm(refs - q / self.scale, axis=1).max())
        self.codes = np.pad(q, ((0, 0), (0, self.pad))).astype(np.int8)
        self.block = block
        self._session = _ort_session(self.codes)

    def scores(self, codes: np.ndarray) -> torch.Tensor:
        """int32 dot products of int8 query codes with every reference."""
        if self._session is not None:
            feed = {"A": (codes.astype(np.int16) + 128).astype(np.uint8)}
            return torch.from_numpy(self._session.run(None, feed)[0])
        return torch._int_mm(torch.from_numpy(codes), torch.from_numpy(self.codes).T)


def _ort_session(codes: np.ndarray):
    """An ONNX Runtime session computing ``(A - 128) @ codes.T`` with codes packed once."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["A", "B", "zero"], ["Y"])], "int8_scores",
        [helper.make_tensor_value_info("A", TensorProto.UINT8, ["q", codes.shape[1]])],
        [helper.make_tensor_value_info("Y", TensorProto.INT32, ["q", len(codes)])],
        initializer=[numpy_helper.from_array(np.ascontiguousarray(codes.T), "B"),
                     numpy_helper.from_array(np.array(128, np.uint8), "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _quantize_queries(queries: np.ndarray, pad: int):
    scale = 127.0 / np.maximum(np.abs(queries).max(1, keepdims=True), 1e-12)
    q = np.rint(queries * scale)
    residual = np.linalg.norm(queries - q / scale, axis=1)
    return np.pad(q, ((0, 0), (0, pad))).astype(np.int8), scale[:, 0], residual


def search_int8(index: Int8Index, queries: np.ndarray, k: int, self_match: bool = False,
                candidates: int | None = None):
    """Certified exact search (see the module docstring). Returns (sims, idx, n_fallback)."""
    n, bs = len(index.refs), index.block
    m = min(n - int(self_match), candidates or max(64, 4 * k))
    nb = n // bs
    sims = np.empty((len(queries), k), np.float32)
    idx = np.empty((len(queries), k), np.int64)
    uncertified = []
    lowest_int = torch.iinfo(torch.int32).min
    step = _chunk(n)
    for s in range(0, len(queries), step):
        qf = queries[s:s + step]
        codes, qscale, qres = _quantize_queries(qf, index.pad)
        scores = index.scores(codes)
        if self_match:
            _exclude_self(scores, s, lowest_int)
        blocks = scores[:, : nb * bs].view(len(qf), nb, bs)
        tops = blocks.amax(-1)
        if nb * bs < n:  # the tail that does not fill a block counts as one more block
            tops = torch.cat([tops, scores[:, nb * bs:].amax(-1, keepdim=True)], 1)
        chosen = torch.topk(tops, min(m, tops.shape[1]), dim=1).indices
        cols = (chosen.unsqueeze(-1) * bs + torch.arange(bs)).reshape(len(qf), -1)
        outside = cols >= n  # the tail block is shorter than the others
        cand_scores = torch.gather(scores, 1, cols.clamp(max=n - 1)).masked_fill_(outside, lowest_int)
        best = torch.topk(cand_scores, m, dim=1)
        cand = torch.gather(cols.clamp(max=n - 1), 1, best.indices).numpy()
        exact = np.einsum("qd,qmd->qm", qf, index.refs[cand])
        exact[best.values.numpy() == lowest_int] = -np.inf  # padding and the query itself
        order = np.argsort(-exact, axis=1, kind="stable")[:, :k]
        sims[s:s + step] = np.take_along_axis(exact, order, 1)
        idx[s:s + step] = np.take_along_axis(cand, order, 1)
        lowest = best.values[:, -1].numpy() / (qscale * index.scale)
        bound = lowest + index.residual + qres * (1 + index.residual)
        weak = (sims[s:s + step, -1] <= bound) | ~np.isfinite(sims[s:s + step, -1])
        uncertified.extend((s + np.flatnonzero(weak)).tolist())
    if uncertified:
        rows = np.asarray(uncertified)
        sims[rows], idx[rows] = search_torch(index.refs, queries[rows], k, self_match, rows=rows)
    return sims, idx, len(uncertified)


def int8_available() -> bool:
    try:
        torch._int_mm(torch.ones(32, 8, dtype=torch.int8), torch.ones(8, 32, dtype=torch.int8))
        return True
    except (RuntimeError, AttributeError):
        return False
