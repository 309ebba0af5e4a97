"""Issue 15: training step time of softmax, cea all pairs, triplet and supcon in fp32, bf16 (autocast) and
bf16 with length-sorted chunks, and encode throughput in fp32, bf16 and ONNX int8, all-MiniLM-L6-v2.

Steps: the same banking77 P x K batches (8 labels x 4) for every setting, alternating inside each repeat
in one process, fused AdamW steps (the trainer's default) from the same weights, medians of the timed steps (the
first of each run warms up); bf16 is the autocast the trainer's ``bf16`` flag applies, with the loss in fp32 as in
training. Encode: banking77's test split (3,080 texts), batch 64 (sentence-transformers sorts by
length), fp32 weights, bf16 weights, and the bundle's ONNX int8 export; medians over the repeats.
``bf16 + auto chunks + compiled`` runs the transformer's forward through ``torch.compile`` (inductor, dynamic
shapes: a batch's chunks vary in rows and width); its first step, which compiles, is reported apart.
Run it alone on the machine.

    OMP_NUM_THREADS=2 python bench/precision.py --steps 10 --repeats 3
    OMP_NUM_THREADS=2 python bench/precision.py --modes "fp32,bf16 + chunks of 8,bf16 + auto chunks" --no-encode
    OMP_NUM_THREADS=2 python bench/precision.py --modes "fp32,bf16 + auto chunks,bf16 + auto chunks + compiled" \
        --objectives softmax --steps 30 --no-encode

With ``bf16 + auto chunks`` among the modes its figure is a record (``docs/records/precision.jsonl``): that
step against fp32's, over the objectives.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from step_time import banking77, pk_batches  # the same data and batches as the other step-time figures

from cea.encoders import load_encoder
from cea.encoders.device import autocast
from cea.objectives import build_objective
from common import record

OBJECTIVES = {
    "softmax": ("softmax", {}),
    "cea all pairs": ("cea", {"pairs": "all"}),
    "triplet": ("triplet", {}),
    "supcon": ("supcon", {}),
}
MODES = {
    "fp32": ("fp32", None),
    "fp32 + chunks of 8": ("fp32", 8),
    "bf16": ("bf16", None),
    "bf16 + chunks of 8": ("bf16", 8),
    "bf16 + chunks of 16": ("bf16", 16),
    "bf16 + auto chunks": ("bf16", "auto"),
    "bf16 + auto chunks + compiled": ("bf16", "auto"),
}


def step_times(
    model,
    texts,
    labels,
    steps: int,
    repeats: int,
    modes=tuple(MODES),
    objectives=tuple(OBJECTIVES),
    first: dict | None = None,
) -> dict:
    """Median step seconds per (objective, mode); ``first`` gets each one's longest first step (a compile)."""
    batches = pk_batches(labels, steps + 1)
    samples = {(o, m): [] for o in objectives for m in modes}
    transformer, compiled = model[0].model, None
    model.train()
    for r in range(repeats):
        for (obj, mode), times in samples.items():
            name, options = OBJECTIVES[obj]
            precision, chunk = MODES[mode]
            if mode.endswith("compiled"):  # sentence-transformers calls the model's forward by name
                compiled = compiled or torch.compile(transformer.forward, dynamic=True)
                transformer.forward = compiled
            else:
                transformer.__dict__.pop("forward", None)
            objective = build_objective(name, model, num_labels=int(labels.max()) + 1, seed=0, **options)
            objective.chunk_size = chunk
            # the trainer's default optimizer (optim="adamw_torch_fused" from torch 2.8)
            optimizer = torch.optim.AdamW(objective.parameters(), lr=5e-5, fused=True)
            state = {k: v.clone() for k, v in model.state_dict().items()}
            for s, batch in enumerate(batches):
                features = {
                    k: v for k, v in model[0].preprocess([texts[i] for i in batch]).items() if torch.is_tensor(v)
                }
                t0 = time.perf_counter()
                optimizer.zero_grad()
                with autocast("cpu", precision):
                    loss = objective([features], labels[batch])
                loss.backward()
                optimizer.step()
                if s:
                    times.append(time.perf_counter() - t0)
                elif first is not None:
                    first[f"{obj} | {mode}"] = max(first.get(f"{obj} | {mode}", 0.0), time.perf_counter() - t0)
            model.load_state_dict(state)
        print(f"repeat {r + 1} done", flush=True)
    return {f"{o} | {m}": statistics.median(v) for (o, m), v in samples.items()}


