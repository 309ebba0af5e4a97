"""Issue 18, open intent: bolt-lab's protocol (25, 50, 75% of the classes known; the rest hidden from training
and from the references, their test texts expected as unknown), judged as `cea train --unknown-classes` judges:
a linear head on the train references, unknown below the evidence that turns away 10% of dev
(cea.knn.unknown), scores from cea.evaluation.classification.open_set_scores.

Frozen rows encode each data set once and run the product's evaluation for every ratio and seed; trained
rows are read from `cea train --unknown-classes U --shots-seed S` run folders:

    OMP_NUM_THREADS=1 python bench/open_intent.py --datasets banking77,clinc150,stackoverflow \
        --runs 'bench/results/open-*'
    # a trained run: cea train --dataset stackoverflow --unknown-classes 0.75 --shots-seed 0 \
    #     --output bench/results/open-stackoverflow-u0.75-s0
    # --bundle-seed 0: also bundles of the known classes (threshold from held-out references, as cea bundle sets it)
    # --rates 0.05,0.1,0.15,0.2 --rejudge 'bench/results/open-*': frozen rows and the runs' saved models judged
    #     at each unknown rate (which rate the defaults should use)

Known classes are drawn by cea (seeds 0, 1, 2), not read from bolt-lab's fold lists; ADB's figures
(Zhang et al., AAAI 2021, BERT-base, 10 random draws) are printed beside them.

The trained runs' figures are records (``docs/records/open_intent.jsonl``): macro-F1 of each data set and
share known, mean of the draws, against ADB's.
"""

from __future__ import annotations

import argparse
import glob
import json
from pathlib import Path

import numpy as np

from cea.data import load_dataset
from cea.data.dataset import hide_classes
from cea.encoders import load_encoder
from cea.encoders.embeddings import encode
from cea.evaluation.classification import evaluate_encoder
from common import record, results

ADB = {  # accuracy, macro-F1 over known + unknown, at 25, 50, 75% known classes
    "banking77": {0.25: (78.85, 71.62), 0.5: (78.86, 80.90), 0.75: (81.08, 85.96)},
    "clinc150": {0.25: (87.59, 77.19), 0.5: (86.54, 85.05), 0.75: (86.32, 88.53)},
    "stackoverflow": {0.25: (86.72, 80.83), 0.5: (86.40, 85.83), 0.75: (82.78, 85.99)},
}
KEYS = ("open_accuracy", "open_macro_f1", "known_accuracy", "unknown_recall", "unknown_precision")


class Lookup:
    """The frozen encoder's embeddings, computed once per data set and looked up by text."""

    def __init__(self, model, texts):
        texts = list(dict.fromkeys(texts))
        self.table = dict(zip(texts, encode(model, texts)))

    def encode(self, texts, batch_size=64, convert_to_numpy=True):
        return np.array([self.table[t] for t in texts], np.float32)


def judged(model, ds, known: float, seed: int, rates) -> list[tuple[float, dict]]:
    """Open-set test scores of ``model`` on one draw of known classes, at each unknown rate (threshold on dev)."""
    opened, _ = hide_classes(ds, round(1 - known, 2), seed)
    queries = {s: (opened[s]["text"], opened[s]["label"].to_numpy()) for s in ("dev", "test")}
    return [
        (
            rate,
            evaluate_encoder(
                model,
                opened["train"]["text"],
                opened["train"]["label"].to_numpy(),
                queries,
                retrieval=(),
                keep_embeddings=(),
                linear=True,
                unknown_rate=rate,
            )["test"].open,
        )
        for rate in rates
    ]


def every_text(ds) -> list[str]:
    return [t for s in ("train", "dev", "test") for t in ds[s]["text"]]


def frozen(name: str, model_name: str, seeds, rates) -> list[dict]:
    ds = load_dataset(name)
    model = Lookup(load_encoder(model_name), every_text(ds))
    return [
        {"dataset": name, "known": known, "seed": seed, "model": "frozen" + tag(rate, rates), **scores}
        for known in (0.25, 0.5, 0.75)
        for seed in seeds
        for rate, scores in judged(model, ds, known, seed, rates)
    ]


def tag(rate: float, rates) -> str:
    return f", rate {rate:g}" if len(rates) > 1 else ""


def rejudged(patterns: list[str], rates) -> list[dict]:
    """Trained run folders judged again at each rate, from their saved models (one encoding per run)."""
    rows = []
    for folder in sorted(f for pattern in patterns for f in glob.glob(pattern)):
        if results(folder) is None:
            continue
        c = results(folder)["config"]
        ds = load_dataset(c["dataset"])
        model = Lookup(load_encoder(str(Path(folder) / "model")), every_text(ds))
        known = round(1 - c["unknown_classes"], 2)
        rows += [
            {
                "dataset": c["dataset"],
                "known": known,
                "seed": c["shots_seed"],
                "model": f"{c['objective']} {c['epochs']:g} epoch(s){tag(rate, rates)}",
                **scores,
            }
            for rate, scores in judged(model, ds, known, c["shots_seed"], rates)
        ]
        print(json.dumps(rows[-len(rates) :]), flush=True)
    return rows


