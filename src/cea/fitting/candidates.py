"""The candidates of one ``cea fit``, held together, and the stages that make, judge, time and choose them.

What it does
    :class:`Candidates` holds each :class:`cea.fitting.candidate.Candidate` by name with what they share (the data
    set and every labelled example of it, the embedding store, the work folder, the fit's options, what was cut). Its
    methods are the stages: :meth:`~Candidates.add` chooses one's classifier on dev and keeps it;
    :meth:`~Candidates.best_on_dev` names the best there; with ``--latency``, :meth:`~Candidates.static` distils the
    encoders judged (:mod:`cea.encoders.static`) and trains the trained one's distillate with the labels,
    :meth:`~Candidates.int8` exports the transformers in int8 (:mod:`cea.fitting.compression`), and
    :meth:`~Candidates.fastest_enough` builds a bundle of each, times it as the service runs it
    (:func:`cea.bundle.speed.served_speed`), marks the :func:`frontier` (``served``'s ``frontier`` in ``fit.json``)
    and names the best on dev whose p99 fits.

What it expects
    The frozen candidate, and the trained one where training ran, added by :mod:`cea.fitting.run` (stages 2-4).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path

import pandas as pd

from ..bundle import Bundle
from ..bundle.speed import served_speed
from ..data.dataset import MULTILABEL
from ..encoders import load_encoder
from ..encoders.build import is_static
from ..encoders.static import distill
from ..encoders.store import EmbeddingStore
from ..errors import OptionError
from ..knn.head import LinearHead
from ..training import TrainConfig, train
from ..training.config import with_defaults
from . import compression
from .budget import budget_callback
from .candidate import SPLITS, Candidate, Choice, Served
from .choice import choose_classifier
from .options import FitOptions

# with --latency: the share of the training time kept from the full transformer's training for the faster candidates
# (two distillations of about 30 s each for all-MiniLM-L6-v2 on 2 cores, the distillate trained with the labels: 849
# steps in 19 s on banking77; the truncated encoders trained again; the int8 exports). They also get what the full
# one's training leaves where dev stops improving.
LATENCY_SHARE = 0.3


@dataclasses.dataclass
class Candidates:
    """The candidates of one fit by name (``kept``, in the order they were added) and what they share: the data set
    ``ds`` (and its ``rare`` labels), the embedding ``store``, the ``work`` folder, the fit's ``options`` (the
    device, the progress style, the latency); ``skipped``: what was cut, in words."""

    ds: object
    rare: list | None
    store: EmbeddingStore
    work: Path
    options: FitOptions
    kept: dict[str, Candidate] = dataclasses.field(default_factory=dict)
    skipped: list[str] = dataclasses.field(default_factory=list)

    @property
    def metric(self) -> str:
        """The dev figure candidates are chosen by: micro-F1 for label sets, else accuracy."""
        return "micro_f1" if self.ds.task == MULTILABEL else "accuracy"

    @functools.cached_property
    def examples(self) -> pd.DataFrame:
        """Every labelled example, train, dev and test in that order: what each candidate's bundle holds."""
        return pd.concat([self.ds[s] for s in SPLITS], ignore_index=True)

    @functools.cached_property
    def labels(self) -> list:
        """The :attr:`examples`' labels (label sets where texts have several), as a bundle takes them."""
        return list(self.examples["labels" if self.ds.task == MULTILABEL else "label"])

    def __getitem__(self, name: str) -> Candidate:
        return self.kept[name]

    def __contains__(self, name: str) -> bool:
        return name in self.kept

    def add(self, candidate: Candidate, trained=None, like=None, choice: Choice | None = None) -> Candidate:
        """``candidate``'s classifier chosen on dev (``trained``: its run's head; ``like``: a classifier whose settings
        alone are tried, :func:`cea.fitting.choice.choose_classifier`; ``choice``: one made already) and the candidate
        kept; its ``state`` where none was given: loaded once, every split encoded."""
        candidate.choice = choice or choose_classifier(self.ds, candidate.embeddings, self.rare, trained, like)
        candidate.state = candidate.state or {"model": candidate.folder, "loads": 1, **dict.fromkeys(SPLITS, "encoded")}
        self.kept[candidate.name] = candidate
        return candidate

    def drop(self, name: str, why: str) -> None:
        """Candidate ``name`` left out, and ``why`` said in ``skipped``."""
        del self.kept[name]
        self.skipped.append(f"{name} ({why})")

    def best_on_dev(self) -> str:
        """The best on dev (ties: the trained one, then the frozen one). A dev of a few texts a class ties often, and
        where it did, the trained encoder was the better on annotations neither had seen (``cea serve``'s background
        fits, bench/label_studio_zero.py: banking77 at 8 and 16 a class, 80.88 against 79.41 and 89.52 against
        86.29)."""
        return max(self.kept, key=lambda name: (self.kept[name].dev(self.metric), name == "trained", name == "frozen"))

    def summary(self) -> dict:
        """``fit.json``'s ``candidates``: each one's figures, the classifier in words."""
        return {name: candidate.summary() for name, candidate in self.kept.items()}

    def states(self) -> dict:
        """``fit.json``'s ``states``: what each candidate was loaded and encoded from."""
        return {name: candidate.state for name, candidate in self.kept.items()}

    def encoded(self, name: str, folder: str, encoder) -> Candidate:
        """A new candidate ``name``: ``encoder`` (saved in ``folder``) and its embeddings of every split."""
        return Candidate(name, folder, encoder, {s: self.store.encode(encoder, self.ds[s]["text"]) for s in SPLITS})

    def static(self, asked: TrainConfig, seconds: float) -> list[Candidate]:
        """``cea fit --latency``'s static candidates (:mod:`cea.encoders.static`), not yet judged: ``static-of-frozen``
        and ``static-of-trained``, the transformer candidates distilled, and ``static-aligned``, the trained one's
        distillate (else the frozen one's) trained with the labels as ``asked`` (the default objective moves its token
        vectors) until ``seconds`` are spent; ``skipped`` says what was cut."""
        out, deadline = [], time.perf_counter() + seconds
        for teacher in list(self.kept.values()):
            folder = self.work / f"static-of-{teacher.name}"
            distill(teacher.folder, folder, device=self.options.device)
            out.append(self.encoded(folder.name, str(folder), load_encoder(str(folder), device=self.options.device)))
        if deadline - time.perf_counter() <= 0:
            self.skipped.append("static training (no time left)")
            return out
        run = self.work / "static-train"
        config = dataclasses.replace(asked, model=out[-1].folder, output=str(run))
        check = budget_callback(deadline)
        train(
            with_defaults(config, self.ds, len(self.ds["train"])),
            progress=self.options.progress,
            callbacks=[check],
            data=self.ds,
            store=self.store,
        )
        out.append(
            self.encoded(
                "static-aligned", str(run / "model"), load_encoder(str(run / "model"), device=self.options.device)
            )
        )
        if check.stopped:
            self.skipped.append(f"static training stopped: {check.stopped}")
        return out

    def int8(self, length: int | None, deadline: float, first: float) -> None:
        """Every transformer candidate in int8 (:func:`cea.fitting.compression.int8`, at ``length`` tokens where
        given) as ``NAME-int8``, judged with the settings of the candidate's classifier, kept where its dev figure is at
        most :data:`cea.fitting.compression.INT8_TOLERANCE` points below the candidate's; none where the encoders do not
        run on the CPU (ONNX Runtime runs them there). Those :func:`cea.fitting.compression.int8_parents` names, in its
        order, each
        begun only where what the one before took (``first`` seconds, estimated, for the first) ends before
        ``deadline`` (``time.perf_counter()``). ``skipped`` says which were not kept or made, and why."""
        dev = {name: c.dev(self.metric) for name, c in self.kept.items() if not is_static(c.encoder)}
        parents, took = compression.int8_parents(dev), first
        for name in parents:  # the trained and their cuts first
            parent = self.kept[name]
            if str(parent.encoder.device) != "cpu":
                self.skipped.append(
                    f"{name}-int8 (ONNX Runtime runs on the CPU; the encoder is on {parent.encoder.device})"
                )
                continue
            if time.perf_counter() + took > deadline:
                self.skipped.append(f"{name}-int8 (no time left)")
                continue
            began = time.perf_counter()
            made = compression.int8(parent, length, self.work / f"{name}-int8", self.ds, self.store)
            made.backend, made.max_seq_length = "onnx-int8", length or parent.encoder.max_seq_length
            self.add(made, trained=LinearHead.beside(made.folder), like=parent.classifier)
            took = time.perf_counter() - began
            lost = dev[name] - made.dev(self.metric)
            if lost > compression.INT8_TOLERANCE:
                self.drop(made.name, f"dev {lost:.2f} points below {name}; at most {compression.INT8_TOLERANCE:g}")
        if "frozen" in dev and "frozen" not in parents:
            self.skipped.append("frozen-int8 (the trained encoder's is as fast and no worse on dev)")

    def fastest_enough(self, latency: float) -> str:
        """The candidate to ship under ``cea fit --latency``: the best on dev (ties: the faster) whose bundle's p99 for
        one-text requests from 16 clients is at most ``latency`` ms (:func:`cea.bundle.speed.served_speed` on the
        test texts). Each is bundled with the :attr:`examples` in ``work/bundles`` and timed (its ``served``)."""
        texts, device = list(self.examples["text"]), self.options.device
        for name, candidate in self.kept.items():
            folder = self.work / "bundles" / name
            Bundle.create(
                folder,
                candidate.folder,
                texts,
                self.labels,
                embeddings=candidate.vectors(),
                progress=False,
                classifier=candidate.classifier,
                device=device,
                encoder=candidate.encoder,
                backend=candidate.backend or "auto",
            ).close()  # int8: its ONNX export comes along
            candidate.served = Served(**served_speed(folder, texts[-len(candidate.embeddings["test"]) :], device))
        for name in frontier(self.summary(), self.metric):
            self.kept[name].served = dataclasses.replace(self.kept[name].served, frontier=True)
        fitting = [name for name, c in self.kept.items() if c.served.p99_ms <= latency]
        if not fitting:
            closest = min(self.kept, key=lambda name: self.kept[name].served.p99_ms)
            took = self.kept[closest].served.p99_ms
            static = " (a static encoder: no faster kind is built)" if closest.startswith("static") else ""
            raise OptionError(
                "latency",
                f"{latency:g} ms is met by no candidate: the fastest, {closest}{static}, "
                f"answers one-text requests from 16 clients in {took:g} ms (p99); allow more, "
                "or serve on a faster machine",
            )
        return max(fitting, key=lambda name: (self.kept[name].dev(self.metric), -self.kept[name].served.p99_ms))


def frontier(candidates: dict, metric: str) -> list[str]:
    """The timed candidates (``fit.json``'s ``candidates``) no other beats on both dev ``metric`` and served p99 (at
    least as good on each, better on one): what each latency can buy, fastest first."""
    point = {name: (c["dev"][metric], c["served"]["p99_ms"]) for name, c in candidates.items()}
    beaten = {
        a for a, (dev, p99) in point.items() for b in point.values() if b != (dev, p99) and b[0] >= dev and b[1] <= p99
    }
    return sorted(set(candidates) - beaten, key=lambda name: (point[name][1], name))