def encode_rates(texts, repeats: int, onnx_dir: Path) -> dict:
    from cea.encoders.onnx import OnnxEncoder, export_onnx

    fp32 = load_encoder("all-MiniLM-L6-v2", device="cpu")
    bf16 = load_encoder("all-MiniLM-L6-v2", device="cpu", precision="bf16")
    if not (onnx_dir / "onnx" / "model_int8.onnx").exists():
        fp32.save(str(onnx_dir))
        export_onnx(fp32, onnx_dir, int8=True)
    int8 = OnnxEncoder(onnx_dir, precision="int8")
    runs = {"fp32": fp32, "bf16 weights": bf16, "ONNX int8": int8}
    samples = {k: [] for k in runs}
    for _ in range(repeats):
        for name, encoder in runs.items():
            t0 = time.perf_counter()
            encoder.encode(texts, batch_size=64)
            samples[name].append(len(texts) / (time.perf_counter() - t0))
    return {k: statistics.median(v) for k, v in samples.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--onnx-dir", default="bench/results/precision-onnx")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated step settings (fp32 comes first)")
    ap.add_argument("--objectives", default=",".join(OBJECTIVES), help="comma-separated objectives timed")
    ap.add_argument("--no-encode", action="store_true", help="step times only")
    args = ap.parse_args()
    torch.manual_seed(0)
    texts, labels = banking77()
    modes = [m.strip() for m in args.modes.split(",")]
    objectives, first = [o.strip() for o in args.objectives.split(",")], {}
    steps = step_times(
        load_encoder("all-MiniLM-L6-v2", device="cpu"),
        texts,
        labels,
        args.steps,
        args.repeats,
        modes,
        objectives,
        first,
    )
    print(
        "\n| objective | precision | median step (s), P x K batch of 32 | / fp32 | first step (s) |\n"
        "|---|---|---:|---:|---:|"
    )
    for key, value in steps.items():
        obj, mode = key.split(" | ")
        print(f"| {obj} | {mode} | {value:.3f} | {value / steps[f'{obj} | fp32']:.2f}x | {first[key]:.2f} |")
    auto = {
        k.split(" | ")[0]: v / steps[k.split(" | ")[0] + " | fp32"]
        for k, v in steps.items()
        if k.endswith("| bf16 + auto chunks")
    }
    if auto:
        fp32 = [v for k, v in steps.items() if k.endswith("| fp32")]
        record(
            "one training step, bf16 + auto chunks against fp32",
            f"{min(auto.values()):.2f}-{max(auto.values()):.2f}",
            baseline=1,
            unit="x fp32's time",
            section="training-time",
            note=f"{', '.join(auto)}; fp32 step {min(fp32):.2f}-{max(fp32):.2f} s",
        )
    if args.no_encode:
        print(json.dumps({"step_seconds": steps, "first_step_seconds": first, "threads": torch.get_num_threads()}))
        return
    from cea.data import load_dataset

    rates = encode_rates(list(load_dataset("banking77")["test"]["text"]), args.repeats, Path(args.onnx_dir))
    print("\n| encoder | texts/s (banking77 test, batch 64) | / fp32 |\n|---|---:|---:|")
    for name, rate in rates.items():
        print(f"| {name} | {rate:.0f} | {rate / rates['fp32']:.2f}x |")
    out = Path("bench/results/precision.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "step_seconds": steps,
                "encode_texts_per_second": rates,
                "steps": args.steps,
                "repeats": args.repeats,
                "threads": torch.get_num_threads(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
