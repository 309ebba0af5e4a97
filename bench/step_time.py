"""Issue 3: step time of cea (all pairs + bank of 4096) against softmax at batch 32, and the bank's
memory at three sizes. Side by side in one process, alternating, medians of the timed steps.

    python bench/step_time.py --steps 12 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from cea.data import load_dataset
from cea.encoders import load_encoder
from cea.objectives import build_objective
from cea.objectives.memory import Bank


def step_times(name, options, texts, labels, steps, model):
    objective = build_objective(name, model, num_labels=int(labels.max()) + 1, **options)
    optimizer = torch.optim.AdamW(objective.parameters(), lr=5e-5)
    model.train()
    times = []
    for s in range(steps + 2):  # two warm-up steps
        batch = slice((s * 32) % (len(texts) - 32), (s * 32) % (len(texts) - 32) + 32)
        features = {k: v for k, v in model[0].preprocess(texts[batch]).items() if torch.is_tensor(v)}
        t0 = time.perf_counter()
        optimizer.zero_grad()
        objective([features], labels[batch]).backward()
        optimizer.step()
        times.append(time.perf_counter() - t0)
    return times[2:]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    ds = load_dataset("banking77")
    frame = ds["train"].sample(frac=1.0, random_state=0)
    names = sorted(set(frame["label"]))
    texts = list(frame["text"])
    labels = torch.tensor([names.index(x) for x in frame["label"]])
    model = load_encoder("all-MiniLM-L6-v2")
    settings = {"softmax": ("softmax", {}),
                "cea all + bank 4096": ("cea", {"pairs": "all", "memory": "bank", "memory_size": 4096})}
    samples = {k: [] for k in settings}
    for r in range(args.repeats):
        for label, (name, options) in settings.items():
            samples[label] += step_times(name, options, texts, labels, args.steps, model)
            print(f"repeat {r + 1}: {label} median so far {statistics.median(samples[label]):.3f} s", flush=True)
    medians = {k: statistics.median(v) for k, v in samples.items()}
    ratio = medians["cea all + bank 4096"] / medians["softmax"]
    bank = {}
    import gc

    import psutil
    for m in (65536, 262144, 1048576):  # large enough for the resident-memory delta to be measurable
        gc.collect()
        before = psutil.Process().memory_info().rss
        queue = Bank(m, 384)
        for start in range(0, m, 4096):
            queue.update(torch.randn(4096, 384), torch.zeros(4096, dtype=torch.long))
        bank[m] = psutil.Process().memory_info().rss - before
        del queue
    print("\n| setting | median step (s), batch 32 |\n|---|---:|")
    for k, v in medians.items():
        print(f"| {k} | {v:.3f} |")
    print(f"\ncea bank / softmax step time: {ratio:.3f}x (target <= 1.1x)\n")
    print("| bank size M | resident memory added (bytes) | bytes per slot |\n|---:|---:|---:|")
    for m, b in bank.items():
        print(f"| {m} | {b:,} | {b / m:.0f} |")
    out = Path("bench/results/step_time.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"medians": medians, "ratio": ratio, "bank_bytes": bank, "steps": args.steps,
                               "repeats": args.repeats}, indent=2))


if __name__ == "__main__":
    main()
