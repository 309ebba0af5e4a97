"""Hugging Face hub loaders: the catalog's data sets that live only there, any other by id (``hub:ORG/NAME``), or a
folder that ``datasets`` reads. Without internet :func:`hub_reachable` fails fast (``datasets`` would retry for half a
minute), and the error says which sources were tried and how to use a local file instead.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pandas as pd

from ..errors import CeaError, OptionError
from .dataset import CLASSIFICATION, MULTILABEL, label_sets
from .labels import label_name
from .readers import SPLIT_NAMES


@dataclass(frozen=True)
class HubSource:
    """A data set on the Hugging Face hub and how its columns map onto cea's."""

    path: str
    config: str | None = None
    columns: dict[str, str] = field(default_factory=lambda: {"text": "text", "label": "label"})
    splits: dict[str, str] | None = field(default_factory=lambda: {"train": "train", "test": "test"})  # None: by name

    @property
    def is_local_save(self) -> bool:
        """A folder written by ``datasets``' ``save_to_disk`` (read with ``load_from_disk``)."""
        return any((Path(self.path) / name).exists() for name in ("dataset_dict.json", "dataset_info.json"))

    @property
    def label(self) -> str:
        return f"hub {self.path}" + (f" ({self.config})" if self.config else "")

    def load(self, task: str = CLASSIFICATION, loader=None) -> dict[str, pd.DataFrame]:
        """Download (or read from the datasets cache) and return cea-shaped splits; a label column of lists
        (GoEmotions') becomes a multi-label set's ``labels``, every label of a text kept."""
        if loader is None and self.is_local_save:
            from datasets import load_from_disk as loader
        elif loader is None:
            from datasets import load_dataset as loader
        raw = loader(self.path, self.config) if self.config else loader(self.path)
        if not hasattr(raw, "keys"):  # a single split saved on its own
            raw = {"train": raw}
        splits = self.splits or {
            ours: next(t for t in raw if t in names)
            for ours, names in SPLIT_NAMES.items()
            if any(t in names for t in raw)
        }
        if "train" not in splits:
            raise CeaError(
                f"{self.label} has no train split (it has {', '.join(raw)}); name one with "
                f"--split-map train=NAME,dev=NAME,test=NAME"
            )
        out = {}
        for ours, theirs in splits.items():
            if theirs not in raw:
                raise CeaError(f"{self.label} has no split {theirs!r}; it has {', '.join(raw)}")
            frame, data = raw[theirs].to_pandas(), pd.DataFrame()
            for column, source in self.columns.items():
                if source not in frame.columns:
                    raise CeaError(f"{self.label} has no column {source!r}; it has {', '.join(frame.columns)}")
                data[column] = frame[source]
            if task == CLASSIFICATION:
                feature = raw[theirs].features[self.columns["label"]]
                inner = getattr(feature, "feature", None)  # a sequence of labels per text
                if inner is not None:
                    names = getattr(inner, "names", None)
                    data["labels"] = label_sets([[names[i] for i in v] if names else v for v in data["label"]])
                    out[ours] = data.drop(columns="label").reset_index(drop=True)
                    continue
                names = getattr(feature, "names", None)
                if names is not None and pd.api.types.is_integer_dtype(data["label"]):
                    data = data[data["label"] >= 0]  # hidden test labels are -1
                    data["label"] = data["label"].map(dict(enumerate(names)))
                data["label"] = data["label"].map(label_name)
            out[ours] = data.reset_index(drop=True)
        return out


def task_of(splits: dict[str, pd.DataFrame], task: str) -> str:
    """The task of loaded splits: multi-label where labels came as lists."""
    return MULTILABEL if "labels" in next(iter(splits.values())).columns else task


def hub_reachable(timeout: float = 3.0) -> bool:
    """True when the hub answers, or when offline mode says to use the local datasets cache."""
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        return True
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or ""
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def parse_split_map(spec: str | None) -> dict[str, str] | None:
    """``"train=train,dev=validation,test=test"`` -> ``{"train": "train", "dev": "validation", ...}`` (ours=theirs)."""
    if not spec:
        return None
    pairs = [part.split("=", 1) for part in spec.split(",") if part.strip()]
    out = {ours.strip(): theirs.strip() for ours, theirs in (p for p in pairs if len(p) == 2)}
    if len(out) != len(pairs) or set(out) - set(SPLIT_NAMES) or "train" not in out or not all(out.values()):
        raise OptionError(
            "split_map",
            f"must map train (and dev, test) to the data set's splits, as in "
            f"train=train,dev=validation,test=test; got {spec!r}",
        )
    return out
