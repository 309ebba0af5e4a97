"""Issue 107: how often a background fit's judge (:mod:`cea.service.judging`) makes the choice the full test split
would make, on intent sets, against the rule before it (swap only on more held-back annotations right).

    OMP_NUM_THREADS=1 python bench/judge.py banking77 clinc150 [--per-class 5,20] [--seeds 0,1,2] [--budget 5m]

Each fit, as ``cea serve`` runs it for a new Label Studio project: an empty all-MiniLM-L6-v2 bundle, each label's name
its first example (``name_labels``), then PER_CLASS train texts a class (drawn with the seed) set as annotations
(``label-studio:`` sources, a fifth held back by their key); :class:`cea.service.fine_tuning.BackgroundFit` fits and
judges (``--budget``). The truth: both bundles answer the data set's whole test split from every example (names and
all annotations, as each would serve after the fit), scored as the judge scores (:func:`cea.service.fine_tuning.
scored`); the fitted bundle should be swapped in where it gets more of the test split right, and kept out where not.
Each fit's figures are saved (``bench/results/judge/NAME.json``) and read, not run again, by a later run.

Records (``docs/records/judge.jsonl``, section ``judge``): per data set and count a class, and over all fits, the
share of fits where the judge agrees with the test split, the rule before it beside it; over all fits, the share of
fits no worse on the test split that each rule swaps in.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path

import numpy as np

from common import R, record

MODEL = "all-MiniLM-L6-v2"
OUT = R / "judge"
SECTION = "judge"


def annotations(dataset: str, per_class: int, seed: int) -> list[tuple[str, str]]:
    """``per_class`` train texts of each label (all of a smaller label's), drawn with ``seed``, as (text, label)."""
    from cea.data import load_dataset

    train = load_dataset(dataset)["train"]
    rng = random.Random(seed)
    picked = []
    for label, group in sorted(train.groupby("label"), key=lambda kv: str(kv[0])):
        texts = list(group["text"])
        picked += [(text, str(label)) for text in rng.sample(texts, min(per_class, len(texts)))]
    return picked


def served(folder: Path, dataset: str, per_class: int, seed: int):
    """The live bundle of a new project: empty, the label names its first examples, then the annotations."""
    from cea.bundle import Bundle
    from cea.service.fine_tuning import ANNOTATION

    picked = annotations(dataset, per_class, seed)
    live = Bundle.create(folder, MODEL, [], [], progress=False, backend="torch")
    live.name_labels({label: [label.replace("_", " ")] for label in sorted({lab for _, lab in picked})})
    for number, (text, label) in enumerate(picked):
        live.set_examples(f"{ANNOTATION}{dataset}:{seed}:{number}", [text], [label])
    return live


def test_scores(before, fitted, dataset: str) -> dict:
    """Both bundles on the whole test split from every example of ``before`` (the live bundle before the fit)."""
    from cea.bundle.renewal import encoded
    from cea.data import load_dataset
    from cea.service.fine_tuning import scored

    test = load_dataset(dataset)["test"]
    texts, gold = list(test["text"]), list(test["label"].astype(str))
    references, labels = list(before.texts), before.stored_labels()
    live = scored(before, before.embeddings, labels, before.embed(texts), gold)
    ours = scored(fitted, encoded(fitted, references), labels, encoded(fitted, texts), gold)
    return {"live": live.accuracy, "fitted": ours.accuracy}


def one_fit(dataset: str, per_class: int, seed: int, budget: float) -> dict:
    """One background fit judged, and the test split's figures of both bundles (saved; reused where saved)."""
    from cea.bundle import Bundle
    from cea.service.fine_tuning import BackgroundFit

    saved = OUT / f"{dataset}-{per_class}-s{seed}.json"
    if saved.exists():
        return json.loads(saved.read_text())
    folder = OUT / saved.stem
    shutil.rmtree(folder, ignore_errors=True)
    live = served(folder / "live", dataset, per_class, seed)
    shutil.copytree(folder / "live", folder / "before")
    trainer = BackgroundFit(live, folder / "fits", budget=budget, first=0)
    if not trainer.start():
        sys.exit(f"{saved.stem}: the fit did not start")
    trainer.wait()
    last = trainer.last
    if last["outcome"] == "failed" or "fitted_accuracy" not in last:
        sys.exit(f"{saved.stem}: no fit was judged: {last.get('why')}")
    before = Bundle.load(folder / "before")
    fitted = Bundle.load(folder / "fits" / trainer.job / "bundle")
    result = {**last, "test": test_scores(before, fitted, dataset), "per_class": per_class, "seed": seed}
    saved.write_text(json.dumps(result, indent=1))
    for bundle in (live, before, fitted):
        bundle.store.close()
    shutil.rmtree(folder, ignore_errors=True)  # bundles and fits: GBs over a grid
    return result


def agreement(fits: list[dict]) -> tuple[float, float]:
    """Percent of ``fits`` where the judge, and the rule before it, choose as the test split would."""
    better = [f["test"]["fitted"] > f["test"]["live"] for f in fits]
    judged = [f["outcome"] == "swapped" for f in fits]
    before = [f["fitted_accuracy"] > f["live_accuracy"] for f in fits]
    return (
        100.0 * float(np.mean([j == b for j, b in zip(judged, better)])),
        100.0 * float(np.mean([j == b for j, b in zip(before, better)])),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--per-class", default="5,20")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--budget", default="5m", help="each fit's budget (cea fit --budget)")
    args = parser.parse_args()
    from cea.progress import parse_duration

    OUT.mkdir(parents=True, exist_ok=True)
    budget = parse_duration(args.budget)
    counts, seeds = [int(c) for c in args.per_class.split(",")], [int(s) for s in args.seeds.split(",")]
    every = []
    for dataset in args.datasets:
        for per_class in counts:
            fits = [one_fit(dataset, per_class, seed, budget) for seed in seeds]
            every += fits
            ours, rule_before = agreement(fits)
            swapped = sum(f["outcome"] == "swapped" for f in fits)
            record(
                f"background fit judge agrees with the test split, {dataset}, {per_class} a class",
                round(ours, 1),
                baseline=round(rule_before, 1),
                unit="% of fits",
                section=SECTION,
                baseline_is="the rule before: swap only on more held-back annotations right",
                note=f"{len(fits)} fits (seeds {args.seeds}), {swapped} swapped; budget {args.budget}",
            )
    ours, rule_before = agreement(every)
    record(
        "background fit judge agrees with the test split, all fits",
        round(ours, 1),
        baseline=round(rule_before, 1),
        unit="% of fits",
        section=SECTION,
        baseline_is="the rule before: swap only on more held-back annotations right",
        note=f"{len(every)} fits: {', '.join(args.datasets)}; {args.per_class} a class; seeds {args.seeds}",
    )
    no_worse = [f for f in every if f["test"]["fitted"] >= f["test"]["live"]]
    record(
        "background fit judge: fits no worse on the test split swapped",
        round(100.0 * np.mean([f["outcome"] == "swapped" for f in no_worse]), 1) if no_worse else None,
        baseline=round(100.0 * np.mean([f["fitted_accuracy"] > f["live_accuracy"] for f in no_worse]), 1)
        if no_worse
        else None,
        unit="% of fits",
        section=SECTION,
        baseline_is="the rule before",
        note=f"{len(no_worse)} of {len(every)} fits no worse on test; data sets {', '.join(args.datasets)}",
    )


if __name__ == "__main__":
    main()
