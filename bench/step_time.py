"""Issue 3: step time of cea (all pairs + bank of 4096) against softmax at batch 32, and the bank's
memory at three sizes. Side by side in one process, alternating, medians of the timed steps.

    python bench/step_time.py --steps 12 --repeats 3
    python bench/step_time.py --settings grid --steps 6 --repeats 2   # every setting of the training grid
    OMP_NUM_THREADS=1 python bench/step_time.py --datapoint-block --steps 8 --repeats 2

``--settings`` times each setting of the training grid (bench/train_compare.sh) on the same P x K
batches (8 labels x 4), memories filled first (the datapoint memory with one example per label, the
bank to its size), alternating between settings in one process, so the ratios are fair on a shared
machine; the grid's own time per epoch mixes runs made under different loads.

``--datapoint-block`` times cea all pairs with the datapoint memory (77 labels re-encoded at every step): one
padded block of every label's example against length-sorted chunks of 16 (the memory's default), alternating in
one process; the losses of the two agree, which is checked.

``--settings grid`` records its figure (``docs/records/step_time.jsonl``): each setting's step against softmax's.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from cea.data import load_dataset
from cea.encoders import load_encoder
from cea.objectives import build_objective
from cea.objectives.memory import Bank
from cea.training.compare import parse_settings, setting_label
from common import record, save, table

GRID = (
    "softmax,cea[pairs=sampled],cea[pairs=all],cea[pairs=all,memory=bank,memory_size=4096],"
    "cea[pairs=all,memory=datapoint],triplet,supcon,normalized-softmax"
)


def banking77() -> tuple[list[str], torch.Tensor]:
    """banking77's train texts, shuffled with seed 0, and their label ids."""
    frame = load_dataset("banking77")["train"].sample(frac=1.0, random_state=0)
    names = sorted(set(frame["label"]))
    return list(frame["text"]), torch.tensor([names.index(x) for x in frame["label"]])


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


def pk_batches(labels: torch.Tensor, count: int, p: int = 8, k: int = 4, seed: int = 0) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    by_label = [torch.nonzero(labels == y).flatten() for y in range(int(labels.max()) + 1)]
    batches = []
    for _ in range(count):
        chosen = torch.randperm(len(by_label), generator=generator)[:p]
        batches.append(
            [int(by_label[y][i]) for y in chosen for i in torch.randperm(len(by_label[y]), generator=generator)[:k]]
        )
    return batches


def filled(objective, model, texts, labels):
    """The objective with its memory full, as it is after the first steps of an epoch."""
    memory = getattr(objective, "memory", None)
    if memory is not None and memory.kind == "datapoint":
        first = {int(y): i for i, y in reversed(list(enumerate(labels)))}
        rows = [first[y] for y in sorted(first)]
        features = {k: v for k, v in model[0].preprocess([texts[i] for i in rows]).items() if torch.is_tensor(v)}
        memory.update(None, labels[rows], features)
    elif memory is not None and memory.kind == "bank":
        while memory.count < memory.size:
            memory.update(
                torch.nn.functional.normalize(torch.randn(512, memory.embeddings.shape[1]), dim=1),
                torch.randint(0, int(labels.max()) + 1, (512,)),
            )
    return objective


