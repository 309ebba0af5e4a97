"""A grid of training runs (settings x seeds) summarised as mean and std per setting.

A setting is an objective name with options in brackets, e.g. ``softmax,cea[pairs=all,memory=bank],triplet``: the
objective's options and run-level ones (``lr``, ``epochs``), read by :func:`cea.training.config.configure` as
``cea train``'s flags are; others are the base's, or the objective's own. The frozen model is always the first row.
"""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

import numpy as np

from ..encoders import embed, load_encoder, num_layers
from ..encoders.bag import parse_bag
from ..errors import CeaError
from ..evaluation.classification import knn_evaluate
from ..paths import write_json
from .config import TrainConfig, check_config, configure, load_data
from .train import train_or_reuse

_PER_RUN = ("dataset", "model", "output", "seed", "objective")  # set by the grid, not by a setting


def parse_settings(spec: str) -> list[tuple[str, dict]]:
    """``"softmax,cea[pairs=all,memory=bank]"`` -> [("softmax", {}), ("cea", {"pairs": "all", ...})]."""
    out = []
    for name, options in re.findall(r"\s*([\w-]+)(?:\[([^\]]*)\])?\s*(?:,|$)", spec):
        opts = {}
        for item in filter(None, (o.strip() for o in (options or "").split(","))):
            if "=" not in item:
                raise CeaError(f"cannot read option {item!r} of {name}; write key=value")
            key, value = (part.strip() for part in item.split("=", 1))
            key = key.replace("-", "_")
            if key in _PER_RUN:
                raise CeaError(
                    f"option {key!r} of {name} is set by the grid; use its options or run-level ones such as lr, epochs"
                )
            opts[key] = _convert(value)
        configure(TrainConfig(objective=name), **opts)  # the same check as cea train's flags
        out.append((name, opts))
    if not out:
        raise CeaError(f"no settings in {spec!r}; write e.g. softmax,cea[pairs=all]")
    return out


def _convert(value: str):
    """'4096' -> 4096, '0.2' -> 0.2, 'none' -> None, 'true' -> True, anything else stays text."""
    if re.fullmatch(r"[+-]?\d+", value):
        return int(value)
    if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", value):
        return float(value)
    return {"none": None, "true": True, "false": False}.get(value.lower(), value)


def setting_label(name: str, opts: dict) -> str:
    return name + (f"[{','.join(f'{k}={v}' for k, v in opts.items())}]" if opts else "")


def _frozen(config: TrainConfig) -> dict:
    """The untrained model's row: the same kNN on its cached last-layer embeddings."""
    ds = load_data(config)
    model = load_encoder(config.model, pooling=config.pooling, layers=config.layers, device=config.device)
    last, pool = num_layers(model), config.pooling or "mean"
    t0 = time.perf_counter()
    ref, test = (
        embed(model, list(ds[s]["text"]), [last], [pool], progress=False)[(last, pool)] for s in ("train", "test")
    )
    result = knn_evaluate(ref, ds["train"]["label"], test, ds["test"]["label"], config.knn_k)
    return {
        "metrics": {"test": result.metrics()},
        "seconds_per_epoch": 0.0,
        "peak_memory_mb": 0.0,
        "total_seconds": round(time.perf_counter() - t0, 2),
    }


def _mean_sd(results: list[dict], get) -> tuple[float, float]:
    """The mean and standard deviation of ``get(result)`` over ``results``, to two decimals."""
    values = np.array([get(r) for r in results], dtype=float)
    return round(float(values.mean()), 2), round(float(values.std()), 2)


def compare(
    base: TrainConfig,
    settings: list[tuple[str, dict]],
    seeds: list[int],
    output: str | Path,
    progress: bool = True,
    on_run=None,
) -> dict:
    """Run every setting with every seed (skipping runs already finished in ``output``)."""
    check_config(base)
    if load_data(base).task == "multilabel":
        raise CeaError(
            f"cea compare takes texts with one label each; {base.dataset} gives texts several: run cea "
            "train per setting (bench/multilabel.py tabulates such runs)"
        )
    output = Path(output)
    runs = {} if parse_bag(base.model) else {"frozen": [_frozen(base)]}  # an untrained bag has no frozen row
    for name, opts in settings:
        label = setting_label(name, opts)
        runs[label] = []
        for seed in seeds:
            folder = output / re.sub(r"[^\w.=-]+", "_", label) / f"seed-{seed}"
            # a setting's options replace the base's
            result = train_or_reuse(
                configure(dataclasses.replace(base, options={}), objective=name, seed=seed, output=str(folder), **opts),
                progress,
            )
            runs[label].append(result)
            if on_run:
                on_run(label, seed, result)
    rows = []
    for label, results in runs.items():
        acc = _mean_sd(results, lambda r: r["metrics"]["test"]["knn_accuracy"])
        f1 = _mean_sd(results, lambda r: r["metrics"]["test"]["knn_macro_f1"])
        row = {
            "setting": label,
            "runs": len(results),
            "accuracy_mean": acc[0],
            "accuracy_std": acc[1],
            "macro_f1_mean": f1[0],
            "macro_f1_std": f1[1],
            "seconds_per_epoch": _mean_sd(results, lambda r: r["seconds_per_epoch"])[0],
            "peak_memory_mb": _mean_sd(results, lambda r: r["peak_memory_mb"])[0],
        }
        if "config" in results[0]:  # the learning rate and epochs the setting ran with (its objective's own unless set)
            row.update({k: results[0]["config"][k] for k in ("lr", "epochs")})
        if all("head_accuracy" in r["metrics"]["test"] for r in results):
            row["head_accuracy_mean"] = _mean_sd(results, lambda r: r["metrics"]["test"]["head_accuracy"])[0]
        rows.append(row)
    summary = {
        "format": "cea.compare/1",
        "dataset": base.dataset,
        "model": base.model,
        "seeds": seeds,
        "epochs": base.epochs,
        "rows": rows,
        "config": dataclasses.asdict(base),
    }
    write_json(output / "compare.json", summary)
    return summary
