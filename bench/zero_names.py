"""Issue 90's zero: what answers best from the label names alone, before any annotation. A new Label Studio project
has its label config and its imported tasks, no labels: each label whose name is words has its name as its only
example (:func:`cea.data.label_names.name_text`), and the tasks are texts without labels.

    OMP_NUM_THREADS=1 python bench/zero_names.py banking77 clinc150 stackoverflow yahoo dbpedia219 \
        [--pools 16,256,512,2000]

all-MiniLM-L6-v2 frozen; each data set's test split judges (every class counts, named or not). Ways to answer:

- the bundle's classifier on the names (cea bundle's default, a linear head: what ``cea serve`` answers at zero);
- the nearest name (the baseline of issue 90's goal, "above a frozen encoder's nearest label name");
- either one centred: the mean of a pool's vectors (for each size of ``--pools``, train texts drawn with seed 0, their
  labels unread, as the texts a project imports and asks about) taken from names and queries before they are
  normalised again (:func:`cea.knn.names.nearest_names`, what ``cea serve`` answers before any annotation once
  :data:`cea.knn.names.MIN_ASKED` texts have been asked about). The direction every text of a domain shares says
  nothing of its class, and it outweighs the names' short texts.

Records (``docs/records/zero_names.jsonl``, section ``cold-start``): per data set, the nearest name centred on each
pool and the head on the names, each against the nearest name.
"""

from __future__ import annotations

import argparse

import numpy as np

from cea.bundle.examples import encode
from cea.data import load_dataset
from cea.data.label_names import name_text
from cea.encoders import load_encoder
from cea.knn.decision import Classifier
from cea.knn.names import nearest_names
from cea.knn.search import normalize
from common import accuracy, record, table

SECTION = "cold-start"


def head(names: np.ndarray, labels: np.ndarray, queries: np.ndarray, centre: np.ndarray | None) -> np.ndarray:
    """The label the bundle's head on the names gives each query, names and queries centred on ``centre``."""
    if centre is not None:
        names, queries = normalize(names - centre), normalize(queries - centre)
    return Classifier().answer(names, labels, queries).labels.astype(str)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="+")
    parser.add_argument(
        "--pools",
        default="16,256,512,2000",
        help="unlabelled train texts the centre is the mean of, comma-separated sizes",
    )
    args = parser.parse_args()

    pools = [int(size) for size in args.pools.split(",")]
    encoder = load_encoder("all-MiniLM-L6-v2", device="cpu")
    rows = []
    for name in args.datasets:
        ds = load_dataset(name)
        named = {label: text for label in sorted(set(ds["train"]["label"].astype(str))) if (text := name_text(label))}
        labels = np.array(list(named), dtype=str)
        names = encode(encoder, list(named.values()))
        queries, gold = encode(encoder, list(ds["test"]["text"])), ds["test"]["label"].astype(str).to_numpy()
        drawn = np.random.default_rng(0).permutation(len(ds["train"]))
        got = {
            "head": accuracy(head(names, labels, queries, None), gold),
            "nearest": accuracy(nearest_names(names, labels, queries, None)[0], gold),
        }
        share = f"{len(named)} of {ds['train']['label'].nunique()}"
        where = f"all-MiniLM-L6-v2 frozen, {share} labels named"
        for size in pools:
            centre = encode(encoder, [ds["train"]["text"].iloc[i] for i in drawn[:size]]).mean(0)
            got[f"nearest, centred on {size}"] = accuracy(nearest_names(names, labels, queries, centre)[0], gold)
            got[f"head, centred on {size}"] = accuracy(head(names, labels, queries, centre), gold)
            record(
                f"zero annotations: nearest label name centred on {size} unlabelled texts, {name}",
                got[f"nearest, centred on {size}"],
                baseline=got["nearest"],
                baseline_is="the nearest label name",
                unit="% test accuracy",
                section=SECTION,
                note=f"{where}; the head centred {got[f'head, centred on {size}']}",
            )
        rows.append([name, share, *got.values()])
        record(
            f"zero annotations: the bundle's head on the label names, {name}",
            got["head"],
            baseline=got["nearest"],
            baseline_is="the nearest label name",
            unit="% test accuracy",
            section=SECTION,
            note=f"{where}; the bundle's classifier fitted on the names alone",
        )
    table(["data set", "named", *got], rows)


if __name__ == "__main__":
    main()