def grid_step_times(spec, texts, labels, steps, repeats, model):
    settings = parse_settings(spec)
    objectives = {
        setting_label(n, opts): filled(
            build_objective(n, model, num_labels=int(labels.max()) + 1, **opts), model, texts, labels
        )
        for n, opts in settings
    }
    batches = pk_batches(labels, steps + 1)
    samples = {name: [] for name in objectives}
    model.train()
    for r in range(repeats):
        for name, objective in objectives.items():
            optimizer = torch.optim.AdamW(objective.parameters(), lr=5e-5)
            state = {k: v.clone() for k, v in model.state_dict().items()}  # every setting from the same weights
            for s, batch in enumerate(batches):  # the first step warms up
                features = {
                    k: v for k, v in model[0].preprocess([texts[i] for i in batch]).items() if torch.is_tensor(v)
                }
                t0 = time.perf_counter()
                optimizer.zero_grad()
                objective([features], labels[batch]).backward()
                optimizer.step()
                if s:
                    samples[name].append(time.perf_counter() - t0)
            model.load_state_dict(state)
            print(f"repeat {r + 1}: {name} median so far {statistics.median(samples[name]):.3f} s", flush=True)
    medians = {k: statistics.median(v) for k, v in samples.items()}
    base = medians["softmax"]
    print()
    table(
        ["setting", "median step (s), P x K batch of 32", "/ softmax"],
        [[k, f"{v:.3f}", f"{v / base:.2f}x"] for k, v in medians.items()],
    )
    save("step_time_grid", {"medians": medians, "steps": steps, "repeats": repeats, "threads": torch.get_num_threads()})
    ratios = [v / base for k, v in medians.items() if k != "softmax"]
    record(
        "one training step per objective, against softmax",
        f"{min(ratios):.2f}-{max(ratios):.2f}",
        baseline=1,
        unit=f"x softmax's {base:.3f} s",
        section="training-time",
        note="the slowest: {} ({:.2f}x)".format(
            *max(((k, v / base) for k, v in medians.items()), key=lambda kv: kv[1])
        ),
    )


def datapoint_block(texts, labels, steps, repeats, model):
    """The datapoint memory encoded as one padded block against length-sorted chunks of 16."""
    for module in model.modules():  # the same loss for both settings, so they can be compared
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    objective = filled(
        build_objective("cea", model, num_labels=int(labels.max()) + 1, pairs="all", memory="datapoint"),
        model,
        texts,
        labels,
    )  # one example per label
    optimizer = torch.optim.SGD(objective.parameters(), lr=0.0)  # a real step that leaves the weights alone
    settings = {"one padded block": 10**9, "length-sorted chunks of 16": 16}
    samples, losses = {k: [] for k in settings}, {k: [] for k in settings}
    for r in range(repeats):
        for name, chunk in settings.items():
            objective.memory.chunk = chunk
            for s in range(steps + 1):  # one warm-up step
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
    print()
    table(
        ["datapoint memory encoded as", "median step (s), batch 32 + 77 examples"],
        [[k, f"{v:.3f}"] for k, v in medians.items()],
    )
    print(
        f"\nspeed-up {medians['one padded block'] / medians['length-sorted chunks of 16']:.2f}x; "
        f"largest loss difference {gap:.2e}"
    )
    save(
        "datapoint_step",
        {"medians": medians, "loss_gap": gap, "steps": steps, "repeats": repeats, "threads": torch.get_num_threads()},
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--settings", default=None, help="'grid' or settings as for cea compare")
    parser.add_argument(
        "--datapoint-block",
        action="store_true",
        help="the datapoint memory as one padded block against length-sorted chunks",
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    texts, labels = banking77()
    model = load_encoder("all-MiniLM-L6-v2")
    if args.datapoint_block:
        return datapoint_block(texts, labels, args.steps, args.repeats, model)
    if args.settings:
        spec = GRID if args.settings == "grid" else args.settings
        return grid_step_times(spec, texts, labels, args.steps, args.repeats, model)
    settings = {
        "softmax": ("softmax", {}),
        "cea all + bank 4096": ("cea", {"pairs": "all", "memory": "bank", "memory_size": 4096}),
    }
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
        for _ in range(0, m, 4096):
            queue.update(torch.randn(4096, 384), torch.zeros(4096, dtype=torch.long))
        bank[m] = psutil.Process().memory_info().rss - before
        del queue
    print()
    table(["setting", "median step (s), batch 32"], [[k, f"{v:.3f}"] for k, v in medians.items()])
    print(f"\ncea bank / softmax step time: {ratio:.3f}x (target <= 1.1x)\n")
    table(
        ["bank size M", "resident memory added (bytes)", "bytes per slot"],
        [[m, f"{b:,}", f"{b / m:.0f}"] for m, b in bank.items()],
        left=0,
    )
    save(
        "step_time",
        {"medians": medians, "ratio": ratio, "bank_bytes": bank, "steps": args.steps, "repeats": args.repeats},
    )


if __name__ == "__main__":
    main()
