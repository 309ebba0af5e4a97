"""Truncated-model fine-tuning (truncating ELECTRA improves STS-B: "Are ELECTRA's Sentence Embeddings Beyond
Repair?", Findings of EMNLP 2024): one model per depth, the best by dev, its test over seeds.

``sweep_layers(base, layers, seeds, output)``: the frozen curve (every hidden state judged on dev and test from one
forward pass per split); one run per depth in ``layers`` with the first seed; the best depth on dev run again with
the other seeds (test mean and std); ``OUT/sweep.json`` and ``OUT/layer_curve.png``. Finished runs are reused, so a
stopped sweep can be restarted. Scored pairs are judged by Spearman (x 100), labelled texts by kNN accuracy.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from ..data.dataset import MULTILABEL, SIMILARITY
from ..encoders import embed, load_encoder, num_layers
from ..errors import CeaError
from ..evaluation.classification import knn_evaluate
from ..evaluation.similarity import sts_correlations
from ..paths import write_json
from ..reports.plots import layer_curve
from .config import TrainConfig, check_config, load_data
from .train import train_or_reuse


def frozen_curve(config: TrainConfig, ds, progress: bool = True) -> dict[int, dict[str, float]]:
    """Dev and test score of every hidden state of the untrained model (mean or the model's pooling)."""
    model = load_encoder(config.model, pooling=config.pooling, device=config.device)
    layers = list(range(num_layers(model) + 1))
    pooling = config.pooling or "mean"
    curve: dict[int, dict[str, float]] = {layer: {} for layer in layers}
    if ds.task == SIMILARITY:
        for split in ("dev", "test"):
            frame = ds[split]
            a, b = (embed(model, list(frame[c]), layers, (pooling,), progress=progress) for c in ("text1", "text2"))
            for layer in layers:
                curve[layer][split] = sts_correlations(a[layer, pooling], b[layer, pooling], frame["score"])["spearman"]
        return curve
    ref = embed(model, list(ds["train"]["text"]), layers, (pooling,), progress=progress)
    for split in ("dev", "test"):
        queries = embed(model, list(ds[split]["text"]), layers, (pooling,), progress=progress)
        for layer in layers:
            curve[layer][split] = knn_evaluate(
                ref[layer, pooling], ds["train"]["label"], queries[layer, pooling], ds[split]["label"], config.knn_k
            ).metrics()["knn_accuracy"]
    return curve


def sweep_layers(
    base: TrainConfig,
    layers: list[int] | None,
    seeds: list[int],
    output: str | Path,
    progress: bool = True,
    on_run=None,
) -> dict:
    if not seeds:
        raise CeaError("--seeds needs at least one seed")
    check_config(base)
    output = Path(output)
    ds = load_data(base)
    if ds.task == MULTILABEL:
        raise CeaError(
            "sweep-layers takes scored pairs or texts with one label each; train texts with several "
            "labels with cea train"
        )
    metric = "spearman" if ds.task == SIMILARITY else "knn_accuracy"
    depth = num_layers(load_encoder(base.model, pooling=base.pooling))
    layers = layers or list(range(1, depth + 1))
    if outside := [layer for layer in layers if not 1 <= layer <= depth]:
        raise CeaError(
            f"--layers {','.join(map(str, outside))} lie outside the model's {depth} blocks; "
            f"choose between 1 and {depth}"
        )
    frozen = frozen_curve(base, ds, progress)

    def run(layer: int, seed: int) -> dict[str, float]:  # its dev and test figures
        folder = output / f"layer-{layer}" / f"seed-{seed}"
        result = train_or_reuse(
            dataclasses.replace(base, layers=layer, seed=seed, output=str(folder), resume=False), progress
        )
        if on_run:
            on_run(layer, seed, result)
        return {split: result["metrics"][split][metric] for split in ("dev", "test")}

    tuned = {layer: run(layer, seeds[0]) for layer in layers}
    best = max(layers, key=lambda layer: tuned[layer]["dev"])
    tests = [tuned[best]["test"]] + [run(best, seed)["test"] for seed in seeds[1:]]
    summary = {
        "format": "cea.sweep/1",
        "dataset": base.dataset,
        "model": base.model,
        "objective": base.objective,
        "metric": metric,
        "seeds": seeds,
        "layers": layers,
        "frozen": {str(k): v for k, v in frozen.items()},
        "fine_tuned": {str(k): v for k, v in tuned.items()},
        "best_layer": best,
        "best_test": tests,
        "best_test_mean": round(float(np.mean(tests)), 2),
        "best_test_std": round(float(np.std(tests)), 2),
        "best_frozen_layer": max(frozen, key=lambda k: frozen[k]["dev"]),
        "config": dataclasses.asdict(base),
    }
    curves = {
        f"{name}, {split}": {layer: v[split] for layer, v in curve.items() if split in v}  # scores by depth
        for name, curve in (("frozen", frozen), ("fine-tuned", tuned))
        for split in ("dev", "test")
    }
    layer_curve(
        output / "layer_curve.png",
        curves,
        f"{metric.replace('_', ' ')} (x 100)",
        f"{Path(base.dataset).stem}, {Path(base.model).name}, {base.objective}",
    )
    write_json(output / "sweep.json", summary)
    return summary
