"""The exact search kernels behind the ``exact`` and ``int8`` kinds of :mod:`cea.knn.index` (same neighbours, up to
float rounding):

* ``search_torch``: fp32 matmul plus ``topk``, in query chunks, so memory stays at one chunk of scores.
* ``search_int8``: written by hand because no library offers an exact search faster than the fp32 matmul. Vectors
  are quantised to int8 (codes within :func:`code_levels`); ONNX Runtime's ``MatMulInteger`` (or ``torch._int_mm``)
  scores every reference, the top ``candidates`` (by block maxima, far cheaper than ``topk``) are re-scored in fp32.
  Each dot product's quantisation error is bounded by ``r_x + r_q (1 + r_x)`` (``r``: a vector's rounding residual
  norm): where the k-th exact candidate beats the best a non-candidate could reach, the answer is exact; other
  queries are tried again with ``WIDER`` times the candidates (as long as that is fewer than all), then in fp32.

Both score cosines as dot products of unit rows: :func:`normalize` makes them (the one home of it; :mod:`cea.knn`
exports it, and every module that needs unit rows imports it from here).
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import CeaError
from ..hardware import has_vnni

SCORE_BUDGET = 1 << 25  # scores held at once per chunk (128 MB in fp32)
# KNNClassifier's exact search by what the CPU has (bench/knn_speed.py, fit + predict, 384-d, medians of 3): with VNNI
# the certified int8 search beats FAISS's flat index from about 40,000 references (AVX-512 VNNI EPYC: 1.93 s against
# 2.19 at 50,000 x 10,000 queries, 0.85 against 0.80 at 30,000 x 5,000, 0.31 against 0.30 for torch at 10,000);
# without VNNI its codes lose half their range and FAISS wins (AVX2 EPYC, 100,000 x 10,000: 5.8 s against 8.6-9.3)
INT8_MIN_REFS = 40_000
CANDIDATES = 32  # re-scored in fp32 per query, or 4 x k (banking77, 8-query batches: 1 query in 3,080 searched again
# in fp32 at 32 with the MiniLM bundle, none with the static; 0.53 ms a batch at 32, 0.70 at 64; a throwaway timing)
# the queries not certified at CANDIDATES try WIDER x as many (then fp32): a static encoder's cosines crowd together
# (banking77's frozen distillate, 16-query batches, k 10: 6.7 queries a batch not certified at 32, 0.23 at 128; 1.97 ms
# a batch at 32 against 1.25 in fp32; MiniLM's bundle 0.1 at 32, 0.63 ms; a throwaway timing), picked from the scores
# already computed (clinc150's static bundle, 22,630 references, 16 % of queries not certified at 32: 0.83 ms a
# batch of 8 against 1.12 scoring them again, medians of 1,200 side by side)
WIDER = 4


def normalize(x) -> np.ndarray:
    """Embeddings ``x`` (a 2-d array) as contiguous float32 rows of unit length (a zero row stays zero)."""
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    if x.ndim != 2:
        raise CeaError(f"expected a 2-d array of embeddings, got shape {x.shape}")
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def code_levels() -> int:
    """The largest reference code: 127 where the CPU multiplies int8 with 32-bit sums (VNNI), else 63, so that AVX2's
    saturating pair sums (:mod:`cea.hardware`) stay exact: 255 x 64 x 2 = 32,640 <= 32,767. Halving the range doubles
    the rounding residual; the certificate stays sound, only fewer queries are certified."""
    return 127 if has_vnni() else 63


def _chunk(n_refs: int) -> int:
    return int(max(16, min(4096, SCORE_BUDGET // max(n_refs, 1))))


def search_torch(
    refs: np.ndarray, queries: np.ndarray, k: int, self_match: bool = False, rows: np.ndarray | None = None
):
    """fp32 exact search; ``self_match`` means query i is reference i (leave-one-out)."""
    R, Q = torch.from_numpy(refs), torch.from_numpy(queries)
    sims, idx = np.empty((len(queries), k), np.float32), np.empty((len(queries), k), np.int64)
    step = _chunk(len(refs))
    for s in range(0, len(queries), step):
        scores = Q[s : s + step] @ R.T
        if self_match:  # query i is reference i, or reference rows[i] when given
            own = torch.arange(s, s + len(scores)) if rows is None else torch.from_numpy(rows[s : s + step])
            scores[torch.arange(len(scores)), own] = -np.inf
        v, i = torch.topk(scores, k, dim=1)
        sims[s : s + step], idx[s : s + step] = v.numpy(), i.numpy()
    return sims, idx


def int8_session(codes_t: np.ndarray, block: int):
    """An ONNX Runtime session computing ``Y = (A - 128) @ codes_t`` (the dim x n codes packed once) and the maxima of Y
    over blocks of ``block`` consecutive references. The codes reach it as an external initializer (no copy through
    the protobuf); the caller keeps ``codes_t`` alive as long as the session."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    blocks = codes_t.shape[1] // block
    codes = TensorProto(name="B", data_type=TensorProto.INT8, dims=codes_t.shape, data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "cea-int8-codes"), ("offset", "0"), ("length", str(codes_t.nbytes))):
        codes.external_data.add(key=key, value=value)
    graph = helper.make_graph(
        [
            helper.make_node("MatMulInteger", ["A", "B", "zero"], ["Y"]),
            helper.make_node("Reshape", ["Y", "shape"], ["Y3"]),
            helper.make_node("ReduceMax", ["Y3"], ["T"], axes=[2], keepdims=0),
        ],
        "int8_scores",
        [helper.make_tensor_value_info("A", TensorProto.UINT8, ["q", codes_t.shape[0]])],
        [
            helper.make_tensor_value_info("Y", TensorProto.INT32, ["q", codes_t.shape[1]]),
            helper.make_tensor_value_info("T", TensorProto.INT32, ["q", blocks]),
        ],
        initializer=[
            codes,
            numpy_helper.from_array(np.array(128, np.uint8), "zero"),
            numpy_helper.from_array(np.array([0, blocks, block], np.int64), "shape"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = torch.get_num_threads()  # as torch: a service's single-threaded workers stay so
    options.add_external_initializers(["B"], [ort.OrtValue.ortvalue_from_numpy(codes_t)])
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def search_int8(index, queries: np.ndarray, k: int, self_match: bool = False, candidates: int | None = None):
    """Certified exact search (module docstring; :data:`WIDER`) over an :class:`cea.knn.index.Int8Index`: (sims, idx,
    n_fallback), one integer scoring pass a chunk. In numpy after the integer scores: a service's batch of a few
    queries is a few dozen small array operations, each a microsecond in numpy and several in torch."""
    n = index.n
    m = min(n - int(self_match), candidates or max(CANDIDATES, 4 * k))
    sims, idx = np.empty((len(queries), k), np.float32), np.empty((len(queries), k), np.int64)
    uncertified, step = [], _chunk(n)
    for s in range(0, len(queries), step):
        qf = queries[s : s + step]
        scored = _int_scores(index, qf, s if self_match else None)
        rows, width = _certified(index, qf, scored, np.arange(len(qf)), m, sims[s : s + step], idx[s : s + step]), m
        while len(rows) and WIDER * width < n - int(self_match):  # crowded cosines (a static encoder's): more
            width *= WIDER
            rows = _certified(index, qf, scored, rows, width, sims[s : s + step], idx[s : s + step])
        uncertified.extend((s + rows).tolist())
    if uncertified:
        rows = np.asarray(uncertified)
        sims[rows], idx[rows] = search_torch(index.vectors[:n], queries[rows], k, self_match, rows=rows)
    return sims, idx, len(uncertified)


def _int_scores(index, qf: np.ndarray, own: int | None):
    """The int8 codes' scores of queries ``qf`` (each scaled to its own largest component) against every reference,
    their block maxima, the queries' scales and rounding residuals; padding rows (and with ``own``, the query itself:
    query i is reference own + i) masked out of both."""
    qscale = np.float32(127.0) / np.maximum(np.abs(qf).max(1, keepdims=True), np.float32(1e-12))  # per query
    q = np.round(qf * qscale)
    qres = np.linalg.norm(qf - q / qscale, axis=1)
    codes = np.zeros((len(qf), qf.shape[1] + index.pad), np.int8)
    codes[:, : qf.shape[1]] = q
    scores, tops = index.scores(codes)
    n, bs, lowest_int = index.n, index.block, np.iinfo(np.int32).min
    nb = len(index.codes) // bs
    if n % bs:  # padding rows: out of their (last) block's maximum, and never chosen
        scores[:, n:] = lowest_int
        tops[:, -1] = scores[:, (nb - 1) * bs :].max(-1)
    if own is not None:  # the query itself: out of its block's maximum
        rows = np.arange(len(qf))
        scores[rows, rows + own] = lowest_int
        at = (rows + own) // bs
        tops[rows, at] = scores.reshape(len(qf), nb, bs)[rows, at].max(-1)
    return scores, tops, qscale[:, 0], qres


def _certified(index, qf, scored, rows, m: int, sims, idx) -> np.ndarray:
    """The k best of the ``m`` best integer scores of queries ``qf[rows]``, re-scored in fp32, into ``sims`` and
    ``idx``; the rows whose k-th is not certified (the best a non-candidate could reach is not below it)."""
    scores, tops, qscale, qres = scored
    bs, lowest_int, k = index.block, np.iinfo(np.int32).min, sims.shape[1]
    nb, r, i = tops.shape[1], rows[:, None], np.arange(len(rows))[:, None]
    # the m best scores lie in the m blocks of the highest maxima
    chosen = (
        np.argpartition(tops[rows], nb - m, axis=1)[:, nb - m :] if m < nb else np.tile(np.arange(nb), (len(rows), 1))
    )
    cols = (chosen[:, :, None] * bs + np.arange(bs)).reshape(len(rows), -1)
    found = scores[r, cols]
    best = np.argpartition(found, found.shape[1] - m, axis=1)[:, found.shape[1] - m :]
    best = np.take_along_axis(best, np.argsort(cols[i, best], axis=1), 1)  # by row: ties of equal cosines keep the
    cand, found = cols[i, best], found[i, best]  # lower row first, as exact search does
    exact = np.matmul(index.vectors[np.minimum(cand, index.n - 1)], qf[rows][:, :, None])[:, :, 0]
    exact[found == lowest_int] = -np.inf  # padding and the query itself
    order = np.argsort(-exact, axis=1, kind="stable")[:, :k]
    sims[rows], idx[rows] = exact[i, order], cand[i, order]
    lowest = found.min(1) / (qscale[rows] * index.scale)  # the m-th best score: the best of the rest is below
    bound = lowest + index.residual + qres[rows] * (1 + index.residual)
    return rows[(sims[rows, -1] <= bound) | ~np.isfinite(sims[rows, -1])]


def exact_kernel(n: int) -> str:
    """The fastest exact search of ``n`` references on this CPU (the comment above :data:`INT8_MIN_REFS`): ``int8``
    where the CPU has VNNI and there are at least that many, else ``faiss`` (its flat index)."""
    return "int8" if n >= INT8_MIN_REFS and has_vnni() and int8_available() else "faiss"


def int8_available() -> bool:
    try:
        torch._int_mm(torch.ones(32, 8, dtype=torch.int8), torch.ones(8, 32, dtype=torch.int8))
        return True
    except (RuntimeError, AttributeError):
        return False
