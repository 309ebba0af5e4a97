"""``cea fit --latency``: the static candidates, and the candidate a latency lets ship.

What it does
    :class:`Pool` holds a fit's candidates and what they share; :func:`static_candidates` distils the encoders
    ``cea fit`` judged (:mod:`cea.encoders.static`) and trains the trained one's distillate with the labels;
    :func:`fastest_enough` builds a bundle of every candidate (an int8 one with its ONNX export), times it as the
    service runs it (:func:`cea.serving.latency.served_speed`), marks the :func:`frontier` (``served``'s ``frontier``
    in ``fit.json``) and names the best on dev whose p99 fits.

What it expects
    What :mod:`cea.fitting` holds after its stage 4: each candidate as ``(folder, encoder, {split: embeddings})``
    and its judgement (``dev``, ``classifier``).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..encoders import load_encoder
from ..encoders.store import EmbeddingStore
from ..encoders.static import distill
from ..errors import OptionError
from ..serving import Bundle
from ..serving.latency import served_speed
from ..training import TrainConfig, train
from ..training.config import with_defaults
from .budget import budget_callback
from .judgement import judged

SPLITS = ("train", "dev", "test")

# with --latency: the share of the training time kept from the full transformer's training for the faster candidates
# (two distillations of about 30 s each for all-MiniLM-L6-v2 on 2 cores, the distillate trained with the labels: 849
# steps in 19 s on banking77; the truncated encoders trained again; the int8 exports). They also get what the full
# one's training leaves where dev stops improving.
LATENCY_SHARE = 0.3


@dataclasses.dataclass
class Pool:
    """The candidates of one fit and what they share: the data set ``ds`` (and its ``rare`` labels), the embedding
    ``store``, the ``work`` folder, the ``device``, the ``progress`` style; ``made``: each candidate's ``(folder,
    encoder, {split: embeddings})``, ``candidates``: its judgement (:func:`cea.fitting.judgement.judged`),
    ``states``: what ``fit.json`` says it was loaded and encoded from; ``skipped``: what was cut, in words."""

    ds: object
    rare: list | None
    store: EmbeddingStore
    work: Path
    device: str | None
    progress: object
    made: dict
    candidates: dict
    states: dict
    skipped: list

    def add(self, name: str, entry: tuple, trained=None, loads: int = 1, like=None, **said) -> None:
        """Candidate ``name`` (``(folder, encoder, {split: embeddings})``) judged on dev (``trained``: its run's
        head; ``like``: a classifier whose settings alone are tried, :func:`cea.fitting.judgement.judged`) and kept;
        ``said``: more of it for ``fit.json``."""
        self.made[name] = entry
        self.candidates[name] = {**judged(self.ds, entry[2], self.rare, trained, like), **said}
        self.states[name] = {"model": entry[0], "loads": loads, **dict.fromkeys(SPLITS, "encoded")}


def static_candidates(made: dict, ds, asked: TrainConfig, work: Path, store: EmbeddingStore, device, progress,
                       seconds: float) -> tuple[dict, list[str]]:
    """``cea fit --latency``'s static candidates (:mod:`cea.encoders.static`), each as ``made`` holds one (folder,
    encoder, embeddings of each split): ``static-of-frozen`` and ``static-of-trained``, the ``made`` encoders distilled,
    and ``static-aligned``, the trained one's distillate (else the frozen one's) trained with the labels as ``asked``
    (the default objective moves its token vectors) until ``seconds`` are spent; and what was cut, in words."""
    out, deadline = {}, time.perf_counter() + seconds
    for name, (teacher, _, _) in made.items():
        folder = work / f"static-of-{name}"
        distill(teacher, folder, device=device)
        model = load_encoder(str(folder), device=device)
        out[folder.name] = (str(folder), model, {s: store.encode(model, ds[s]["text"]) for s in SPLITS})
    if deadline - time.perf_counter() <= 0:
        return out, ["static training (no time left)"]
    run = work / "static-train"
    config = dataclasses.replace(asked, model=out[f"static-of-{list(made)[-1]}"][0], output=str(run))
    check = budget_callback(deadline)
    train(with_defaults(config, ds, len(ds["train"])), progress=progress, callbacks=[check], data=ds, store=store)
    model = load_encoder(str(run / "model"), device=device)
    out["static-aligned"] = (str(run / "model"), model, {s: store.encode(model, ds[s]["text"]) for s in SPLITS})
    return out, [f"static training stopped: {check.stopped}"] if check.stopped else []


def frontier(candidates: dict, metric: str) -> list[str]:
    """The timed candidates no other beats on both dev ``metric`` and served p99 (at least as good on each, better on
    one): what each latency can buy, fastest first."""
    point = {name: (c["dev"][metric], c["served"]["p99_ms"]) for name, c in candidates.items()}
    beaten = {a for a, (dev, p99) in point.items() for b in point.values() if b != (dev, p99) and b[0] >= dev
              and b[1] <= p99}
    return sorted(set(candidates) - beaten, key=lambda name: (point[name][1], name))


def fastest_enough(candidates: dict, made: dict, metric: str, latency: float, frame: pd.DataFrame, y: list,
                    work: Path, device) -> str:
    """The candidate to ship under ``cea fit --latency``: the best on dev (ties: the faster) whose bundle's p99 for
    one-text requests from 16 clients is at most ``latency`` ms (:func:`cea.serving.latency.served_speed` on the test
    texts). Each of ``made`` is bundled in ``work/bundles`` and timed; each candidate's figures go to its ``served``."""
    texts = list(frame["text"])
    for name, (source, model, vectors) in made.items():
        Bundle.create(work / "bundles" / name, source, texts, y, embeddings=np.vstack([vectors[s] for s in SPLITS]),
                      progress=False, classifier=candidates[name]["classifier"], device=device, encoder=model,
                      backend=candidates[name].get("backend", "auto")).close()  # int8: its ONNX export comes along
        candidates[name]["served"] = served_speed(work / "bundles" / name, texts[-len(vectors["test"]):], device)
    for name in frontier(candidates, metric):
        candidates[name]["served"]["frontier"] = True
    fitting = [name for name in candidates if candidates[name]["served"]["p99_ms"] <= latency]
    if not fitting:
        closest = min(candidates, key=lambda c: candidates[c]["served"]["p99_ms"])
        took = candidates[closest]["served"]["p99_ms"]
        static = " (a static encoder: no faster kind is built)" if closest.startswith("static") else ""
        raise OptionError("latency", f"{latency:g} ms is met by no candidate: the fastest, {closest}{static}, answers "
                                     f"one-text requests from 16 clients in {took:g} ms (p99); allow more, or serve on "
                                     "a faster machine")
    return max(fitting, key=lambda c: (candidates[c]["dev"][metric], -candidates[c]["served"]["p99_ms"]))
