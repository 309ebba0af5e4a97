"""The exact search kernels behind the ``exact`` and ``int8`` kinds of :mod:`cea.knn.index` (same neighbours, up to
float rounding):

* ``search_torch``: fp32 matmul plus ``topk``, in query chunks, so memory stays at one chunk of scores.
* ``search_int8``: written by hand because no library offers an exact search faster than the fp32 matmul. Vectors
  are quantised to int8 (codes within :func:`code_levels`); ONNX Runtime's ``MatMulInteger`` (or ``torch._int_mm``)
  scores every reference, the top ``candidates`` (by block maxima, far cheaper than ``topk``) are re-scored in fp32.
  Each dot product's quantisation error is bounded by ``r_x + r_q (1 + r_x)`` (``r``: a vector's rounding residual
  norm): where the k-th exact candidate beats the best a non-candidate could reach, the answer is exact; other
  queries are searched again in fp32.
"""

from __future__ import annotations

import numpy as np
import torch

from ..encoders.embeddings import normalize  # noqa: F401 (its home is cea.encoders.embeddings; bench/ reads it here)
from ..hardware import has_vnni

SCORE_BUDGET = 1 << 25  # scores held at once per chunk (128 MB in fp32)
INT8_MIN_REFS = 20_000


def code_levels() -> int:
    """The largest reference code: 127 where the CPU multiplies int8 with 32-bit sums (VNNI), else 63, so that AVX2's
    saturating pair sums (:mod:`cea.hardware`) stay exact: 255 x 64 x 2 = 32,640 <= 32,767. Halving the range doubles
    the rounding residual; the certificate stays sound, only fewer queries are certified."""
    return 127 if has_vnni() else 63


def _chunk(n_refs: int) -> int:
    return int(max(16, min(4096, SCORE_BUDGET // max(n_refs, 1))))


def search_torch(refs: np.ndarray, queries: np.ndarray, k: int, self_match: bool = False,
                 rows: np.ndarray | None = None):
    """fp32 exact search; ``self_match`` means query i is reference i (leave-one-out)."""
    R, Q = torch.from_numpy(refs), torch.from_numpy(queries)
    sims = np.empty((len(queries), k), np.float32)
    idx = np.empty((len(queries), k), np.int64)
    step = _chunk(len(refs))
    for s in range(0, len(queries), step):
        scores = Q[s:s + step] @ R.T
        if self_match:  # query i is reference i, or reference rows[i] when given
            own = torch.arange(s, s + len(scores)) if rows is None else torch.from_numpy(rows[s:s + step])
            scores[torch.arange(len(scores)), own] = -np.inf
        v, i = torch.topk(scores, k, dim=1)
        sims[s:s + step], idx[s:s + step] = v.numpy(), i.numpy()
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
        [helper.make_node("MatMulInteger", ["A", "B", "zero"], ["Y"]),
         helper.make_node("Reshape", ["Y", "shape"], ["Y3"]),
         helper.make_node("ReduceMax", ["Y3"], ["T"], axes=[2], keepdims=0)], "int8_scores",
        [helper.make_tensor_value_info("A", TensorProto.UINT8, ["q", codes_t.shape[0]])],
        [helper.make_tensor_value_info("Y", TensorProto.INT32, ["q", codes_t.shape[1]]),
         helper.make_tensor_value_info("T", TensorProto.INT32, ["q", blocks])],
        initializer=[codes, numpy_helper.from_array(np.array(128, np.uint8), "zero"),
                     numpy_helper.from_array(np.array([0, blocks, block], np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = torch.get_num_threads()  # as torch: a service's single-threaded workers stay so
    options.add_external_initializers(["B"], [ort.OrtValue.ortvalue_from_numpy(codes_t)])
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def search_int8(index, queries: np.ndarray, k: int, self_match: bool = False,
                candidates: int | None = None):
    """Certified exact search (module docstring) over an :class:`cea.knn.index.Int8Index`: (sims, idx, n_fallback)."""
    n, bs = index.n, index.block
    m = min(n - int(self_match), candidates or max(64, 4 * k))
    nb = len(index.codes) // bs
    sims = np.empty((len(queries), k), np.float32)
    idx = np.empty((len(queries), k), np.int64)
    uncertified = []
    lowest_int = torch.iinfo(torch.int32).min
    step = _chunk(n)
    for s in range(0, len(queries), step):
        qf = queries[s:s + step]
        t = torch.from_numpy(qf)  # one scale per query
        qscale = 127.0 / t.abs().amax(1, keepdim=True).clamp(min=1e-12)
        q = torch.round(t * qscale)
        qres = (t - q / qscale).norm(dim=1).numpy()
        qscale = qscale[:, 0].numpy()
        scores, tops = index.scores(torch.nn.functional.pad(q, (0, index.pad)).to(torch.int8))
        if n % bs:  # padding rows: out of their (last) block's maximum, and never chosen
            scores[:, n:] = lowest_int
            tops[:, -1] = scores[:, (nb - 1) * bs:].amax(-1)
        if self_match:  # the query itself: out of its block's maximum
            rows = torch.arange(len(qf))
            scores[rows, rows + s] = lowest_int
            own = (rows + s) // bs
            tops[rows, own] = scores.view(len(qf), nb, bs)[rows, own].amax(-1)
        chosen = torch.topk(tops, min(m, nb), dim=1).indices
        cols = (chosen.unsqueeze(-1) * bs + torch.arange(bs)).reshape(len(qf), -1)
        best = torch.topk(torch.gather(scores, 1, cols), m, dim=1)
        cand = torch.gather(cols, 1, best.indices).clamp_(max=n - 1).numpy()
        exact = np.einsum("qd,qmd->qm", qf, index.vectors[cand])
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
        sims[rows], idx[rows] = search_torch(index.vectors[:n], queries[rows], k, self_match, rows=rows)
    return sims, idx, len(uncertified)


def int8_available() -> bool:
    try:
        torch._int_mm(torch.ones(32, 8, dtype=torch.int8), torch.ones(8, 32, dtype=torch.int8))
        return True
    except (RuntimeError, AttributeError):
        return False
