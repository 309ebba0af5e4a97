"""The classifier on top of embeddings, and the baselines of the figures page.

``judge``: the same embeddings classified by kNN (k = 5; k and vote chosen on dev), by a logistic regression (C
chosen on dev) and by the two mixed (``a * head + (1 - a) * kNN`` class probabilities, ``a`` from 0, 0.25, ..., 1 on
dev), for the frozen encoder and trained ones. Every classifier is chosen on dev with train as references or
training data, then refitted (or given references) on train + dev and scored on test. With ``--shots N`` train
keeps N examples per label (``--shots-seed``) and is the only training data and reference set: dev chooses k, the
vote and C, and is not added back. The frozen encoder's logistic regression is the baseline "frozen + logistic
regression" of the figures page.

``names``: the frozen encoder's linear head (C = 10, the bundle's default) with and without one example per label
made of its name's words (:mod:`cea.data.label_names`, as ``--label-names on``), on N examples per label (samples
0-2, as ``cea train --shots N --shots-seed S`` draws them) and, with ``--full``, on the full train split; the
``auto`` column says what the default does.

``weights``: the bundle's linear head (C = 10) fitted on train and scored on test with each class's examples weighing
1 (unweighted), ``n / (classes x count)`` (scikit-learn's ``balanced``) or ``median / count`` where a class has fewer
than the median class (:func:`cea.knn.head.class_weights`, the default), for the frozen encoder or a trained one.

    OMP_NUM_THREADS=2 python bench/heads.py judge banking77 all-MiniLM-L6-v2 RUN_A/model RUN_B/model
    OMP_NUM_THREADS=2 python bench/heads.py judge banking77 all-MiniLM-L6-v2 --shots 8 --shots-seed 0
    OMP_NUM_THREADS=1 python bench/heads.py names banking77 clinc150 stackoverflow dbpedia219 yahoo 20ng trec50 --full
    OMP_NUM_THREADS=1 python bench/heads.py names banking77 --full --model RUN/model    # another frozen encoder
    OMP_NUM_THREADS=1 python bench/heads.py weights trec6 trec50 banking77 stackoverflow dbpedia219 [--model RUN/model]

``choice``: for each ``cea fit`` work folder, its frozen and trained candidates' embeddings (the probe's cache; the
trained model encoding them) with the classifier chosen on dev two ways, both scored on test with train + dev as
references: as ``cea fit`` chose before issue 59 (C on an unweighted head, the vote's share on the weighted head it
ships) and as now (:meth:`cea.knn.decision.Classifier.choose`: every setting judged as it ships). One record each.

    OMP_NUM_THREADS=1 python bench/heads.py choice trec50=WORK/trec50-fit banking77=WORK/banking77-fit

``small-dev``: the frozen encoder on N annotations a class (samples 0-2, as ``--shots N --shots-seed S`` draws them;
``full``: the train split, once), split as ``cea fit`` splits them when it is given no dev (a tenth carved,
:func:`cea.data.dataset.complete_splits`; ``full`` keeps the data set's dev; the label names added to train), the
classifier chosen on that dev (:meth:`cea.knn.decision.Classifier.choose`, and chosen freely: ``sure=0``) against the
bundle's default (a linear head, C = 10, no vote), each with train + dev as references, scored on the data set's
test split. What a background fit in ``cea serve`` chooses with, at a few annotations a class.

    OMP_NUM_THREADS=1 python bench/heads.py small-dev banking77 clinc150 stackoverflow --shots 2,4,8,16,full
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from common import accuracy, accuracy_f1, encoded, logreg_on_dev, record, save, table

MIX = (0.0, 0.25, 0.5, 0.75, 1.0)


def judge(model_path: str, ds, few: bool = False) -> dict:
    from sklearn.linear_model import LogisticRegression

    from cea.encoders import load_encoder
    from cea.knn import Classifier, KNNClassifier

    x, y = encoded(load_encoder(model_path), {s: ds[s] for s in ("train", "dev", "test")})
    both_x, both_y = (
        (x["train"], y["train"]) if few else (np.vstack([x["train"], x["dev"]]), np.concatenate([y["train"], y["dev"]]))
    )
    row = {"model": model_path}
    row["knn-5"] = accuracy_f1(KNNClassifier(5).fit(both_x, both_y).predict(x["test"]), y["test"])
    vote, _ = Classifier.choose(x["train"], y["train"], x["dev"], y["dev"], kinds=("knn",))
    knn = KNNClassifier(vote.k, weights=vote.weights)
    row["knn, k and vote on dev"] = (
        accuracy_f1(knn.fit(both_x, both_y).predict(x["test"]), y["test"]) + f" (k={vote.k}, {vote.weights})"
    )
    small, c, _ = logreg_on_dev(x, y, refit=False)  # C on dev, fitted on train
    t0 = time.perf_counter()
    head = LogisticRegression(C=c, max_iter=3000).fit(both_x, both_y)
    row["logreg, C on dev"] = (
        accuracy_f1(head.predict(x["test"]), y["test"]) + f" (C={c:g}, fit {time.perf_counter() - t0:.1f} s)"
    )
    # the head's and kNN's class probabilities mixed, with a on dev (train-only fits)
    knn.fit(x["train"], y["train"])
    mix = {
        a: np.mean(
            small.classes_[(a * small.predict_proba(x["dev"]) + (1 - a) * knn.predict_proba(x["dev"])).argmax(1)]
            == y["dev"]
        )
        for a in MIX
    }
    a = max(mix, key=mix.get)
    knn.fit(both_x, both_y)
    mixed = head.classes_[(a * head.predict_proba(x["test"]) + (1 - a) * knn.predict_proba(x["test"])).argmax(1)]
    row["mixed, a on dev"] = accuracy_f1(mixed, y["test"]) + f" (a={a:g})"
    return row


def judge_main(args) -> None:
    from cea.data import load_dataset
    from cea.data.dataset import subsample

    ds = load_dataset(args.dataset)
    if args.shots:
        ds = subsample(ds, args.shots, seed=args.shots_seed)
    rows = [judge(m, ds, few=bool(args.shots)) for m in args.models]
    print(json.dumps(rows, indent=1))
    keys = [k for k in rows[0] if k != "model"]
    table(["model", *keys], [[r["model"], *(r[k] for k in keys)] for r in rows])


def names_main(args) -> None:
    from cea.data import load_dataset
    from cea.data.dataset import few_shot
    from cea.data.label_names import name_examples
    from cea.encoders import load_encoder
    from cea.knn import fit_head

    model = load_encoder(args.model)
    rows = []
    for name in args.datasets:
        t0 = time.perf_counter()
        ds = load_dataset(name)
        names = name_examples(ds.labels, "on")
        samples = {f"{args.shots} per label, sample {s}": few_shot(ds["train"], args.shots, s) for s in (0, 1, 2)}
        if args.full:
            samples["full train"] = ds["train"]
        x, y = encoded(model, {"test": ds["test"], **({"names": names} if len(names) else {}), **samples})
        names_x = x.get("names", np.zeros((0, x["test"].shape[1])))
        names_y = y.get("names", np.zeros(0))
        row = {
            "dataset": name,
            "labels": len(ds.labels),
            "names_are_words": len(names),
            "auto": "on" if len(name_examples(ds.labels, "auto")) else "off",
        }
        for what in samples:
            plain = accuracy(fit_head(x[what], y[what]).predict(x["test"]), y["test"])
            named = (
                accuracy(
                    fit_head(np.vstack([x[what], names_x]), np.concatenate([y[what], names_y])).predict(x["test"]),
                    y["test"],
                )
                if len(names)
                else plain
            )
            row[what] = [plain, named]
        few = [row[k] for k in samples if k != "full train"]
        row["mean"] = [round(float(np.mean([r[i] for r in few])), 2) for i in (0, 1)]
        row["seconds"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(row), flush=True)
        rows.append(row)
    save(args.out, rows, indent=1)
    header = [
        "data set",
        "labels",
        "names that are words",
        "auto",
        f"{args.shots}-shot head (mean of 3)",
        "+ names",
        "gain",
    ] + (["full train head", "+ names"] if args.full else [])
    table(
        header,
        [
            [
                r["dataset"],
                r["labels"],
                r["names_are_words"],
                r["auto"],
                f"{r['mean'][0]:.2f}",
                f"{r['mean'][1]:.2f}",
                f"{r['mean'][1] - r['mean'][0]:+.2f}",
            ]
            + ([f"{r['full train'][0]:.2f}", f"{r['full train'][1]:.2f}"] if args.full else [])
            for r in rows
        ],
        left=4,
    )


def weights_main(args) -> None:
    from cea.data import load_dataset
    from cea.encoders import load_encoder
    from cea.knn.head import fit_head

    model = load_encoder(args.model)
    rows = []
    for name in args.datasets:
        t0 = time.perf_counter()
        ds = load_dataset(name)
        x, y = encoded(model, {"train": ds["train"], "test": ds["test"]})
        _, counts = np.unique(y["train"].astype(str), return_counts=True)
        row = {
            "dataset": name,
            "model": args.model,
            "texts": len(y["train"]),
            "classes": len(counts),
            "counts": [int(counts.min()), float(np.median(counts)), int(counts.max())],
        }
        for rule in ("unweighted", "balanced", "median"):
            if rule == "balanced":  # scikit-learn's own rule, beside the head's
                from sklearn.linear_model import LogisticRegression

                head = LogisticRegression(C=10.0, max_iter=3000, class_weight="balanced").fit(x["train"], y["train"])
            else:
                head = fit_head(x["train"], y["train"], class_weight=None if rule == "unweighted" else rule)
            row[rule] = accuracy_f1(head.predict(x["test"]), y["test"])
        row["seconds"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(row), flush=True)
        rows.append(row)
    save(args.out, rows, indent=1)
    table(
        [
            "data set",
            "train texts",
            "classes",
            "texts a class: min / median / max",
            "unweighted",
            "balanced",
            "median (default)",
        ],
        [
            [
                r["dataset"],
                r["texts"],
                r["classes"],
                " / ".join(f"{c:g}" for c in r["counts"]),
                r["unweighted"],
                r["balanced"],
                r["median"],
            ]
            for r in rows
        ],
        left=1,
    )


def choice_main(args) -> None:
    from cea.data import load_dataset
    from cea.data.label_names import with_label_names
    from cea.encoders import embed, load_encoder
    from cea.encoders.embeddings import encode
    from cea.knn import Classifier

    def before(x, y):  # cea fit before issue 59: the vote and C on an unweighted head, then the share on a weighted one
        _, plain = Classifier.choose(x["train"], y["train"], x["dev"], y["dev"], class_weight=None, shares=(0.0,))
        spec, _ = Classifier.choose(
            x["train"],
            y["train"],
            x["dev"],
            y["dev"],
            ks=(plain["knn"]["k"],),
            weights=(plain["knn"]["weights"],),
            Cs=(plain["linear"]["C"],),
        )
        return spec

    def now(x, y):
        return Classifier.choose(x["train"], y["train"], x["dev"], y["dev"])[0]

    rows = []
    for pair in args.works:
        name, work = pair.split("=", 1)
        fit = json.loads((Path(work) / "fit.json").read_text())
        ds = load_dataset(name)
        frames = {"train": with_label_names(ds["train"], "auto"), "dev": ds["dev"], "test": ds["test"]}
        y = {s: f["label"].to_numpy().astype(str) for s, f in frames.items()}
        model = load_encoder(fit["model"])
        model.max_seq_length = fit["max_seq_length"]
        key = (fit["layer"], "mean")
        states = {
            "frozen": {
                s: embed(model, list(f["text"]), [fit["layer"]], ["mean"], progress=False)[key]
                for s, f in frames.items()
            }
        }
        if (Path(work) / "train" / "model").exists():
            tuned = load_encoder(str(Path(work) / "train" / "model"))
            states["trained"] = {s: encode(tuned, f["text"]) for s, f in frames.items()}
        for state, x in states.items():
            row = {"dataset": Path(name).name, "state": state}
            refs, labels = np.vstack([x["train"], x["dev"]]), np.concatenate([y["train"], y["dev"]])
            for how, choose in (("before", before), ("now", now)):
                spec = choose(x, y)
                row[how] = accuracy(spec.answer(refs, labels, x["test"]).labels.astype(str), y["test"])
                row[f"{how} classifier"] = (
                    f"{spec.kind} C={spec.C:g} share={spec.knn_share:g} k={spec.k} {spec.weights}"
                )
            print(json.dumps(row), flush=True)
            rows.append(row)
            if not args.no_record:
                record(
                    f"the classifier chosen as it ships, {row['dataset']}, {state}",
                    row["now"],
                    baseline=row["before"],
                    unit="% test accuracy",
                    section="classifier",
                    baseline_is="chosen as before (C unweighted)",
                    command=f"python bench/heads.py choice {row['dataset']}=WORK",
                    note=row["now classifier"],
                )
    table(
        ["data set", "encoder", "before: C on an unweighted head", "now: as it ships", "now"],
        [[r["dataset"], r["state"], r["before"], r["now"], r["now classifier"]] for r in rows],
        left=2,
    )


def setting(spec) -> str:
    """A classifier in a few words: ``C=10``, ``C=1, 0.5 kNN k=20`` or ``kNN k=3``."""
    if spec.kind == "knn":
        return f"kNN k={spec.k}"
    return f"C={spec.C:g}" + (f", {spec.knn_share:g} kNN k={spec.k}" if spec.knn_share else "")


def small_dev_main(args) -> None:
    from cea.data import load_dataset
    from cea.data.dataset import complete_splits, few_shot
    from cea.data.label_names import with_label_names
    from cea.encoders import load_encoder
    from cea.knn import Classifier

    model = load_encoder(args.model)
    shots = args.shots.split(",")
    ways = {
        "default": lambda x, y: Classifier(),
        "chosen freely": lambda x, y: Classifier.choose(x["train"], y["train"], x["dev"], y["dev"], sure=0)[0],
        "chosen": lambda x, y: Classifier.choose(x["train"], y["train"], x["dev"], y["dev"])[0],
    }
    rows = []
    for name in args.datasets:
        ds = load_dataset(name)
        samples = {}
        for n in shots:
            for seed in (0,) if n == "full" else (0, 1, 2):
                given = {
                    "train": ds["train"] if n == "full" else few_shot(ds["train"], int(n), seed),
                    "test": ds["test"],
                    **({"dev": ds["dev"]} if n == "full" and "dev" in ds.splits else {}),
                }
                splits = complete_splits(given, [])
                samples[n, seed] = {"train": with_label_names(splits["train"], "auto"), "dev": splits["dev"]}
        texts = sorted({t for sample in samples.values() for f in sample.values() for t in f["text"]})
        x, _ = encoded(model, {"all": pd.DataFrame({"text": texts, "label": texts}), "test": ds["test"]})
        row_of = {t: i for i, t in enumerate(texts)}
        gold = ds["test"]["label"].astype(str).to_numpy()
        for n in shots:
            got, chose, dev = {way: [] for way in ways}, [], []
            for (at, _), part in samples.items():
                if at != n:
                    continue
                vec = {s: x["all"][[row_of[t] for t in f["text"]]] for s, f in part.items()}
                y = {s: f["label"].astype(str).to_numpy() for s, f in part.items()}
                refs, labels = np.vstack([vec["train"], vec["dev"]]), np.concatenate([y["train"], y["dev"]])
                for way, made in ways.items():
                    spec = made(vec, y)
                    got[way].append(accuracy(spec.answer(refs, labels, x["test"]).labels.astype(str), gold))
                chose.append(setting(spec))
                dev.append(len(part["dev"]))
            mean = {way: round(float(np.mean(v)), 2) for way, v in got.items()}
            row = {"dataset": name, "shots": n, "dev": dev, **mean, "settings": chose, "each": got}
            print(json.dumps(row), flush=True)
            rows.append(row)
            which = "the train split" if n == "full" else f"{n} a class"
            record(
                f"the classifier chosen on dev against the default, {name}, {which}",
                mean["chosen"],
                baseline=mean["default"],
                unit="% test accuracy",
                section="classifier",
                baseline_is="the default (linear head, C=10, no vote)",
                note=f"{args.model} frozen, {'samples 0-2, ' if n != 'full' else ''}dev of "
                f"{'/'.join(map(str, dev))}; chosen freely {mean['chosen freely']}; chose "
                + ", ".join(f"{how} ({count})" for how, count in Counter(chose).items()),
            )
    table(
        ["data set", "a class", "dev texts", *ways],
        [[r["dataset"], r["shots"], "/".join(map(str, r["dev"])), *(r[way] for way in ways)] for r in rows],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    j = sub.add_parser("judge", help="kNN, logistic regression and the two mixed, chosen on dev")
    j.add_argument("dataset")
    j.add_argument("models", nargs="+", help="catalog names or model folders (RUN/model)")
    j.add_argument("--shots", type=int)
    j.add_argument("--shots-seed", type=int, default=0)
    n = sub.add_parser("names", help="the frozen head with and without the label names")
    n.add_argument("datasets", nargs="+")
    n.add_argument("--shots", type=int, default=8)
    n.add_argument("--full", action="store_true", help="also the full train split")
    n.add_argument("--out", default="label_names.json", help="file name under bench/results")
    n.add_argument("--model", default="all-MiniLM-L6-v2", help="the frozen encoder: catalog name or folder")
    w = sub.add_parser("weights", help="the head with its classes weighed three ways")
    w.add_argument("datasets", nargs="+")
    w.add_argument("--out", default="head_weights.json", help="file name under bench/results")
    w.add_argument("--model", default="all-MiniLM-L6-v2", help="catalog name or folder (RUN/model)")
    c = sub.add_parser("choice", help="the classifier chosen on dev as before issue 59 and as it ships")
    c.add_argument("works", nargs="+", help="DATASET=WORK: a cea fit work folder and its data set")
    c.add_argument("--no-record", action="store_true", help="print the figures, write no record")
    d = sub.add_parser("small-dev", help="the classifier chosen on a few annotations' dev against the default")
    d.add_argument("datasets", nargs="+")
    d.add_argument("--shots", default="2,4,8,16,full", help="annotations a class (full: the train split)")
    d.add_argument("--model", default="all-MiniLM-L6-v2", help="the frozen encoder: catalog name or folder")
    args = parser.parse_args()
    {
        "judge": judge_main,
        "names": names_main,
        "weights": weights_main,
        "choice": choice_main,
        "small-dev": small_dev_main,
    }[args.command](args)


if __name__ == "__main__":
    main()
