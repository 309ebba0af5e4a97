"""Issue 64: long tails. ``cea fit`` on a long-tailed version of a catalog set, beside the frozen encoder with a
logistic regression (C chosen on dev; class weights none, and balanced).

The profile: study 003's imbalance (seeds/003, a class kept at a tenth, DBpedia's tail) taken to a long tail as Cui
et al. (CVPR 2019) build theirs: the classes in an order drawn with the seed, class i of C keeps a share
``(1 / RATIO) ** (i / (C - 1))`` of its train texts, at least one (cea.data.dataset.imbalance): all of them at the
head, one or two at the tail (RATIO 100). The set's own dev split is dropped (a dev cea carved rejoins train); dev is
carved from the long-tailed train as cea carves it for a user (10 %, a class's only example kept in train); test
stays whole (every class, as many texts as before), so rare classes are judged on as many texts as the others.

    OMP_NUM_THREADS=1 python bench/long_tail.py banking77 --seed 0 --budget 10m --out bench/results/long-tail
    OMP_NUM_THREADS=1 python bench/long_tail.py trec50 --ratio 1 --seed 0     # a set as it is (trec50's own tail)
    OMP_NUM_THREADS=1 python bench/long_tail.py banking77 --seed 0 --samplers  # cea train: P x K against shuffled
    python bench/long_tail.py banking77 --mean bench/results/long-tail/banking77-lt100-seed*.json  # seeds' mean

Both sides see the same folder (train.csv, test.csv) and the same carved dev; cea fit runs with its defaults (label
names as examples included), the baseline on the texts alone. Records (``docs/records/long_tail.jsonl``, section
``long-tail``; ``--no-record`` only prints): cea fit's test accuracy, macro-F1 and rare-class F1 (the macro-F1 of the
labels of fewer than 5 train texts, cea.evaluation.classification.scores) against the logistic regression's; the
balanced one's in the record (``balanced``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from common import CS, cea, record, timed

RATIO = 100  # --ratio: the head's share over the tail's; 1 keeps the set as it is
MODEL = "all-MiniLM-L6-v2"
FIGURES = (("accuracy", "test accuracy"), ("macro_f1", "test macro-F1"), ("rare_f1", "rare-class F1"))


def long_tailed(dataset: str, seed: int, folder: Path, ratio: float = RATIO) -> dict:
    """Write ``folder/train.csv`` (the long-tailed train) and ``folder/test.csv``; the train sizes it kept."""
    from cea.data import load_dataset
    from cea.data.dataset import imbalance

    ds = load_dataset(dataset)
    labels = sorted(set(ds["train"]["label"]))
    order = np.random.default_rng(seed).permutation(labels)
    shares = [(str(label), ratio ** (-i / (len(labels) - 1))) for i, label in enumerate(order)]
    train = pd.concat([ds["train"], ds["dev"]]) if any("dev carved" in n for n in ds.notes) else ds["train"]
    train = imbalance(train[["text", "label"]], shares, seed)  # a dev of the set's own is dropped; a carved one rejoins
    folder.mkdir(parents=True, exist_ok=True)
    train.to_csv(folder / "train.csv", index=False)
    ds["test"][["text", "label"]].to_csv(folder / "test.csv", index=False)
    counts = train["label"].value_counts()
    return {
        "train": len(train),
        "largest": int(counts.max()),
        "smallest": int(counts.min()),
        "under_5": int((counts < 5).sum()),
        "classes": len(labels),
        "test": len(ds["test"]),
    }


def fitted(c: float, weight: str | None, xs: np.ndarray, ys: np.ndarray):
    """A logistic regression of ``C`` ``c`` and class weights ``weight`` fitted on ``xs``, ``ys``."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, max_iter=3000, class_weight=weight).fit(xs, ys)


def logreg(folder: Path) -> dict:
    """The frozen encoder's last layer (mean pooling, unit length) and a logistic regression, C on dev by accuracy,
    refitted on train + dev, scored on test: class weights none and balanced."""
    from cea.data import load_dataset
    from cea.encoders import embed, load_encoder, num_layers
    from cea.evaluation.classification import rare_labels, scores
    from cea.knn.search import normalize

    ds = load_dataset(str(folder))
    model = load_encoder(MODEL)
    last = num_layers(model)
    x = {
        s: normalize(embed(model, list(ds[s]["text"]), [last], ["mean"], progress=False)[(last, "mean")])
        for s in ("train", "dev", "test")
    }
    y = {s: ds[s]["label"].astype(str).to_numpy() for s in x}
    rare = rare_labels(y["train"])
    out = {}
    for weight in (None, "balanced"):
        dev = {c: float(np.mean(fitted(c, weight, x["train"], y["train"]).predict(x["dev"]) == y["dev"])) for c in CS}
        c = max(dev, key=dev.get)
        clf = fitted(c, weight, np.vstack([x["train"], x["dev"]]), np.concatenate([y["train"], y["dev"]]))
        out[weight or "none"] = {
            "C": c,
            "dev_accuracy": round(100 * dev[c], 2),
            **scores(clf.predict(x["test"]), y["test"], rare),
        }
    return out


