"""``cea fit --latency``'s stage 4: every faster candidate made and judged, a bundle of each timed, the choice.

What it does
    :func:`latency_candidates` makes the static candidates (:meth:`cea.fitting.candidates.Candidates.static`), the
    trained encoder cut to fewer blocks and trained again and every transformer in int8 (:mod:`cea.fitting.faster`),
    shares the time left among their trainings, and names the most accurate on dev whose p99 fits
    (:meth:`cea.fitting.candidates.Candidates.fastest_enough`).

What it expects
    The :class:`cea.fitting.candidates.Candidates` of a fit after its stage 4 (the frozen and the trained candidate
    judged), the training configurations as asked and as run, and the fit's clock.
"""

from __future__ import annotations

import time

from ..knn.head import LinearHead
from ..training import TrainConfig
from . import faster
from .budget import Clock
from .candidates import Candidates


def latency_candidates(pool: Candidates, asked: TrainConfig, config: TrainConfig, cuts: list[int], per_text: float,
                       choosing: float, clock: Clock, latency: float, frame, y) -> tuple[str, dict | None]:
    """With a latency: the static candidates, the trained encoder cut to each of ``cuts`` blocks and trained again, and
    every transformer in int8 (:mod:`cea.fitting.faster`) made and judged into ``pool``; a bundle of each timed, and the
    most accurate on dev whose p99 fits named, with what the length cut measured. The time left beside what the int8
    exports, the choices on dev, the timing and stage 5 need (:func:`cea.fitting.faster.extras`, from the encoder's
    seconds ``per_text`` and the seconds ``choosing`` the frozen one's choice took) is shared equally among the
    trainings in turn (static first), each stopping early where dev stops improving, so what one leaves passes to the
    next."""
    frozen = pool["frozen"]
    frozen.encoder.save(frozen.folder)  # as judged: its bundle loads it from there
    # in int8: the trained encoder, its cuts, the frozen one where it is better; besides, the cuts and 3 static judged
    dev = {name: candidate.dev(pool.metric) for name, candidate in pool.kept.items()}
    exported = len(cuts) + len(faster.int8_parents(dev))
    extras = faster.extras(exported, len(cuts) + 3, per_text, len(frame), choosing)

    def share(trainings: int) -> float:  # stage 5 copies the timed bundle: the frozen choice's time is kept for it
        return (clock.left - choosing - extras) / trainings

    clock.stage(4, "static encoders: the frozen and the trained encoder distilled, the second trained with the "
                   "labels", name="static")
    statics = pool.static(asked, share(1 + len(cuts)))
    parent = pool["trained" if "trained" in pool else "frozen"]
    head = LinearHead.beside(parent.folder) if parent.classifier.head == "trained" else None
    length, cut = faster.needed_length(parent.encoder, parent.embeddings, pool.ds, parent.classifier, head)
    for i, layers in enumerate(sorted(cuts, reverse=True)):  # the deeper first: it stops earliest, leaving the rest
        clock.stage(4, f"the trained encoder cut to {layers} blocks and trained again", name=f"truncated-{layers}")
        if share(len(cuts) - i) <= 0:
            pool.skipped.append(f"truncated-{layers} (no time left)")
            continue
        made, stopped = faster.truncated(parent.encoder, layers, length, config, pool.ds, pool.store,
                                         time.perf_counter() + share(len(cuts) - i), pool.work, pool.progress)
        pool.add(made, trained=LinearHead.beside(made.folder))
        pool.skipped += [f"truncated-{layers} training stopped: {stopped}"] if stopped else []
    for made in statics:
        pool.add(made)
    clock.stage(4, "every transformer candidate in int8 (ONNX)", name="int8")
    timing = (len(pool.kept) + exported) * faster.TIMING_SECONDS  # every bundle, the int8 ones too
    pool.int8(length, time.perf_counter() + clock.left - choosing - timing,
              faster.int8_seconds(per_text, len(frame), choosing))
    clock.stage(4, f"timing a bundle of each of the {len(pool.kept)} candidates: one-text requests from 16 clients",
                name="latency")
    return pool.fastest_enough(latency, frame, y), cut
