"""Stage 1 of ``cea fit``: the candidate encoders probed at every layer on dev, and the one every candidate starts from.

What it does
    :func:`probe_candidates` loads each candidate encoder once and probes it at every layer (mean pooling, train ->
    dev, embeddings cached), also cut at the shorter max sequence lengths of :data:`LENGTHS` that at least
    :data:`LONG_SHARE` of the train texts run past, shortest first; a later candidate is skipped where its probe
    would not fit the budget. :func:`chosen_base` picks the probe's best row (:class:`Base`);
    :func:`configure_encoder` sets an encoder as a stage uses it.

What it expects
    The fit's :class:`cea.fitting.candidates.Candidates` (its data, options, work folder and skipped list) and its
    :class:`cea.fitting.budget.Clock`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..encoders import forget_fingerprint, load_encoder, num_layers, set_pooling, truncate
from ..encoders.embeddings import token_lengths
from ..evaluation import probe
from ..progress import duration
from .budget import Clock, seconds_per_text
from .candidates import Candidates

CACHED = 2e-5  # seconds per text below which a probe read its embeddings from the cache rather than encoding them
# shorter max sequence lengths tried on dev, each where at least LONG_SHARE of the train texts run past it. On long
# texts a shorter cut can be as good or better for half the encoding time or less: all-MiniLM-L6-v2 frozen, 64 / 128
# / 256 tokens, test accuracy 71.50 / 71.75 / 71.35 on yahoo (and 96.20 / 91.10 / 89.80 on 20ng, whose posts open
# with their label), dev ranking the lengths as test did (the figures page, docs/benchmarks.md, the encoder's max
# sequence length)
LENGTHS = (64, 128)
LONG_SHARE = 0.1


def configure_encoder(encoder, length: int | None = None, pooling: str | None = None, layers: int | None = None):
    """Set a loaded ``encoder`` as a stage uses it, in place: cut at ``length`` tokens, ``pooling``, its first
    ``layers`` blocks. Its cached fingerprint (:func:`cea.encoders.model_fingerprint`, which keys the embedding cache)
    goes, since it names the length."""
    if length is not None:
        encoder.max_seq_length = length
    if pooling is not None:
        set_pooling(encoder, pooling)
    if layers is not None:
        truncate(encoder, layers)
    forget_fingerprint(encoder)


def shorter_lengths(encoder, texts) -> list[int]:
    """The lengths of :data:`LENGTHS` below ``encoder``'s max sequence length that at least :data:`LONG_SHARE` of
    ``texts`` run past (a length no text reaches would give the same embeddings)."""
    full = getattr(encoder, "max_seq_length", None)
    if not full:
        return []
    tokens = np.asarray(token_lengths(encoder, list(texts)))
    return [n for n in LENGTHS if n < full and np.mean(tokens > n) >= LONG_SHARE]


@dataclasses.dataclass
class Probed:
    """Stage 1's outcome: the candidate encoders asked (``models``), the probe's ``rows`` (every candidate, length and
    layer), each candidate's ``speed`` (seconds per text at its own length), the seconds spent encoding
    (``encode_seconds``) and the candidates ``loaded``."""

    models: list[str]
    rows: list[dict]
    speed: dict[str, float]
    encode_seconds: float
    loaded: dict


def probe_candidates(candidates: Candidates, models: list[str], k: int, clock: Clock) -> Probed:
    """Stage 1: each candidate loaded once and probed at every layer on dev (also cut at the shorter lengths its train
    texts run past, shortest first), the first always, the others while the budget allows (``skipped`` says which
    not)."""
    ds, device, probed, probes = candidates.ds, candidates.options.device, Probed(models, [], {}, 0.0, {}), 0
    n_texts = len(ds["train"]) + len(ds["dev"])
    for name in models:
        candidate = probed.loaded[name] = load_encoder(name, device=device)
        candidate.model_card_data.generate_widget_examples = False  # saving it would encode its card's examples
        full = candidate.max_seq_length
        for length in shorter_lengths(candidate, ds["train"]["text"]) + [full]:
            configure_encoder(candidate, length=full)  # the probe cuts it where asked
            cut = f" at {length} tokens" if length != full else ""
            scale, estimate = length / full if full else 1.0, None  # the share of a full-length encode
            if probes:  # whether a later probe fits: a later candidate's speed measured on a sample of train
                if name not in probed.speed:
                    probed.speed[name] = seconds_per_text(candidate, ds["train"]["text"])
                estimate = probed.speed[name] * n_texts * scale
                if estimate > 0.3 * clock.left:
                    candidates.skipped.append(
                        f"probe of {name}{cut} (about {duration(estimate)}; {duration(clock.left)} left)"
                    )
                    continue
            clock.stage(1, f"probing {name}{cut} at every layer on dev", estimate)
            result = probe(
                ds,
                models=[name],
                poolings=("mean",),
                k=k,
                references="train",
                queries="dev",
                progress=candidates.options.bars,
                device=device,
                max_seq_length=length if cut else None,
                encoders={name: candidate},
            )
            probed.rows += [{**r, "max_seq_length": length} for r in result.rows]
            result.save(candidates.work / f"probe-{probes}")
            probes += 1
            took = result.meta["timings"][f"encode {name}"]
            probed.encode_seconds += took
            if name not in probed.speed:
                probed.speed[name] = took / n_texts / scale
                if probed.speed[name] < CACHED:  # read from the embedding cache: measured on a sample instead
                    probed.speed[name] = seconds_per_text(candidate, ds["train"]["text"])
    return probed


@dataclasses.dataclass(frozen=True)
class Base:
    """The encoder every candidate starts from, as stage 1 chose it on dev: the probe's ``row`` (its ``model``,
    ``length`` and ``layer``), the ``encoder`` loaded (cut at that length, mean pooling), its ``depth`` (blocks) and
    ``full`` max sequence length, and its seconds ``per_text`` at that length (the probe's)."""

    row: dict
    encoder: object
    depth: int
    full: int
    per_text: float

    @property
    def model(self) -> str:
        return self.row["model"]

    @property
    def length(self) -> int:
        return self.row["max_seq_length"]

    @property
    def layer(self) -> int:
        return self.row["layer"]

    @property
    def layers(self) -> int | None:
        """The blocks the frozen and the trained candidates keep: the chosen layer's, None where it is the last."""
        return self.layer if self.layer < self.depth else None


def chosen_base(probed: Probed, metric: str) -> Base:
    """The probe's best row on dev (ties: the longer cut, then the deeper layer; layer 0 never), its encoder set to
    that length and the mean pooling the probe chose with."""
    best = max((r for r in probed.rows if r["layer"] != 0), key=lambda r: (r[metric], r["max_seq_length"], r["layer"]))
    encoder = probed.loaded[best["model"]]
    depth, full = num_layers(encoder), encoder.max_seq_length
    configure_encoder(encoder, length=best["max_seq_length"], pooling="mean")
    per_text = probed.speed[best["model"]] * (best["max_seq_length"] / full if full else 1.0)
    return Base(best, encoder, depth, full, per_text)