def samplers(folder: Path, out: Path, name: str, seed: int) -> dict:
    """``cea train`` (its defaults: softmax, label names) on the folder with P x K batches (a class of fewer than K
    texts bringing all it has) and with shuffled ones: the test scores of its kNN predictions (``predictions.json``)."""
    from cea.data import load_dataset
    from cea.evaluation.classification import rare_labels, scores

    rare = rare_labels(load_dataset(str(folder))["train"]["label"])
    got = {}
    for sampler in ("pk", "shuffle"):
        run = out / f"{name}-train-{sampler}"
        seconds = timed(cea("train", "--dataset", folder, "--sampler", sampler, "--seed", seed, "--output", run))
        predictions = json.loads((run / "predictions.json").read_text())
        got[sampler] = {**scores(predictions["predicted"], predictions["gold"], rare), "seconds": seconds}
    return got


def means(paths: list[str], command: str, no_record: bool) -> None:
    """Records of the mean over the runs ``paths`` (the ``NAME.json`` each run wrote; one set and ratio, several
    seeds): cea fit's figures against the logistic regression's, the balanced one's and each seed's in the note."""
    runs = [json.loads(Path(p).read_text()) for p in paths]
    seeds = ", ".join(str(r["seed"]) for r in runs)
    where = f"{runs[0]['dataset']} long-tailed (ratio {RATIO}), mean of seeds {seeds}"
    for key, shown in FIGURES:
        fit, base, balanced = (
            [r["fit"]["test"][key] for r in runs],
            [r["logreg"]["none"][key] for r in runs],
            [r["logreg"]["balanced"][key] for r in runs],
        )
        print(where, shown, fit, base, balanced)
        if not no_record:
            record(
                f"cea fit {shown}, {where}",
                round(float(np.mean(fit)), 2),
                baseline=round(float(np.mean(base)), 2),
                unit=f"% {shown}",
                command=command,
                section="long-tail",
                baseline_is="frozen + logistic regression, C on dev",
                note=f"balanced weights {np.mean(balanced):.2f}; seeds " + " / ".join(f"{v:.2f}" for v in fit),
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", help="a catalog name (banking77, clinc150)")
    parser.add_argument("--seed", type=int, default=0, help="the profile's draws and cea fit --seed")
    parser.add_argument("--budget", default="10m", help="cea fit --budget")
    parser.add_argument("--ratio", type=float, default=RATIO, help="the head's share over the tail's (1: as it is)")
    parser.add_argument("--out", default="bench/results/long-tail")
    parser.add_argument(
        "--samplers", action="store_true", help="instead of fit: cea train with P x K batches against shuffled ones"
    )
    parser.add_argument("--no-record", action="store_true", help="print the figures, write no record")
    parser.add_argument(
        "--mean",
        nargs="+",
        metavar="RUN_JSON",
        help="instead of a run: records of the mean of these runs (OUT/NAME.json, one set, several seeds)",
    )
    args = parser.parse_args()
    if args.mean:
        return means(args.mean, f"python bench/long_tail.py {args.dataset} --mean OUT/*.json", args.no_record)
    name = f"{args.dataset}-lt{args.ratio:g}-seed{args.seed}"
    out = Path(args.out)
    folder = out / name
    run = {
        "dataset": args.dataset,
        "seed": args.seed,
        "profile": long_tailed(args.dataset, args.seed, folder, args.ratio),
    }
    print(json.dumps(run["profile"]), flush=True)
    p = run["profile"]
    where = (
        f"{args.dataset} long-tailed (ratio {args.ratio:g})" if args.ratio != 1 else f"{args.dataset} as it is"
    ) + f", seed {args.seed}"
    command = f"python bench/long_tail.py {args.dataset} --ratio {args.ratio:g} --seed {args.seed}"
    if args.samplers:
        got = samplers(folder, out, name, args.seed)
        print(json.dumps(got, indent=1))
        for key, shown in FIGURES if not args.no_record else ():
            record(
                f"cea train P x K batches, {shown}, {where}",
                got["pk"][key],
                baseline=got["shuffle"][key],
                unit=f"% {shown}",
                command=command + " --samplers",
                section="long-tail",
                baseline_is="shuffled batches",
                note="cea train defaults (softmax), kNN on train; "
                f"{round(got['pk']['seconds'])} s and {round(got['shuffle']['seconds'])} s",
            )
        return
    run["fit_wall_seconds"] = timed(
        cea(
            "fit",
            folder,
            "-o",
            out / f"{name}-bundle",
            "--work",
            out / f"{name}-fit",
            "--budget",
            args.budget,
            "--seed",
            args.seed,
        )
    )
    run["fit"] = json.loads((out / f"{name}-fit" / "fit.json").read_text())
    run["logreg"] = logreg(folder)
    (out / f"{name}.json").write_text(json.dumps(run, indent=1))
    fit, base = run["fit"], run["logreg"]
    print(
        json.dumps(
            {
                "fit": {k: fit[k] for k in ("chosen", "layer", "classifier", "test", "training", "seconds")},
                "logreg": base,
            },
            indent=1,
        )
    )
    if args.no_record:
        return
    for key, shown in FIGURES:
        record(
            f"cea fit {shown}, {where}",
            fit["test"][key],
            baseline=base["none"][key],
            unit=f"% {shown}",
            command=f"{command} --budget {args.budget}",
            section="long-tail",
            baseline_is="frozen + logistic regression, C on dev",
            balanced=base["balanced"][key],
            note=f"balanced weights {base['balanced'][key]}; {p['train']} train texts, {p['largest']} to "
            f"{p['smallest']} a class, {p['under_5']} under 5; fit: {fit['chosen']}, {round(fit['seconds'])} s",
        )


if __name__ == "__main__":
    main()
