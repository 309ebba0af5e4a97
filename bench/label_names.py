"""Issue 16, label names as examples (:mod:`cea.data.label_names`): the frozen encoder's linear head (C = 10, the
bundle's default) with and without one example per label made of its name's words, on N examples per label
(samples 0-2, as ``cea train --shots N --shots-seed S`` draws them) and on the full train split, scored on test.

    OMP_NUM_THREADS=1 python bench/label_names.py banking77 clinc150 stackoverflow dbpedia219 yahoo 20ng trec50 trec6
    OMP_NUM_THREADS=1 python bench/label_names.py banking77 --full --model RUN/model    # another frozen encoder

Names are used as ``--label-names on`` uses them (every name that is words), so each set shows what they do even
where ``auto`` would leave them out; the ``auto`` column says what the default does.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from cea.data import load_dataset
from cea.data.dataset import few_shot
from cea.data.label_names import name_examples
from cea.encoders import load_encoder
from cea.evaluation.classification import encode
from cea.knn import fit_head
from cea.knn.search import normalize


def accuracy(pred, gold) -> float:
    return round(100 * float(np.mean(np.asarray(pred) == np.asarray(gold))), 2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--shots", type=int, default=8)
    parser.add_argument("--full", action="store_true", help="also the full train split")
    parser.add_argument("--out", default="bench/results/label_names.json")
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="the frozen encoder: catalog name or folder")
    args = parser.parse_args()
    model = load_encoder(args.model)
    rows = []
    for name in args.datasets:
        t0 = time.perf_counter()
        ds = load_dataset(name)
        test_x = normalize(encode(model, list(ds["test"]["text"])))
        test_y = ds["test"]["label"].to_numpy()
        names = name_examples(ds.labels, "on")
        names_x = normalize(encode(model, list(names["text"]))) if len(names) else np.zeros((0, test_x.shape[1]))
        samples = {f"{args.shots} per label, sample {s}": few_shot(ds["train"], args.shots, s) for s in (0, 1, 2)}
        if args.full:
            samples["full train"] = ds["train"]
        row = {"dataset": name, "labels": len(ds.labels), "names_are_words": len(names),
               "auto": "on" if len(name_examples(ds.labels, "auto")) else "off"}
        for what, frame in samples.items():
            x, y = normalize(encode(model, list(frame["text"]))), frame["label"].to_numpy()
            plain = accuracy(fit_head(x, y).predict(test_x), test_y)
            named = accuracy(fit_head(np.vstack([x, names_x]), np.concatenate([y, names["label"].to_numpy()]))
                             .predict(test_x), test_y) if len(names) else plain
            row[what] = [plain, named]
        few = [row[k] for k in samples if k != "full train"]
        row["mean"] = [round(float(np.mean([r[i] for r in few])), 2) for i in (0, 1)]
        row["seconds"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(row), flush=True)
        rows.append(row)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    print(f"| data set | labels | names that are words | auto | {args.shots}-shot head (mean of 3) | + names | gain |"
          + (" full train head | + names |" if args.full else "") + "\n|---|---:|---:|---|---:|---:|---:|"
          + ("---:|---:|" if args.full else ""))
    for r in rows:
        print(f"| {r['dataset']} | {r['labels']} | {r['names_are_words']} | {r['auto']} | {r['mean'][0]:.2f} | "
              f"{r['mean'][1]:.2f} | {r['mean'][1] - r['mean'][0]:+.2f} |"
              + (f" {r['full train'][0]:.2f} | {r['full train'][1]:.2f} |" if args.full else ""))


if __name__ == "__main__":
    main()
