"""``cea fit --latency``'s transformers compressed to serve faster: the trained encoder cut to its first layers and
trained again, every transformer candidate in int8, and the max sequence length cut to what the data needs; and the
time these take, for the budget.

What it does
    :func:`depths` reads at most two depths off the probe's layer curve; :func:`truncated` cuts the trained encoder to
    one of them and trains it again with the labels (the truncated-model study of the seeds: the first blocks of a
    fine-tuned encoder keep most of its accuracy for a fraction of its time); :func:`needed_length` cuts the max
    sequence length to the 99th percentile of the train texts' tokens where dev loses nothing by it; :func:`int8`
    exports a candidate to ONNX in int8 (:mod:`cea.encoders.onnx`) and encodes every split with it, kept
    where dev loses at most :data:`INT8_TOLERANCE` points; :func:`int8_seconds` and :func:`extras` estimate what they
    and the timing take.

How
    The length is judged on the encoder ``cea fit`` would ship without a latency: only the texts longer than the cut
    are encoded again, and the dev figure of its own classifier (references: train) compared before and after.

What it expects
    Candidates as :class:`cea.fitting.candidate.Candidate` records, their classifier chosen
    (:func:`cea.fitting.choice.choose_classifier`); :meth:`cea.fitting.candidates.Candidates.int8` makes the int8 ones
    in turn.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from pathlib import Path

import numpy as np

from ..encoders import forget_fingerprint, load_encoder, truncate
from ..encoders.embeddings import encode, token_lengths
from ..encoders.onnx import OnnxEncoder, export_onnx
from ..encoders.store import EmbeddingStore
from ..evaluation.classification import scores
from ..evaluation.multilabel import multilabel_scores
from ..knn.head import LinearHead
from ..training import TrainConfig, train
from .budget import budget_callback
from .candidate import SPLITS, Candidate

INT8_TOLERANCE = 0.3  # dev points an int8 candidate may lose to the encoder it was exported from
PERCENTILE = 99  # the share of the train texts the cut length keeps whole
# the depths tried: the best layer of the probe's curve in the upper half of the trained encoder's blocks, and the
# shallowest there within CLOSE points of it. Trained again, a cut keeping at least half the blocks recovers where the
# frozen curve is flat below: on trec50 (4 blocks trained, the curve 61.5 / 61.7 / 62.8 / 66.9 at layers 1-4) the
# 1-block cut trained again reached 76.7 dev against the trained encoder's 89.4
CLOSE = 2.0
# what the int8 candidates and the timing take, for the budget: all-MiniLM-L6-v2's export with its static int8
# (calibrated on 256 texts) took 9.6 s on one thread (AMD EPYC), its int8 encoding ran 2.19x as fast as PyTorch's on
# banking77 (bench/onnx_speed.py); a bundle built and timed took 8 s there
EXPORT_SECONDS, INT8_SPEEDUP, TIMING_SECONDS = 10.0, 2.0, 8.0
NARROW = 0.25  # an int8 candidate's choice (its parent's settings: one C of six, one k) against a full one's


def depths(rows: list[dict], model: str, length: int, depth: int, metric: str) -> list[int]:
    """At most two depths from the upper half of the probe's layer curve below ``depth`` (the trained encoder's
    blocks; ``rows`` of ``model`` at ``length`` tokens): the best layer there (ties: the shallower) and the shallowest
    within :data:`CLOSE` points of it."""
    curve = {
        r["layer"]: r[metric]
        for r in rows
        if r["model"] == model and r["max_seq_length"] == length and (depth + 1) // 2 <= r["layer"] < depth
    }
    if not curve:
        return []
    best = max(curve.values())
    return sorted(
        {
            min(layer for layer, v in curve.items() if v == best),
            min(layer for layer, v in curve.items() if v >= best - CLOSE),
        }
    )


@contextlib.contextmanager
def cut_at(model, length: int | None):
    """``model`` read at ``length`` tokens inside the block (None: as it is), its length restored after; its cached
    fingerprint dropped both ways, since it names the length."""
    before = model.max_seq_length
    model.max_seq_length = length or before
    forget_fingerprint(model)
    try:
        yield model
    finally:
        model.max_seq_length = before
        forget_fingerprint(model)


def dev_figure(spec, vectors: dict, ds, head=None) -> float:
    """The dev accuracy (micro-F1 for label sets) of the classifier ``spec`` with the train rows of ``vectors`` as its
    references (``head``: its trained head, if it ships one)."""
    column = "labels" if spec.multi_label else "label"
    decision = spec.answer(vectors["train"], list(ds["train"][column]), vectors["dev"], head)
    if spec.multi_label:
        return multilabel_scores(decision.label_sets, list(ds["dev"][column]))["micro_f1"]
    return scores(decision.labels, list(ds["dev"][column]))["accuracy"]


def needed_length(model, vectors: dict, ds, spec, head=None) -> tuple[int | None, dict]:
    """The :data:`PERCENTILE` th percentile of the train texts' tokens, where it is below ``model``'s max sequence
    length and the dev figure of ``spec`` (its classifier, with its ``head``: :func:`dev_figure`) is not lower at that
    cut, else None; and what was measured (``fit.json``). Only the texts longer than the cut are encoded again."""
    tokens = {s: np.asarray(token_lengths(model, list(ds[s]["text"]))) for s in ("train", "dev")}
    cut = int(np.percentile(tokens["train"], PERCENTILE))
    measured = {"percentile": PERCENTILE, "tokens": cut, "max_seq_length": model.max_seq_length}
    if cut >= model.max_seq_length:
        return None, {**measured, "kept": False, "why": "no shorter than the encoder's"}
    cut_vectors = {s: v.copy() for s, v in vectors.items()}
    with cut_at(model, cut):
        for s, lengths in tokens.items():
            rows = np.flatnonzero(lengths > cut)
            if len(rows):
                cut_vectors[s][rows] = encode(model, [ds[s]["text"].iloc[i] for i in rows])
    before, after = dev_figure(spec, vectors, ds, head), dev_figure(spec, cut_vectors, ds, head)
    kept = after >= before
    return (cut if kept else None), {
        **measured,
        "dev_before": round(before, 2),
        "dev_after": round(after, 2),
        "kept": kept,
    }


def truncated(
    parent,
    layers: int,
    length: int | None,
    config: TrainConfig,
    ds,
    store: EmbeddingStore,
    deadline: float,
    work: Path,
    progress,
) -> tuple[Candidate, str | None]:
    """The ``parent`` encoder (a copy) cut to its first ``layers`` blocks (and ``length`` tokens) and trained again
    as ``config`` trains, until ``deadline`` (``time.perf_counter()``) or dev stops improving: the candidate
    ``truncated-LAYERS`` (not yet judged; its run's folder, loaded from there only where the kept weights are the
    saved ones) and why it stopped early, if it did."""
    model = copy.deepcopy(parent)
    truncate(model, layers)
    run = work / f"truncated-{layers}"
    config = dataclasses.replace(config, layers=layers, output=str(run), max_seq_length=length or config.max_seq_length)
    check = budget_callback(deadline)
    result = train(config, progress=progress, callbacks=[check], data=ds, store=store, model=model)
    loads = 0
    if store.state(model) != result["model_fingerprint"]:  # the kept weights are the run's saved ones
        model, loads = load_encoder(str(run / "model"), device=str(model.device)), 1
    state = {"model": str(run / "model"), "loads": loads, **dict.fromkeys(SPLITS, "encoded")}
    embeddings = {s: store.encode(model, ds[s]["text"]) for s in SPLITS}
    return Candidate(run.name, str(run / "model"), model, embeddings, state=state), check.stopped


def int8(parent: Candidate, length: int | None, folder: Path, ds, store: EmbeddingStore) -> Candidate:
    """``parent``'s encoder exported to ONNX in int8 into ``folder`` (calibrated on the train split's texts; at
    ``length`` tokens where given; its trained head copied beside it) and every split encoded by ONNX Runtime: the
    candidate ``folder.name`` (not yet judged), its encoder the PyTorch one a bundle saves beside the export it
    copies."""
    with cut_at(parent.encoder, length):
        parent.encoder.save(str(folder))
        export_onnx(parent.encoder, folder, int8=True, calibration=list(ds["train"]["text"]))
    head = LinearHead.beside(parent.folder)
    if head is not None:
        head.save(folder)
    onnx = OnnxEncoder(folder, "int8")  # its session goes with it: only the bundle's runs on
    embeddings = {s: store.encode(onnx, ds[s]["text"], state=f"int8-{folder.name}") for s in SPLITS}
    return Candidate(folder.name, str(folder), parent.encoder, embeddings)


def int8_parents(dev: dict) -> list[str]:
    """The transformer candidates (``dev``: name -> dev figure) to export in int8, in order: the trained one and its
    cuts, then the frozen one where it is better on dev than the trained one (the same blocks: its int8 as fast)."""
    return [
        name
        for name in sorted(dev, key=lambda name: name == "frozen")
        if name != "frozen" or dev.get("trained", -1.0) < dev["frozen"]
    ]


def int8_seconds(per_text: float, texts: int, choosing: float) -> float:
    """One transformer candidate's int8 estimated: exported (:data:`EXPORT_SECONDS`), ``texts`` encoded at
    :data:`INT8_SPEEDUP` x the encoder's seconds ``per_text`` (an upper bound: truncated ones run fewer blocks) and
    judged with its parent's settings (:data:`NARROW` of a full choice, ``choosing`` seconds)."""
    return EXPORT_SECONDS + per_text * texts / INT8_SPEEDUP + NARROW * choosing


def extras(transformers: int, judged: int, per_text: float, texts: int, choosing: float) -> float:
    """Seconds ``cea fit --latency`` keeps for the work after and around its trainings: ``transformers`` candidates in
    int8 (:func:`int8_seconds`); ``judged`` other new candidates (truncated, static) chosen a classifier on dev
    (``choosing`` seconds each, what the frozen one's choice took); and every candidate's bundle (these, the int8 ones
    and the frozen and trained ones) built and timed (:data:`TIMING_SECONDS`)."""
    return (
        transformers * int8_seconds(per_text, texts, choosing)
        + judged * choosing
        + (transformers + judged + 2) * TIMING_SECONDS
    )
