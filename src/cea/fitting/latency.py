"""``cea fit --latency``'s stage 4: every faster candidate made, the time left shared among their trainings, and the
choice.

What it does
    :func:`latency_candidates` makes the static candidates (:meth:`cea.fitting.candidates.Candidates.static`), the
    trained encoder cut to fewer blocks and trained again and every transformer in int8
    (:mod:`cea.fitting.compression`), shares the time left among their trainings, and names the most accurate on dev
    whose p99 fits (:meth:`cea.fitting.candidates.Candidates.fastest_enough`).

What it expects
    The :class:`cea.fitting.candidates.Candidates` of a fit after its stage 4 (the frozen and the trained candidate
    judged; the fit's options, with its latency), the training configurations as asked and as run, and the fit's
    clock.
"""

from __future__ import annotations

import time

from ..knn.head import LinearHead
from ..training import TrainConfig
from . import compression
from .budget import Clock
from .candidates import Candidates


def latency_candidates(
    candidates: Candidates, asked: TrainConfig, config: TrainConfig, cuts: list[int], clock: Clock, per_text: float
) -> tuple[str, dict | None]:
    """With a latency: the static candidates, the trained encoder cut to each of ``cuts`` blocks and trained again, and
    every transformer in int8 (:mod:`cea.fitting.compression`) made and judged into ``candidates``; a bundle of each
    timed, and the most accurate on dev whose p99 fits the options' latency named, with what the length cut measured.
    The time left beside what the int8 exports, the choices on dev, the timing and stage 5 need
    (:func:`cea.fitting.compression.extras`, from the encoder's seconds ``per_text`` and the seconds the frozen
    candidate's choice took) is shared equally among the trainings in turn (static first), each stopping early where
    dev stops improving, so what one leaves passes to the next."""
    frozen = candidates["frozen"]
    frozen.encoder.save(frozen.folder)  # as judged: its bundle loads it from there
    choosing, texts = frozen.seconds["choose"], len(candidates.examples)
    # in int8: the trained encoder, its cuts, the frozen one where it is better; besides, the cuts and 3 static judged
    dev = {name: candidate.dev(candidates.metric) for name, candidate in candidates.kept.items()}
    exported = len(cuts) + len(compression.int8_parents(dev))
    extras = compression.extras(exported, len(cuts) + 3, per_text, texts, choosing)

    def share(trainings: int) -> float:  # stage 5 copies the timed bundle: the frozen choice's time is kept for it
        return (clock.left - choosing - extras) / trainings

    clock.stage(
        4,
        "static encoders: the frozen and the trained encoder distilled, the second trained with the labels",
        name="static",
    )
    statics = candidates.static(asked, share(1 + len(cuts)))
    parent = candidates["trained" if "trained" in candidates else "frozen"]
    head = LinearHead.beside(parent.folder) if parent.classifier.head == "trained" else None
    length, cut = compression.needed_length(parent.encoder, parent.embeddings, candidates.ds, parent.classifier, head)
    for i, layers in enumerate(sorted(cuts, reverse=True)):  # the deeper first: it stops earliest, leaving the rest
        clock.stage(4, f"the trained encoder cut to {layers} blocks and trained again", name=f"truncated-{layers}")
        if share(len(cuts) - i) <= 0:
            candidates.skipped.append(f"truncated-{layers} (no time left)")
            continue
        made, stopped = compression.truncated(
            parent.encoder,
            layers,
            length,
            config,
            candidates.ds,
            candidates.store,
            time.perf_counter() + share(len(cuts) - i),
            candidates.work,
            candidates.options.progress,
        )
        candidates.add(made, trained=LinearHead.beside(made.folder))
        candidates.skipped += [f"truncated-{layers} training stopped: {stopped}"] if stopped else []
    for made in statics:
        candidates.add(made)
    clock.stage(4, "every transformer candidate in int8 (ONNX)", name="int8")
    timing = (len(candidates.kept) + exported) * compression.TIMING_SECONDS  # every bundle, the int8 ones too
    candidates.int8(
        length,
        time.perf_counter() + clock.left - choosing - timing,
        compression.int8_seconds(per_text, texts, choosing),
    )
    clock.stage(
        4,
        f"timing a bundle of each of the {len(candidates.kept)} candidates: one-text requests from 16 clients",
        name="latency",
    )
    return candidates.fastest_enough(candidates.options.latency), cut
