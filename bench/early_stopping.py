"""Issue 33: the patience of early stopping, measured on the default objective's dev curves.

One run per data set and seed trains `cea train`'s defaults to their epoch cap without stopping (``patience=0``),
judged as the defaults judge (every half epoch, or after twice the dev texts trained) by the trained head's dev
accuracy, keeping a copy of the encoder's weights at each judgement. Each stopping rule (patience P from epoch M:
judgements before M epochs do not count; stop after P judgements without a better dev figure, keep the best; and
the rule before early stopping: the cap, the last weights) is then replayed on the recorded dev curve, and the
weights it keeps are scored on test as `cea train` and a bundle score them (the bundle's head: a logistic
regression on the trained embeddings of the training texts; kNN-5). Time: the run's own wall clock at the judgement
where the rule stops, as a share of the whole run's (judgements included), measured in the same run.

    OMP_NUM_THREADS=1 python bench/early_stopping.py DATASET [--shots 8] --seed S --output DIR
    python bench/early_stopping.py --table DIR...        # the table over finished runs

DATASET: a catalog name or a folder (bench/heldout_sets.py writes HWU64 and MCID). Few-shot samples train with
``--shots-seed S --seed S`` (as bench/runs.py).

``--table`` records the default rule's figures (``docs/records/early_stopping.jsonl``): the share of the run
to the stop, and the test head it keeps against the cap's.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from cea.defaults import PATIENCE
from common import record

PATIENCES = (1, 2, 3, 4, 6)
FLOORS = (0, 1, 2, 3)  # epochs before the first judgement that counts


def replay(curve: list[float], epochs: list[float], patience: int | None, floor: float = 0) -> tuple[int, int]:
    """(kept index, stop index) of a rule on a dev ``curve`` judged at ``epochs``: judgements before ``floor`` epochs
    do not count (the last one before it stands in where none is after); ``patience`` None runs to the end and keeps
    the last."""
    if patience is None:
        return len(curve) - 1, len(curve) - 1
    first = next((i for i, e in enumerate(epochs) if e >= floor - 1e-6), len(curve) - 1)
    best, waited = first, 0
    for i in range(first + 1, len(curve)):
        if curve[i] > curve[best]:
            best, waited = i, 0
        else:
            waited += 1
            if waited >= patience:
                return best, i
    return best, len(curve) - 1


def run(dataset: str, shots: int | None, seed: int, output: Path) -> dict:
    from transformers import TrainerCallback

    from cea.data import load_dataset
    from cea.evaluation.classification import evaluate_encoder
    from cea.training import TrainConfig, train
    from cea.training.config import with_defaults
    from cea.training.tasks import training_data

    snapshots, clock = [], []

    class Keep(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_evaluate(self, args, state, control, model=None, **kwargs):
            clock.append(time.perf_counter() - self.start)
            snapshots.append({k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()})

    config = TrainConfig(
        dataset=dataset, shots=shots, shots_seed=seed, seed=seed, patience=0, select="best", output=str(output / "run")
    )
    ds = load_dataset(dataset)
    result = train(config, progress="lines", callbacks=[Keep()], data=ds)
    curve = [h["dev_head_accuracy"] for h in result["dev_history"]]
    epochs = [h["epoch"] for h in result["dev_history"]]
    train_data = training_data(with_defaults(config, ds), ds)  # the run's training texts: the references
    refs, names = list(train_data.train_dataset["text"]), train_data.labels
    ref_labels = [names[i] for i in train_data.label_ids]
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(output / "run" / "model"), device="cpu")
    scored, rows = {}, {}
    rules = [("cap, last", None, 0), *((f"patience {p}, from epoch {m}", p, m) for m in FLOORS for p in PATIENCES)]
    for name, patience, floor in rules:
        kept, stop = replay(curve, epochs, patience, floor)
        if kept not in scored:
            model.load_state_dict(snapshots[kept])
            test = evaluate_encoder(
                model,
                refs,
                ref_labels,
                {"test": (ds["test"]["text"], ds["test"]["label"])},
                k=5,
                retrieval=(),
                linear=True,
            )["test"].metrics()
            scored[kept] = {"head": test["linear_accuracy"], "knn": test["knn_accuracy"]}
        rows[name] = {
            **scored[kept],
            "kept": kept,
            "stopped": stop,
            "time_share": round(clock[stop] / clock[-1], 3),
            "dev": curve[kept],
        }
    out = {
        "dataset": dataset,
        "shots": shots,
        "seed": seed,
        "curve": curve,
        "epochs": epochs,
        "seconds": clock,
        "train_seconds": result["train_seconds"],
        "steps": [h["steps"] for h in result["dev_history"]],
        "rules": rows,
    }
    (output / "early_stopping.json").write_text(json.dumps(out, indent=1))
    return out


def table(folders: list[str]) -> None:
    runs = [
        json.loads((Path(f) / "early_stopping.json").read_text())
        for f in folders
        if (Path(f) / "early_stopping.json").exists()
    ]
    groups = {}
    for r in runs:
        groups.setdefault((Path(r["dataset"]).name, r["shots"]), []).append(r)
    rules = list(runs[0]["rules"])
    names = [
        f"{name}{f', {shots} a label' if shots else ''} ({len(rs)})" for (name, shots), rs in sorted(groups.items())
    ]
    print("| rule: test head / kNN-5 (time share) | " + " | ".join(names) + " | mean change of the head |")
    print("|---|" + "---|" * (len(names) + 1))
    for rule in rules:
        cells, change = [], []
        for _, rs in sorted(groups.items()):
            head = np.mean([r["rules"][rule]["head"] for r in rs])
            knn = np.mean([r["rules"][rule]["knn"] for r in rs])
            share = np.mean([r["rules"][rule]["time_share"] for r in rs])
            change.append(head - np.mean([r["rules"]["cap, last"]["head"] for r in rs]))
            cells.append(f"{head:.2f} / {knn:.2f} ({100 * share:.0f}%)")
        print(f"| {rule} | " + " | ".join(cells) + f" | {np.mean(change):+.2f} |")
    default = f"patience {PATIENCE}, from epoch 3"
    for (name, shots), rs in sorted(groups.items()):
        if default not in rs[0]["rules"]:
            continue
        share = np.mean([r["rules"][default]["time_share"] for r in rs])
        head = np.mean([r["rules"][default]["head"] for r in rs])
        cap = np.mean([r["rules"]["cap, last"]["head"] for r in rs])
        shown = {"hwu64": "HWU64", "mcid": "MCID"}.get(name, name) + (f", {shots} a label" if shots else "")
        record(
            f"early stopping, share of the run to the cap, {shown}",
            round(100 * share),
            baseline=100,
            unit="%",
            section="training-time",
            baseline_is="the cap, last weights",
            note=f"test head {head:.2f} against {cap:.2f} at the cap ({len(rs)} runs)",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", nargs="?")
    parser.add_argument("--shots", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output")
    parser.add_argument("--table", nargs="+")
    args = parser.parse_args()
    if args.table:
        return table(args.table)
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    rows = run(args.dataset, args.shots, args.seed, output)["rules"]
    for name, row in rows.items():
        print(name, row)


if __name__ == "__main__":
    main()
