"""Issue 3: SetFit (the released package, same base model) against cea on banking77 with 8
examples per class: the same three 8-shot samples, accuracy on the full test split, wall time.

    python bench/setfit_vs_cea.py --samples 0,1,2 [--setfit-iterations 20] [--skip-setfit]

SetFit runs with the settings of its paper for this setting (batch 16, 20 iterations, 1 epoch for
the body, logistic-regression head); cea trains with all pairs on P x K batches (lr 2e-5, EPOCHS
epochs, chosen on sample 0, see docs/benchmarks.md) and classifies by 1-NN over the same 616 texts
(8 references per class; 5-NN is reported too). The frozen model's 1-NN is the floor.

Where SetFit ran, the figure is a record (``docs/records/setfit_vs_cea.jsonl``): cea's 1-NN accuracy (this
script's setting, not ``cea train``'s defaults), mean of the samples, against SetFit's, with both training times.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from cea.data import load_dataset
from cea.data.dataset import few_shot
from cea.encoders import resolve_model
from cea.training import TrainConfig, train
from common import record, results


def run_setfit(train_frame, test, iterations: int, seed: int) -> dict:
    from datasets import Dataset
    from setfit import SetFitModel, Trainer, TrainingArguments

    model = SetFitModel.from_pretrained(resolve_model("all-MiniLM-L6-v2"))
    args = TrainingArguments(
        batch_size=16,
        num_iterations=iterations,
        num_epochs=1,
        seed=seed,
        output_dir="bench/results/setfit_vs_cea/setfit-checkpoints",
    )  # not ./checkpoints
    trainer = Trainer(model=model, args=args, train_dataset=Dataset.from_pandas(train_frame))
    t0 = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - t0
    pred = model.predict(list(test["text"]))
    return {
        "accuracy": round(100 * float(np.mean(np.asarray(pred) == test["label"].to_numpy())), 2),
        "train_seconds": round(seconds, 1),
        "total_seconds": round(time.perf_counter() - t0, 1),
    }


def run_cea(sample: int, epochs: float, lr: float, out: Path) -> dict:
    folder = out / f"cea-sample-{sample}-e{epochs:g}-lr{lr:g}"
    if results(folder) is not None:
        result = results(folder)
    else:
        config = TrainConfig(
            dataset="banking77",
            objective="cea",
            options={"pairs": "all"},
            shots=8,
            shots_seed=sample,
            seed=sample,
            epochs=epochs,
            lr=lr,
            batch_size=32,
            k_per_class=4,
            knn_k=5,
            output=str(folder),
        )
        result = train(config, progress=False)
    test = result["metrics"]["test"]
    return {
        "accuracy": test["top1_accuracy"],
        "accuracy_5nn": test["knn_accuracy"],
        "train_seconds": result["train_seconds"],
        "total_seconds": result["total_seconds"],
    }


def frozen_1nn(frame, test) -> float:
    from cea.encoders import load_encoder
    from cea.knn import KNNClassifier

    model = load_encoder("all-MiniLM-L6-v2")
    ref, queries = model.encode(list(frame["text"]), batch_size=64), model.encode(list(test["text"]), batch_size=64)
    return round(100 * KNNClassifier(1).fit(ref, frame["label"]).score(queries, test["label"]), 2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", default="0,1,2")
    parser.add_argument("--setfit-iterations", type=int, default=20)
    parser.add_argument("--cea-epochs", type=float, default=5)
    parser.add_argument("--cea-lr", type=float, default=2e-5)
    parser.add_argument("--skip-setfit", action="store_true")
    args = parser.parse_args()
    out = Path("bench/results/setfit_vs_cea")
    ds = load_dataset("banking77")
    rows = []
    for sample in [int(s) for s in args.samples.split(",")]:
        frame = few_shot(ds["train"], 8, seed=sample)
        row = {
            "sample": sample,
            "n_train": len(frame),
            "frozen_1nn": frozen_1nn(frame, ds["test"]),
            "cea": run_cea(sample, args.cea_epochs, args.cea_lr, out),
        }
        print(f"sample {sample}: cea {row['cea']}", flush=True)
        if not args.skip_setfit:
            row["setfit"] = run_setfit(frame, ds["test"], args.setfit_iterations, seed=sample)
            print(f"sample {sample}: setfit {row['setfit']}", flush=True)
        rows.append(row)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(rows, indent=2))
    print(
        "\n| sample | texts | frozen 1-NN | cea 1-NN | cea 5-NN | cea train s | SetFit | SetFit train s |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    for r in rows:
        s = r.get("setfit", {})
        print(
            f"| {r['sample']} | {r['n_train']} | {r['frozen_1nn']:.2f} | {r['cea']['accuracy']:.2f} | "
            f"{r['cea']['accuracy_5nn']:.2f} | {r['cea']['train_seconds']:.0f} | "
            f"{s.get('accuracy', float('nan')):.2f} | {s.get('train_seconds', float('nan')):.0f} |"
        )
    if all("setfit" in r for r in rows):

        def mean(values):
            return round(sum(values) / len(values), 2)

        record(
            "SetFit against cea all pairs (1-NN), banking77, 8 a label",
            mean([r["cea"]["accuracy"] for r in rows]),
            baseline=mean([r["setfit"]["accuracy"] for r in rows]),
            unit=f"% test accuracy, {len(rows)} samples",
            section="studies",
            baseline_is=f"SetFit, {args.setfit_iterations} iterations",
            note=f"train s: cea {mean([r['cea']['train_seconds'] for r in rows]):.0f}, SetFit "
            f"{mean([r['setfit']['train_seconds'] for r in rows]):.0f}",
        )


if __name__ == "__main__":
    main()
