"""From labelled data to a shipped classifier in one call: ``fit(data, output)`` (``cea fit DATA -o BUNDLE``).

It sits above every package (data, evaluation, training, serving, reports) and makes the choices a
user would otherwise make by hand, each on the dev split, never on test:

1. **probe** the candidate encoders at every layer (:mod:`cea.fitting.probing`: mean pooling, train -> dev,
   embeddings cached), each also cut at the shorter max sequence lengths that enough of the train texts run past
   (shortest first); the best model, length and depth go on (training and the bundle keep the length);
2. **frozen**: that encoder, cut to that depth, with the classifier on top best on dev: a linear head
   (logistic regression, C from 0.1-100), kNN (k from 1-20, uniform or distance votes), or the two
   mixed (the kNN vote's share of the class probabilities from 0, 0.25, ... 1);
3. **train** the default objective on it (``select="best"`` by dev), within what is left of the budget;
4. **choose** the trained encoder where its dev accuracy (with its own best classifier) is at least the frozen
   one's (a tie goes to the trained one: :meth:`cea.fitting.candidates.Candidates.best_on_dev` says why), and report
   both on test (train and dev as references);
5. **ship** a :class:`cea.bundle.Bundle` of every labelled example (train, dev and test) with the
   chosen encoder and classifier, and write ``fit.json`` and ``report.html`` into it.

With ``latency`` (ms), static encoders, the trained encoder cut to fewer blocks and trained again, and each
transformer in int8 join the candidates (:mod:`cea.fitting.compression`); a bundle of each is timed as the service asks
it and the most accurate on dev whose p99 fits ships (:mod:`cea.fitting.latency`).

The ``budget`` bounds the search: a candidate whose probe would not fit is skipped; training times its first steps and
goes on where a useful share of its planned steps fits (stopping at the deadline, or earlier where dev stops improving);
what ran, what was skipped or cut and why is said in the result (``fit.json``: ``training``, ``skipped``). Work folders
(the probe and the training run) go to ``work`` (default ``cea-runs/fit-NAME-TIME``).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import shutil
import time
from pathlib import Path

from ..bundle import Bundle
from ..bundle.references import LEFT_BEHIND
from ..data import load_dataset
from ..data.dataset import CLASSIFICATION, MULTILABEL
from ..data.label_names import with_label_names
from ..encoders import DEFAULT_MODEL, embed, load_encoder, model_fingerprint
from ..encoders.catalog import resolve_model
from ..encoders.store import EmbeddingStore, layer_state
from ..errors import CeaError, OptionError
from ..evaluation.classification import RARE, rare_labels
from ..knn.head import LinearHead
from ..progress import duration, parse_duration
from ..training import TrainConfig, train
from ..training.config import check_config, with_defaults
from ..training.tracking import tracked, trackers
from . import compression
from .budget import Clock, budget_callback
from .candidate import SPLITS, Candidate
from .candidates import LATENCY_SHARE, Candidates
from .choice import choose_classifier, classifier_settings, final_line, in_words, label_issues, written
from .latency import latency_candidates
from .options import DEFAULT_BUDGET, FitOptions
from .probing import Base, Probed, chosen_base, configure_encoder, probe_candidates

FORMAT = "cea.fit/1"
# what training leaves for the work after its last step: FINISH x the probe's estimate of the trained encoder's one
# encode of every text (yahoo, 64 tokens: the run's final judgement took 1.28x that estimate, as it also fits and
# saves the head and the predictions), and the time the frozen candidate's choice on dev took (stage 4 judges the
# trained one the same way). Before this, yahoo's fit ran 41 s past its budget.
FINISH = 1.5


def fit(
    dataset: str | dict = "trec6",
    output: str | Path = "cea-bundle",
    models=None,
    budget=DEFAULT_BUDGET,
    text_column: str = "text",
    label_column: str = "label",
    split_map: str | None = None,
    work: str | Path | None = None,
    device: str | None = None,
    precision: str | None = None,
    seed: int = 0,
    label_names: str = "auto",
    label_separator: str | None = None,
    progress: bool | str = True,
    say=print,
    report_to: str = "none",
    latency: float | None = None,
) -> dict:
    """Probe, train, choose on dev, and ship a bundle of every labelled example to ``output``.

    ``dataset``: anything :func:`cea.data.load_dataset` takes (a catalog name, a file, a folder, ``hub:ID``,
    ``{split: file}``); ``models``: the candidate encoders (default: the catalog's default model);
    ``budget``: a duration (``"15m"``) or seconds; ``device`` and ``precision``: where and how encoders run
    and train (:mod:`cea.encoders.device`); ``label_names``: each label's name as one more train example where
    names are words (:mod:`cea.data.label_names`), in the probe, training, the choice on dev and the bundle;
    texts with several labels (a column of lists, or of names joined by ``label_separator``, e.g. ``|``) are judged by
    micro-F1 instead of accuracy and get a multi-label bundle; ``progress``: bars (True), plain lines (``"lines"``:
    each stage and training epoch, :mod:`cea.progress`) or only the stage lines (False); ``report_to``: the trackers
    that follow the training run and get the choice and its test figures (:mod:`cea.training.tracking`); ``latency``:
    the p99 in ms a one-text request may take among 16 (static candidates join; the module's docstring). Returns the
    summary written to ``output/fit.json``.
    """
    options = FitOptions(
        dataset=dataset,
        output=output,
        models=models,
        budget=budget,
        text_column=text_column,
        label_column=label_column,
        split_map=split_map,
        work=work,
        device=device,
        precision=precision,
        seed=seed,
        label_names=label_names,
        label_separator=label_separator,
        progress=progress,
        say=say,
        report_to=report_to,
        latency=latency,
    )
    names = trackers(report_to)  # an unknown or missing tracker: said before anything runs
    shown = options.shown()
    with tracked([n for n in names if n != "tensorboard"], Path(output), {"fit": shown}) as log:  # one run around
        summary = _fit(options)  # the training's (MLflow, W&B)
        figures = {f"fit_test_{k}": v for k, v in summary["test"].items()} | {"fit_seconds": summary["seconds"]}
        log(figures | {"fit_chosen": summary["chosen"], "fit_classifier": summary["classifier"]}, 0)
    with tracked(["tensorboard"] if "tensorboard" in names else [], Path(summary["work"]), {"fit": shown}) as log:
        log(figures, 0)
    return summary


def _fit(options: FitOptions) -> dict:
    """:func:`fit`'s work: what would stop it after its probe checked first, then the five stages in turn."""
    seconds = parse_duration(options.budget)
    models = _checked(options)
    ds = _data(options)
    rare = None if ds.task == MULTILABEL else rare_labels(ds["train"]["label"])  # judged apart: under RARE texts
    work = _work(options.work, ds.name)
    k = min(TrainConfig.knn_k, len(ds["train"]))  # the probe's and the run's kNN vote: fewer on a few references
    asked = _asked(options, work, k)
    check_config(asked)  # as asked: the static candidates' training takes its own defaults
    config = with_defaults(asked, ds, len(ds["train"]))  # the objective for labelled texts, its lr and epochs
    clock = Clock(seconds, options.say)
    # each state's embeddings in the store, shared with the training run (on disk: its end)
    candidates = Candidates(ds, rare, EmbeddingStore(root=True), work, options)
    # 1. probe the candidates (a length is chosen on dev like a layer: on long texts a shorter cut can win, for less)
    probed = probe_candidates(candidates, models, k, clock)
    base = chosen_base(probed, candidates.metric)
    # 2. the frozen candidate: that encoder at that depth and length, its classifier chosen on dev
    _frozen(candidates, base, clock)
    # 3. the default objective trained on that encoder cut to that depth, at that length
    if base.layers:
        configure_encoder(base.encoder, layers=base.layers)
    config.model, config.layers, config.pooling = base.model, base.layers, "mean"
    config.max_seq_length = base.length if base.length != base.full else None
    run = _trained(candidates, config, base, clock)
    # 4. choose on dev (with a latency: among the faster kinds too, by their p99), report on test
    clock.stage(4, "choosing between the frozen and the trained encoder on dev; test figures")
    if run.encoder is not None:  # what the run's judgements encoded with the kept weights, else encoded now
        trained = _embedded(candidates, run)
        candidates.add(trained, trained=LinearHead.beside(trained.folder))
    if options.latency is None:
        chosen, cut = candidates.best_on_dev(), None
    else:
        cuts = (
            compression.depths(probed.rows, base.model, base.length, base.layers or base.depth, candidates.metric)
            if "trained" in candidates
            else []
        )
        chosen, cut = latency_candidates(candidates, asked, config, cuts, clock, base.per_text)
    # 5. ship every labelled example
    bundle = _shipped(candidates, candidates[chosen], clock)
    summary = _summary(
        candidates, probed=probed, base=base, objective=config.objective, run=run, chosen=chosen, cut=cut, clock=clock
    )
    written(summary, work, bundle, ds.name, run.encoder is not None)
    options.say(final_line(summary, candidates[chosen].classifier, Path(options.output), clock.used))
    return summary


def _checked(options: FitOptions) -> list[str]:
    """The candidate encoders, every name resolvable (one that cannot load fails now, not after the first
    candidate's probe); a new output folder and a positive latency, else an OptionError."""
    latency, output = options.latency, Path(options.output)
    if latency is not None and not latency > 0:
        raise OptionError("latency", f"must be a positive number of milliseconds, got {latency}")
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise OptionError("output", f"{output} already exists; name a new folder for the bundle")
    models = list(options.models or [DEFAULT_MODEL])
    for name in models:
        resolve_model(name)
    return models


def _work(work, name: str) -> Path:
    """The fit's work folder (default ``cea-runs/fit-NAME-TIME``), refused where it holds a training run."""
    work = Path(work or Path("cea-runs") / f"fit-{name}-{dt.datetime.now():%Y%m%d-%H%M%S}")
    if (work / "train").exists():
        raise OptionError("work", f"{work} already holds a fit's training run; name a new folder")
    return work


def _data(options: FitOptions):
    """The labelled data set, refused where what would stop the fit after its probe shows now: no labels, a single
    label in train, no dev text of a train label; train's label names added as examples (one label per text)."""
    ds = load_dataset(
        options.dataset,
        text_column=options.text_column,
        label_column=options.label_column,
        split_map=options.split_map,
        label_separator=options.label_separator,
    )
    if ds.task not in (CLASSIFICATION, MULTILABEL):
        raise CeaError(f"{ds.name} is a {ds.task} data set; fit needs labelled texts (text, label)")
    multi = ds.task == MULTILABEL
    named = {s: sorted(set(ds[s]["labels" if multi else "label"].explode())) for s in ("train", "dev")}
    if len(named["train"]) < 2:
        raise CeaError(
            f"{ds.name}'s train split has a single label ({', '.join(named['train'])}); fit needs texts of "
            "at least two labels"
        )
    if not set(named["dev"]) & set(named["train"]):
        raise CeaError(
            f"no dev text has a label of the train split (dev: {', '.join(named['dev'][:5])}); give dev "
            "texts of the train split's labels, or no dev split (it is then carved from train)"
        )
    if multi:  # label names as examples apply to one label per text
        return ds
    return dataclasses.replace(ds, splits={**ds.splits, "train": with_label_names(ds["train"], options.label_names)})


def _asked(options: FitOptions, work: Path, k: int) -> TrainConfig:
    """The training run as the options ask it (``select="best"`` by dev, its folder ``work/train``, the kNN vote of
    ``k``), before the defaults for the data."""
    return TrainConfig(
        dataset=options.dataset,
        text_column=options.text_column,
        label_column=options.label_column,
        split_map=options.split_map,
        select="best",
        seed=options.seed,
        device=options.device,
        precision=options.precision,
        output=str(work / "train"),
        label_names=options.label_names,
        label_separator=options.label_separator,
        knn_k=k,
        report_to=options.report_to,
    )


def _frozen(candidates: Candidates, base: Base, clock: Clock) -> Candidate:
    """Stage 2: the candidate ``frozen``: the ``base`` encoder frozen at its layer (saved to ``work/frozen-model``
    when its bundle needs it), its embeddings of each split (train and dev read from the store, where the probe left
    them; test, the split the probe did not encode, encoded once) and its classifier chosen on dev, kept; its
    ``seconds``: those encoding and those choosing."""
    clock.stage(2, f"frozen {base.model}, layer {base.layer}: choosing the classifier (linear head or kNN) on dev")
    ds, store, layer = candidates.ds, candidates.store, base.layer
    t0 = time.perf_counter()
    frozen = {
        s: embed(base.encoder, list(ds[s]["text"]), [layer], ["mean"], cache=store, progress=candidates.options.bars)[
            (layer, "mean")
        ]
        for s in SPLITS
    }
    state = layer_state(model_fingerprint(base.encoder), layer, "mean")
    loaded = {
        "model": base.model,
        "loads": 1,
        "train": "probe",
        "dev": "probe",
        "test": "encoded",
        "encoded": store.encoded[state],
        "repeated": store.repeated(state),
    }
    t1 = time.perf_counter()
    candidate = Candidate(
        "frozen",
        str(candidates.work / "frozen-model"),
        base.encoder,
        frozen,
        state=loaded,
        choice=choose_classifier(ds, frozen, candidates.rare),
    )
    candidate.seconds = {"encode": t1 - t0, "choose": time.perf_counter() - t1}
    return candidates.add(candidate, choice=candidate.choice)


@dataclasses.dataclass
class Run:
    """Stage 3's outcome: the trained ``encoder`` (the kept weights; None where no training ran), the run's
    ``result`` and what ``fit.json`` says of the ``training``, and ``loads``: 1 where the kept weights were loaded
    from the run's folder."""

    encoder: object
    result: dict | None
    training: dict
    loads: int = 0


def _trained(candidates: Candidates, config: TrainConfig, base: Base, clock: Clock) -> Run:
    """Stage 3: the default objective trained as ``config`` says on a copy of the ``base`` encoder, within what is
    left of the budget less a reserve: the trained encoder's one encode of every text (its final judgement) and the
    choice (:data:`FINISH`), and with a latency the faster candidates' share (:data:`LATENCY_SHARE`). Its first steps
    timed, it goes on where a useful share of its planned steps fits and stops where dev stops improving; none where
    no room is left beside the reserve."""
    ds, store, frozen, skipped = candidates.ds, candidates.store, candidates["frozen"], candidates.skipped
    reserve = FINISH * base.per_text * sum(len(ds[s]) for s in SPLITS) + frozen.seconds["choose"]
    room = clock.left - reserve
    room -= LATENCY_SHARE * room * (candidates.options.latency is not None and room > 0)  # at least
    # the trained head's start: the probe's embeddings of train
    store.put(store.state(base.encoder), ds["train"]["text"], frozen.embeddings["train"])
    if room <= 0:
        skipped.append(
            f"training (the trained encoder's one encode of every text and the choice need about "
            f"{duration(reserve)}; {duration(max(clock.left, 0))} left)"
        )
        return Run(None, None, {"ran": False, "why": "no time left"})
    layers = config.layers
    clock.stage(
        3,
        f"training {config.objective} on {config.model}"
        + (f" cut to {layers} layers" if layers else "")
        + f", at most {config.epochs:g} epochs, stopping when dev stops improving",
        room,
    )
    budget_check = budget_callback(time.perf_counter() + room)
    trained = copy.deepcopy(base.encoder)  # trained in place; the frozen encoder stays a candidate
    result = train(
        config, progress=candidates.options.progress, callbacks=[budget_check], data=ds, store=store, model=trained
    )
    training = {
        "ran": True,
        **budget_check.report(),
        "steps": result["steps"],
        "kept_step": result["kept_step"],
        "stopped_early": result["stopped_early"],
    }
    if budget_check.stopped:
        skipped.append(f"training stopped: {budget_check.stopped}")
    if store.state(trained) != result["model_fingerprint"]:  # the kept weights reloaded by the run
        kept = load_encoder(str(candidates.work / "train" / "model"), device=candidates.options.device)
        return Run(kept, result, training, loads=1)
    return Run(trained, result, training)


def _embedded(candidates: Candidates, run: Run) -> Candidate:
    """The candidate ``trained`` (saved in ``work/train/model``), not yet judged: its embeddings of each split, those
    the run's judgements encoded with the kept weights, the rest encoded now (its ``state`` says which)."""
    store, ds, folder = candidates.store, candidates.ds, str(candidates.work / "train" / "model")
    state = store.state(run.encoder)
    found = {s: store.get(state, ds[s]["text"]) for s in SPLITS}
    loaded = {
        "model": folder,
        "loads": run.loads,
        **{s: "training's judgements" if v is not None else "encoded" for s, v in found.items()},
    }
    embedded = {s: store.encode(run.encoder, ds[s]["text"], state=state) for s in SPLITS}
    loaded.update(encoded=store.encoded[state], repeated=store.repeated(state))
    return Candidate("trained", folder, run.encoder, embedded, state=loaded)


def _shipped(candidates: Candidates, chosen: Candidate, clock: Clock) -> Bundle:
    """Stage 5: the bundle of every labelled example with the ``chosen`` candidate's encoder and classifier, in the
    options' output (with a latency: the timed bundle as it is)."""
    clock.stage(5, f"bundling every labelled example with the {chosen.name} encoder ({in_words(chosen.classifier)})")
    output, device = Path(candidates.options.output), candidates.options.device
    if candidates.options.latency is not None:
        shutil.copytree(
            candidates.work / "bundles" / chosen.name,
            output,
            ignore=shutil.ignore_patterns(*LEFT_BEHIND),
            dirs_exist_ok=True,
        )
        return Bundle.load(output, device=device)
    if chosen.name == "frozen":
        chosen.encoder.save(chosen.folder)
    return Bundle.create(
        output,
        chosen.folder,
        list(candidates.examples["text"]),
        candidates.labels,
        embeddings=chosen.vectors(),
        classifier=chosen.classifier,
        progress=candidates.options.bars,
        device=device,
        encoder=chosen.encoder,
    )


def _summary(
    candidates: Candidates,
    *,
    probed: Probed,
    base: Base,
    objective: str,
    run: Run,
    chosen: str,
    cut: dict | None,
    clock: Clock,
) -> dict:
    """``fit.json``: the data, the probe and the encoder it chose, the candidates and the one ``chosen`` (its
    classifier, its test figures), what was skipped, the training ``run``, the length ``cut``, and the seconds: each
    stage's, and the work no fit can avoid (one encode of every text by each probed encoder, and the training run:
    its steps, its dev judgements and its final judgement, which encodes every text once with the kept weights)."""
    ds, metric, spec, frame = candidates.ds, candidates.metric, candidates[chosen].classifier, candidates.examples
    summary = {
        "format": FORMAT,
        "dataset": ds.name,
        "source": ds.source,
        "budget_seconds": clock.seconds,
        "models": probed.models,
        "metric": metric,
        "probe": [{k: r[k] for k in ("model", "max_seq_length", "layer", metric)} for r in probed.rows],
        "model": base.model,
        "layer": base.layer,
        "depth": base.depth,
        "max_seq_length": base.length,
        "objective": objective,
        "chosen": chosen,
        **classifier_settings(spec),
        "candidates": candidates.summary(),
        "rare": {"below": RARE, "labels": candidates.rare},
        "test": candidates[chosen].choice.test,
        "skipped": candidates.skipped,
        "references": len(frame),
        "seconds_per_text": {name: round(v, 6) for name, v in probed.speed.items()},
        "training": run.training,
        "train_seconds": run.result["train_seconds"] if run.result else 0.0,
        "states": candidates.states(),
        "label_issues": None if ds.task == MULTILABEL else label_issues(frame, candidates[chosen].vectors()),
        "latency_ms": candidates.options.latency,
        "length_cut": cut,
        "seconds": round(clock.used, 1),
        "work": str(candidates.work),
    }
    run_seconds = run.result["total_seconds"] if run.result else 0.0
    unavoidable = probed.encode_seconds + candidates["frozen"].seconds["encode"] + run_seconds
    summary.update(
        stage_seconds=clock.stages(),
        unavoidable_seconds=round(unavoidable, 1),
        ratio_to_unavoidable=round(clock.used / max(unavoidable, 1e-9), 2),
    )
    return summary
