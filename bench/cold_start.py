"""Issue 90: a bundle started from its label names alone (a new Label Studio project), and whether the name examples
should leave once a class has annotations of its own.

banking77 and clinc150 (their test splits judge), all-MiniLM-L6-v2 frozen (:func:`common.minilm_splits`). Each label
whose name is words (:func:`cea.data.label_names.name_text`: ``lost_or_stolen_card`` -> "lost or stolen card") has
its name as its first example, as ``cea serve`` gives a Choice of the project's label config. Then ``n`` gold-labelled
train texts a class (``--shots``: 1, 2, 4, 8, 16; ``--seeds``), as an annotator gives them. The bundle's classifier
(:class:`cea.knn.decision.Classifier`, cea bundle's default: a linear head) is fitted on the names and the texts, or
on the texts alone (the names left once the class has n annotations). At n = 0 the head on the names alone stands
against a frozen encoder's nearest label name.

    OMP_NUM_THREADS=1 python bench/cold_start.py banking77 clinc150

Records (``docs/records/cold_start.jsonl``): per data set, zero annotations (the bundle against the nearest label
name) and each n (names kept against names gone), means over the seeds.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from cea.bundle.examples import encode
from cea.data import load_dataset
from cea.data.label_names import name_text
from cea.encoders import load_encoder
from cea.knn.decision import Classifier
from common import accuracy, minilm_splits, record, table

SHOTS = (0, 1, 2, 4, 8, 16)


def head_accuracy(x: np.ndarray, y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray) -> float:
    """Test accuracy of the bundle's default classifier fitted on ``x``, ``y`` (its head's most probable class)."""
    head = Classifier().fit(x, y)
    return accuracy(head.classes[head.predict_proba(test_x).argmax(1)], test_y)


def draw(y: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` rows a class of ``y`` (all where it has fewer), drawn with ``seed``."""
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.permutation(np.flatnonzero(y == label))[:n] for label in np.unique(y)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--shots", default=",".join(map(str, SHOTS)), help="annotations a class, comma-separated")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    model = load_encoder("all-MiniLM-L6-v2", device="cpu")
    for name in args.datasets:
        ds = load_dataset(name)
        x = minilm_splits(ds, name)
        train_y, test_y = ds["train"]["label"].to_numpy(dtype=str), ds["test"]["label"].to_numpy(dtype=str)
        named = {label: text for label in sorted(set(train_y)) if (text := name_text(label))}
        names_x, names_y = encode(model, list(named.values())), np.array(list(named), dtype=str)
        shots = [int(n) for n in args.shots.split(",")]
        if 0 in shots:
            nearest = accuracy(names_y[(x["test"] @ names_x.T).argmax(1)], test_y)
            zero = head_accuracy(names_x, names_y, x["test"], test_y)
            print(
                f"{name}: {len(named)} of {len(set(train_y))} labels named; 0 annotations: the bundle {zero}, "
                f"the nearest label name {nearest}",
                flush=True,
            )
            record(
                f"cold start: 0 annotations, {name}",
                zero,
                baseline=nearest,
                unit="% accuracy",
                section="cold-start",
                baseline_is="nearest label name",
                note=f"{len(named)} of {len(set(train_y))} labels named, MiniLM",
            )
        rows = []
        for n in (n for n in shots if n):
            kept, gone = [], []
            for seed in seeds:
                rows_drawn = draw(train_y, n, seed)
                shots_x, shots_y = x["train"][rows_drawn], train_y[rows_drawn]
                gone.append(head_accuracy(shots_x, shots_y, x["test"], test_y))
                kept.append(
                    head_accuracy(np.vstack([shots_x, names_x]), np.concatenate([shots_y, names_y]), x["test"], test_y)
                )
            row = [n, round(statistics.mean(kept), 2), round(statistics.mean(gone), 2)]
            print(f"{name}: {n} a class, names kept {row[1]}, names gone {row[2]}", flush=True)
            record(
                f"cold start: names kept, {n} annotations a class, {name}",
                row[1],
                baseline=row[2],
                unit="% accuracy",
                section="cold-start",
                baseline_is="names gone",
                note=f"mean of seeds {args.seeds}, MiniLM frozen",
            )
            rows.append(row)
        table(["annotations a class", "names kept", "names gone"], rows)


if __name__ == "__main__":
    main()
