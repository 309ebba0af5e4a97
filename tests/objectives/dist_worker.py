"""Run by tests/objectives/test_gather.py, once alone and once under torchrun with 2 processes: gloo on
the CPU, or NCCL with one GPU each when ``CEA_GATHER_DEVICE=cuda``.

For each setting: 3 SGD steps on a global batch of 12 texts (each process takes its share), with
DDP's gradient averaging done by hand; saves per step the loss and the flattened gradient, and the
objective's memory after the last step, to OUT/<setting>-rank<r>.npz.
"""

import json
import os
import sys

import numpy as np
import torch

SETTINGS = {
    "cea-all": {"name": "cea", "pairs": "all"},
    "cea-sampled": {"name": "cea", "pairs": "sampled"},
    "cea-class": {"name": "cea", "pairs": "all", "memory": "class"},
    "cea-mixed": {"name": "cea", "pairs": "all", "memory": "mixed"},
    "cea-bank": {"name": "cea", "pairs": "all", "memory": "bank", "memory_size": 20},
    "cea-datapoint": {"name": "cea", "pairs": "all", "memory": "datapoint"},
    "supcon": {"name": "supcon"},
    "triplet-all": {"name": "triplet"},
    "triplet-hard": {"name": "triplet", "mining": "hard"},
    "normalized-softmax": {"name": "normalized-softmax"},
    "softmax": {"name": "softmax"},
    "simcse": {"name": "simcse"},  # each process: its sentences against the global batch's twins
}
PER_PROCESS_LOSS = ("simcse",)  # the loss of a process's own sentences; their mean is one process's loss
WORDS = ["card", "lost", "money", "transfer", "city", "river", "dog", "cat"]


def data():
    rng = np.random.default_rng(0)
    texts, labels = [], []
    for label in range(4):
        for i in range(6):
            words = rng.choice(WORDS[2 * label : 2 * label + 2], size=2 + i % 3).tolist() + ["the"] * (i % 2)
            texts.append(" ".join(words))
            labels.append(label)
    return texts, np.array(labels)


def main(model_dir: str, out: str, settings: list[str]) -> None:
    import torch.distributed as dist

    from cea.encoders import load_encoder
    from cea.objectives import build_objective

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    device = os.environ.get("CEA_GATHER_DEVICE", "cpu")
    if device == "cuda":
        device = f"cuda:{rank}"
        torch.cuda.set_device(device)
    if world > 1:
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    texts, labels = data()
    for name in settings:
        options = dict(SETTINGS[name])
        torch.manual_seed(0)
        model = load_encoder(model_dir, device=device).eval()  # no dropout: one process and two see the same numbers
        objective = build_objective(options.pop("name"), model, num_labels=4, seed=0, **options)
        params = [p for p in objective.parameters() if p.requires_grad]
        optimizer = torch.optim.SGD(params, lr=0.5)
        losses, grads = [], []
        for step in range(3):
            rows = np.random.default_rng(step).permutation(len(texts))[:12]
            mine = rows[rank * 12 // world : (rank + 1) * 12 // world]
            features = {
                k: v.to(device) for k, v in model.tokenize([texts[i] for i in mine]).items() if torch.is_tensor(v)
            }
            optimizer.zero_grad()
            loss = objective([features] * (2 if name == "simcse" else 1), torch.tensor(labels[mine], device=device))
            loss.backward()
            for p in params:  # what DDP does: average the gradients over the processes
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                if world > 1:
                    dist.all_reduce(p.grad)
                    p.grad /= world
            losses.append(float(loss))
            grads.append(torch.cat([p.grad.flatten() for p in params]).cpu().numpy().copy())
            optimizer.step()
        memory = objective.memory_state() if hasattr(objective, "memory_state") else {}
        np.savez(
            os.path.join(out, f"{name}-rank{rank}.npz"),
            losses=np.array(losses),
            grads=np.stack(grads),
            **{f"memory.{k}": v.cpu().numpy() for k, v in memory.items() if k != "generator"},
        )
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]) if len(sys.argv) > 3 else list(SETTINGS))
