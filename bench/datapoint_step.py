"""Step time of cea with the datapoint memory on banking77 (77 labels re-encoded at every step):
one padded block of every label's example against length-sorted chunks of 16. Side by side in one
process, alternating, medians of the timed steps; the losses of the two agree, which is checked.

    OMP_NUM_THREADS=1 python bench/datapoint_step.py --steps 8 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from step_time import banking77, filled  # the same data and memory filling as the grid's step times

from cea.encoders import load_encoder
from cea.objectives import build_objective


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    texts, labels = banking77()
    model = load_encoder("all-MiniLM-L6-v2")
    for module in model.modules():  # the same loss for both settings, so they can be compared
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    objective = filled(build_objective("cea", model, num_labels=int(labels.max()) + 1, pairs="all",
                                       memory="datapoint"), model, texts, labels)  # one example per label
    optimizer = torch.optim.SGD(objective.parameters(), lr=0.0)  # a real step that leaves the weights alone
    settings = {"one padded block": 10**9, "length-sorted chunks of 16": 16}
    samples, losses = {k: [] for k in settings}, {k: [] for k in settings}
    for r in range(args.repeats):
        for name, chunk in settings.items():
            objective.memory.chunk = chunk
            for s in range(args.steps + 1):  # one warm-up step
                batch = slice(s * 32, s * 32 + 32)
                features = {k: v for k, v in model[0].preprocess(texts[batch]).items() if torch.is_tensor(v)}
                saved = (objective.memory.ids.clone(), objective.memory.lengths.clone())
                t0 = time.perf_counter()
                optimizer.zero_grad()
                loss = objective([features], labels[batch])
                loss.backward()
                optimizer.step()
                if s:
                    samples[name].append(time.perf_counter() - t0)
                    losses[name].append(loss.item())
                objective.memory.ids, objective.memory.lengths = saved  # every setting sees the same memory
            print(f"repeat {r + 1}: {name} median {statistics.median(samples[name]):.3f} s", flush=True)
    medians = {k: statistics.median(v) for k, v in samples.items()}
    gap = max(abs(a - b) for a, b in zip(*losses.values()))
    print("\n| datapoint memory encoded as | median step (s), batch 32 + 77 examples |\n|---|---:|")
    for k, v in medians.items():
        print(f"| {k} | {v:.3f} |")
    print(f"\nspeed-up {medians['one padded block'] / medians['length-sorted chunks of 16']:.2f}x; "
          f"largest loss difference {gap:.2e}")
    out = Path("bench/results/datapoint_step.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"medians": medians, "loss_gap": gap, "steps": args.steps,
                               "repeats": args.repeats, "threads": torch.get_num_threads()}, indent=2))


if __name__ == "__main__":
    main()
