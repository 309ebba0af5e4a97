"""Probe frozen encoders: kNN accuracy of every model x layer x pooling on a labelled data set.

The references are the train and dev splits and the queries the test split (``mode="split"``), or every example is
classified by all the others (``mode="loo"``, leave-one-out, as the CEA study's frozen tables did). ``a+b`` in
``models`` concatenates the unit embeddings of several models at the same layer index (``last``: each one's last).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from ..data import CLASSIFICATION, TextDataset
from ..data.dataset import MULTILABEL
from ..encoders import DEFAULT_MODEL, embed, load_encoder, model_fingerprint, num_layers
from ..encoders.build import cut_tokens, is_static
from ..errors import CeaError, OptionError
from ..knn import normalize
from ..paths import atomic_path, write_json
from .classification import knn_evaluate
from .multilabel import multilabel_evaluate
from .provenance import provenance

MODES = ("split", "loo")


def parse_layers(spec: str, depth: int) -> list[int]:
    """``all`` -> 0..depth (0 = embedding layer), ``last`` -> [depth], ``2,4`` or ``-1`` -> those."""
    spec = str(spec).strip().lower()
    if spec == "all":
        return list(range(depth + 1))
    if spec == "last":
        return [depth]
    try:
        layers = [int(part) for part in spec.split(",") if part.strip()]
    except ValueError:
        raise CeaError(f"cannot read layers {spec!r}; use all, last, a number or a list like 2,4,6") from None
    resolved = [depth + 1 + layer if layer < 0 else layer for layer in layers]
    for layer, at in zip(layers, resolved):
        if not 0 <= at <= depth:
            raise CeaError(f"layer {layer} is outside the model's 0..{depth} hidden states")
    return sorted(set(resolved))


@dataclass
class ProbeResult:
    rows: list[dict]
    meta: dict = field(default_factory=dict)

    @property
    def metric(self) -> str:
        """The score rows are ranked by: kNN accuracy, or micro-F1 for texts with several labels."""
        return "micro_f1" if "micro_f1" in self.rows[0] else "accuracy"

    def best(self, metric: str | None = None) -> dict:
        return max(self.rows, key=lambda r: r[metric or self.metric])

    def save(self, folder: str | Path) -> None:
        """``results.csv`` (one row per model x layer x pooling) and ``results.json`` (rows and meta), atomically."""
        import pandas as pd

        with atomic_path(Path(folder) / "results.csv") as tmp:
            pd.DataFrame(self.rows).to_csv(tmp, index=False)
        write_json(Path(folder) / "results.json", {"format": "cea.probe/1", "rows": self.rows, "meta": self.meta})


def _plan(models, encoders: dict, layers: str) -> tuple[dict[str, set[int]], list]:
    """The layers each member encoder is encoded at (once, for every combination that needs it), and per model or
    combination ``a+b``: its members, the layers shown and each member's layers (``last``: each member's own)."""
    wanted: dict[str, set[int]] = {m: set() for m in encoders}
    plan = []
    for combo in models:
        parts = combo.split("+")
        depths = [num_layers(encoders[p]) for p in parts]
        if len(parts) > 1 and str(layers).lower() == "last":  # each member's own last layer
            idx, per_part = ["last"], [[d] for d in depths]
        else:
            idx = parse_layers(layers, min(depths))
            per_part = [idx for _ in parts]
        for part, part_layers in zip(parts, per_part):
            wanted[part].update(part_layers)
        plan.append((combo, parts, idx, per_part))
    return wanted, plan


def _splits(mode: str, references: str, queries: str, multi: bool) -> tuple[list[str], list[str]]:
    """``(reference splits, query splits)`` of a probe in ``mode``; refused where they cannot be probed."""
    if multi and mode == "loo":
        raise CeaError("--mode loo takes texts with one label each; probe texts with several in split mode")
    if mode not in MODES:
        raise CeaError(f"unknown mode {mode!r}; use split or loo")
    if mode == "loo":  # every split is both references and queries
        return ["train", "dev", "test"], []
    ref_splits = [s for s in references.split("+") if s]
    if queries in ref_splits:
        raise CeaError(f"the {queries} split cannot be both references and queries in split mode; use --mode loo")
    return ref_splits, [queries]


def _scores(refs: np.ndarray, ref_y, query_x, query_y, k: int, multi: bool) -> dict:
    """A row's scores: the kNN vote's accuracy, or for label sets its micro-F1, macro-F1 and subset accuracy."""
    if multi:
        result = multilabel_evaluate(refs, list(ref_y), {"test": (query_x, list(query_y))}, k, 0.5)
        return {m: result.scores["test"][m] for m in ("micro_f1", "macro_f1", "subset_accuracy")}
    return knn_evaluate(refs, ref_y, query_x, query_y, k).metrics(prefix="")


def _loaded(members: list[str], given: dict | None, device, precision: str, max_seq_length: int | None) -> dict:
    """The encoders ``members`` names (name -> SentenceTransformer): those ``given`` loaded before, the others loaded
    on ``device`` in ``precision``; each cut at ``max_seq_length`` tokens where given."""
    encoders = {
        name: (given or {}).get(name) or load_encoder(name, device=device, precision=precision) for name in members
    }
    for encoder in encoders.values():
        if max_seq_length:
            cut_tokens(encoder, max_seq_length)
    return encoders


def probe(
    dataset: TextDataset,
    models=(DEFAULT_MODEL,),
    layers: str = "all",
    poolings=("mean", "cls"),
    k: int = 5,
    mode: str = "split",
    references: str = "train+dev",
    queries: str = "test",
    batch_size: int | None = None,
    cache=True,
    progress: bool = True,
    on_row=None,
    device: str | None = None,
    precision: str = "fp32",
    max_seq_length: int | None = None,
    encoders: dict | None = None,
) -> ProbeResult:
    """One row per (model, layer, pooling): the ``references`` splits classify the ``queries`` split (``mode="split"``),
    or every example is classified by all the others (``"loo"``); the encoders run on ``device`` in ``precision``,
    texts cut at ``max_seq_length`` tokens where given. Texts with several labels are scored by micro-F1, macro-F1
    and subset accuracy of the kNN vote per label at a majority (no dev split to choose another threshold on).
    ``encoders``: models loaded before (name -> SentenceTransformer)."""
    multi = dataset.task == MULTILABEL
    if dataset.task != CLASSIFICATION and not multi:
        raise CeaError(f"{dataset.name} is a {dataset.task} data set; probing needs labels")
    ref_splits, query_splits = _splits(mode, references, queries, multi)
    column = "labels" if multi else "label"
    ref_y = np.concatenate([dataset[s][column].to_numpy() for s in ref_splits])
    query_y = np.concatenate([dataset[s][column].to_numpy() for s in query_splits]) if query_splits else None
    n_refs = len(ref_y) - (1 if mode == "loo" else 0)
    if k > n_refs:
        raise CeaError(f"k = {k} is larger than the {n_refs} references available; choose k <= {n_refs}")
    started = time.perf_counter()
    members = sorted({m for combo in models for m in combo.split("+")})
    if max_seq_length is not None and max_seq_length < 2:
        raise OptionError("max_seq_length", f"must be at least 2 tokens, got {max_seq_length}")
    encoders = _loaded(members, encoders, device, precision, max_seq_length)
    fingerprints, timings = {name: model_fingerprint(model) for name, model in encoders.items()}, {}
    wanted, plan = _plan(models, encoders, layers)
    embeddings = {}
    for name in members:
        t0 = time.perf_counter()
        pooled = ["mean"] if is_static(encoders[name]) else poolings  # a static encoder: its mean only
        encode = partial(embed, encoders[name], layers=sorted(wanted[name]), poolings=pooled, cache=cache)
        embeddings[name] = {
            split: encode(list(dataset[split]["text"]), batch_size=batch_size, progress=progress)
            for split in ref_splits + query_splits
        }
        timings[f"encode {name}"] = round(time.perf_counter() - t0, 3)

    def stack(splits, parts, per_part, pos, pooling):
        return np.vstack(
            [
                np.hstack([normalize(embeddings[p][split][(per_part[i][pos], pooling)]) for i, p in enumerate(parts)])
                for split in splits
            ]
        )

    rows = []
    for combo, parts, idx, per_part in plan:
        for pos, layer in enumerate(idx):
            for pooling in ["mean"] if any(is_static(encoders[p]) for p in parts) else poolings:
                t0 = time.perf_counter()
                query_x = stack(query_splits, parts, per_part, pos, pooling) if mode == "split" else None
                refs = stack(ref_splits, parts, per_part, pos, pooling)
                scores = _scores(refs, ref_y, query_x, query_y, k, multi)
                row = {
                    "model": combo,
                    "layer": layer,
                    "pooling": pooling,
                    **scores,
                    "seconds": round(time.perf_counter() - t0, 3),
                }
                rows.append(row)
                if on_row:
                    on_row(row)
    meta = {
        "dataset": dataset.name,
        "dataset_fingerprint": dataset.fingerprint(),
        "source": dataset.source,
        "mode": mode,
        "references": "all (leave-one-out)" if mode == "loo" else references,
        "queries": "all" if mode == "loo" else queries,
        "n_references": len(ref_y),
        "n_queries": len(query_y if query_y is not None else ref_y),
        "k": k,
        "layers": str(layers),
        "poolings": list(poolings),
        "models": list(models),
        "max_seq_length": {name: getattr(model, "max_seq_length", None) for name, model in encoders.items()},
        "model_fingerprints": fingerprints,
        "seed": None,
        "timings": {**timings, "total": round(time.perf_counter() - started, 3)},
        **provenance(),
    }
    return ProbeResult(rows, meta)
