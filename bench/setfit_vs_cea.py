"""Issue 3: SetFit (the released package, same base model) against cea on banking77 with 8
examples per class: the same three 8-shot samples, accuracy on the full test split, wall time.

    python bench/setfit_vs_cea.py --samples 0,1,2 [--setfit-iterations 20] [--skip-setfit]

SetFit runs with its defaults for this setting (batch 16, 20 iterations, 1 epoch for the body,
logistic-regression head); cea trains with all pairs on P x K batches and classifies by kNN over
the same 616 texts.
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


def run_setfit(train_frame, test, iterations: int, seed: int) -> dict:
    from datasets import Dataset
    from setfit import SetFitModel, Trainer, TrainingArguments

    model = SetFitModel.from_pretrained(resolve_model("all-MiniLM-L6-v2"))
    args = TrainingArguments(batch_size=16, num_iterations=iterations, num_epochs=1, seed=seed)
    trainer = Trainer(model=model, args=args, train_dataset=Dataset.from_pandas(train_frame))
    t0 = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - t0
    pred = model.predict(list(test["text"]))
    return {"accuracy": 100 * float(np.mean(np.asarray(pred) == test["label"].to_numpy())), "train_seconds": seconds}


def run_cea(sample: int, epochs: float, out: Path) -> dict:
    config = TrainConfig(dataset="banking77", objective="cea", pairs="all", shots=8, shots_seed=sample, seed=sample,
                         epochs=epochs, batch_size=32, k_per_class=4, output=str(out / f"cea-sample-{sample}"))
    result = train(config, progress=False)
    return {"accuracy": result["metrics"]["test"]["knn_accuracy"], "train_seconds": result["train_seconds"]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", default="0,1,2")
    parser.add_argument("--setfit-iterations", type=int, default=20)
    parser.add_argument("--cea-epochs", type=float, default=10)
    parser.add_argument("--skip-setfit", action="store_true")
    args = parser.parse_args()
    out = Path("bench/results/setfit_vs_cea")
    ds = load_dataset("banking77")
    rows = []
    for sample in [int(s) for s in args.samples.split(",")]:
        frame = few_shot(ds["train"], 8, seed=sample)
        row = {"sample": sample, "n_train": len(frame), "cea": run_cea(sample, args.cea_epochs, out)}
        print(f"sample {sample}: cea {row['cea']}", flush=True)
        if not args.skip_setfit:
            row["setfit"] = run_setfit(frame, ds["test"], args.setfit_iterations, seed=sample)
            print(f"sample {sample}: setfit {row['setfit']}", flush=True)
        rows.append(row)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(rows, indent=2))
    print("\n| sample | texts | cea accuracy | cea train s | SetFit accuracy | SetFit train s |\n|---|---:|---:|---:|---:|---:|")
    for r in rows:
        s = r.get("setfit", {})
        print(f"| {r['sample']} | {r['n_train']} | {r['cea']['accuracy']:.2f} | {r['cea']['train_seconds']:.0f} | "
              f"{s.get('accuracy', float('nan')):.2f} | {s.get('train_seconds', float('nan')):.0f} |")


if __name__ == "__main__":
    main()