def bundled(name: str, model_name: str, seed: int, rate: float, workdir: str) -> list[dict]:
    """The product path: a bundle of the known classes' train texts with ``--unknown-rate`` (its threshold set on
    held-out references, not on dev), asked for every test text."""
    import tempfile

    from cea.bundle import Bundle
    from cea.evaluation.classification import open_set_scores

    ds, rows = load_dataset(name), []
    for known in (0.25, 0.5, 0.75):
        opened, _ = hide_classes(ds, round(1 - known, 2), seed)
        with tempfile.TemporaryDirectory(dir=workdir) as tmp:
            bundle = Bundle.create(
                Path(tmp) / "b",
                model_name,
                list(opened["train"]["text"]),
                list(opened["train"]["label"]),
                progress=False,
                unknown_rate=rate,
            )
            answers = [p.label for p in bundle.predict(list(opened["test"]["text"]))]
            rows.append(
                {
                    "dataset": name,
                    "known": known,
                    "seed": seed,
                    "model": f"frozen, bundle --unknown-rate {rate:g}",
                    **open_set_scores(answers, opened["test"]["label"]),
                    "unknown_threshold": bundle.unknown_threshold,
                }
            )
    return rows


def trained(patterns: list[str]) -> list[dict]:
    rows = []
    for pattern in patterns:
        for folder in sorted(glob.glob(pattern)):
            r = results(folder)
            if r is None:
                continue
            c = r["config"]
            rows.append(
                {
                    "dataset": c["dataset"],
                    "known": round(1 - c["unknown_classes"], 2),
                    "seed": c["shots_seed"],
                    "model": f"{c['objective']} {c['epochs']:g} epoch(s), lr {c['lr']:g}",
                    "train_seconds": r["train_seconds"],
                    **{k: r["metrics"]["test"][k] for k in KEYS},
                }
            )
    return rows


def table(rows: list[dict]) -> str:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["model"], r["known"]), []).append(r)
    lines = [
        "| data set | known | model | seeds | accuracy | macro-F1 | known acc. | unknown recall | unknown prec. "
        "| ADB acc. / F1 |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (name, model, known), group in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1] != "frozen", kv[0][1])
    ):
        mean = {k: np.mean([g[k] for g in group]) for k in KEYS}
        adb = ADB.get(name, {}).get(known)
        f1 = (
            f"**{mean['open_macro_f1']:.2f}**"
            if adb and mean["open_macro_f1"] > adb[1]
            else f"{mean['open_macro_f1']:.2f}"
        )
        lines.append(
            f"| {name} | {known:.0%} | {model} | {len(group)} | {mean['open_accuracy']:.2f} | {f1} | "
            f"{mean['known_accuracy']:.2f} | {mean['unknown_recall']:.2f} | {mean['unknown_precision']:.2f} | "
            + (f"{adb[0]:.2f} / {adb[1]:.2f} |" if adb else "- |")
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--datasets", default="banking77,clinc150,stackoverflow")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--rate", type=float, default=0.1)
    parser.add_argument("--rates", help="several unknown rates, comma-separated (frozen and --rejudge rows)")
    parser.add_argument("--runs", nargs="*", default=[], help="glob patterns of cea train run folders")
    parser.add_argument(
        "--rejudge", nargs="*", default=[], help="run folders whose saved models are judged again at each of --rates"
    )
    parser.add_argument("--no-frozen", action="store_true")
    parser.add_argument("--bundle-seed", type=int, help="also build bundles of this draw (the product's calibration)")
    parser.add_argument("--workdir", default="/tmp")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    rates = [float(r) for r in args.rates.split(",")] if args.rates else [args.rate]
    rows = (
        []
        if args.no_frozen
        else [r for name in args.datasets.split(",") for r in frozen(name, args.model, seeds, rates)]
    )
    if args.bundle_seed is not None:
        rows += [
            r
            for name in args.datasets.split(",")
            for r in bundled(name, args.model, args.bundle_seed, args.rate, args.workdir)
        ]
    runs = trained(args.runs)
    rows += runs + rejudged(args.rejudge, rates)
    print(json.dumps(rows))
    print(table(rows))
    records(runs)


def records(runs: list[dict]) -> None:
    """The trained runs' figures as records: macro-F1 of each data set and share known, mean of the draws, against
    ADB's."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["dataset"], r["known"]), []).append(r)
    for (name, known), group in sorted(groups.items()):
        adb = ADB.get(name, {}).get(known)
        record(
            f"open intent macro-F1, {name}, {round(100 * known)} % known",
            round(float(np.mean([g["open_macro_f1"] for g in group])), 2),
            baseline=adb[1] if adb else None,
            unit=f"% macro-F1, {len(group)} draws",
            section="open-intent",
            baseline_is="ADB (BERT-base)",
            note=f"{group[0]['model']}; accuracy {np.mean([g['open_accuracy'] for g in group]):.2f}",
        )


if __name__ == "__main__":
    main()
