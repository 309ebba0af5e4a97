"""Issue 16, a peer: FastFit (``fast-fit`` 1.2.1, IBM) on banking77's 8-shot samples with cea's base model.

FastFit needs ``datasets<3`` and ``transformers<4.46``, which cea's environment cannot hold, so it runs in a
virtual environment of its own, and this script has two halves:

    python bench/fastfit_peer.py export bench/results/fastfit            # cea's env: samples, test, model path
    python -m venv /tmp/ffvenv && /tmp/ffvenv/bin/pip install torch==2.13.0 fast-fit==1.2.1 'datasets<3' \\
        'transformers<4.46' scikit-learn pandas
    OMP_NUM_THREADS=1 /tmp/ffvenv/bin/python bench/fastfit_peer.py run bench/results/fastfit --sample 0 [--trim]

``run`` trains with the settings of FastFit's README for banking77 few-shot (40 epochs, batch 32, 4 repeats,
adafactor, classification loss factor 0.1, texts of at most 128 tokens) on the CPU (no fp16), with the label
names as FastFit's class documents (``lost_or_stolen_card`` -> "lost or stolen card", as its own banking77 copy
has them). Two things FastFit does not do offline are replaced: its ``load_metric`` fetches a script from the
internet (a local accuracy stands in), and its checkpoint saving fails (``save_strategy="no"``). The accuracy
is on banking77's full test split, as every row of docs/benchmarks.md section 15.2.

FastFit pads every text to 128 tokens (banking77's longest test text has 82, the median 13) and every label
document to the longest document; on a CPU that padding is most of the time. ``--trim`` cuts each batch to its
longest text instead. The cut positions are padding, which FastFit's token similarity (``length_norm``, the
training default) and its mean pooling mask out, and at inference the documents' tokens are matched against the
query's unmasked tokens only; what differs is the random stream of its MLM masking (a 2-step run: one test text
of 128 classified differently).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def export(out: Path) -> None:
    from cea.data import load_dataset
    from cea.data.dataset import few_shot
    from cea.encoders import resolve_model

    ds = load_dataset("banking77")
    out.mkdir(parents=True, exist_ok=True)
    name = {label: label.replace("_", " ") for label in ds.labels}
    for s in (0, 1, 2):
        sample = few_shot(ds["train"], 8, s)
        sample.assign(label=sample["label"].map(name))[["text", "label"]].to_json(out / f"train-{s}.jsonl", orient="records", lines=True)
    ds["test"].assign(label=ds["test"]["label"].map(name))[["text", "label"]].to_json(out / "test.jsonl", orient="records", lines=True)
    (out / "model.txt").write_text(str(resolve_model("all-MiniLM-L6-v2")))


def trimmed(features: list) -> dict:
    """FastFit's collator (transformers' ``default_data_collator``), then each ``*_input_ids`` and its attention
    mask cut to the longest unmasked length in the batch."""
    from transformers import default_data_collator

    batch = default_data_collator(features)
    for part in ("query", "doc"):
        mask = batch.get(f"{part}_attention_mask")
        if mask is not None:
            keep = int(mask.sum(1).max())
            batch[f"{part}_input_ids"], batch[f"{part}_attention_mask"] = batch[f"{part}_input_ids"][:, :keep], mask[:, :keep]
    return batch


class Accuracy:
    """Stands in for ``datasets.load_metric("accuracy")``, which fetches its script from the internet."""

    def compute(self, predictions, references) -> dict:
        import numpy as np

        return {"accuracy": float(np.mean(np.asarray(predictions) == np.asarray(references)))}


def run(out: Path, sample: int, epochs: float, trim: bool) -> dict:
    import fastfit.train
    from datasets import DatasetDict, load_dataset

    fastfit.train.load_metric = lambda *a, **k: Accuracy()
    tag = f"{sample}-e{epochs:g}" + ("-trim" if trim else "")
    if trim:
        fastfit.train.default_data_collator = trimmed
    data = load_dataset("json", data_files={"train": str(out / f"train-{sample}.jsonl"),
                                            "validation": str(out / "test.jsonl"), "test": str(out / "test.jsonl")})
    trainer = fastfit.train.FastFitTrainer(
        model_name_or_path=(out / "model.txt").read_text(), label_column_name="label", text_column_name="text",
        num_train_epochs=epochs, per_device_train_batch_size=32, per_device_eval_batch_size=64,
        max_text_length=128, dataloader_drop_last=False, num_repeats=4, optim="adafactor", clf_loss_factor=0.1,
        save_strategy="no", report_to="none", output_dir=str(out / f"run-{tag}"), seed=sample,
        dataset=DatasetDict(data))
    t0 = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - t0
    accuracy = trainer.evaluate()["eval_accuracy"]
    row = {"sample": sample, "epochs": epochs, "trim": trim, "accuracy": round(100 * accuracy, 2),
           "train_seconds": round(seconds, 1)}
    (out / f"result-{tag}.json").write_text(json.dumps(row))
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("export", "run"))
    parser.add_argument("out", type=Path)
    parser.add_argument("--sample", type=int, default=0)
    parser.add_argument("--epochs", type=float, default=40)
    parser.add_argument("--trim", action="store_true", help="cut each batch's padding (masked positions only; less time)")
    args = parser.parse_args()
    print(json.dumps(run(args.out, args.sample, args.epochs, args.trim)) if args.mode == "run" else export(args.out))


if __name__ == "__main__":
    main()
