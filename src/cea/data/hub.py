"""Hugging Face hub loaders, for the catalog's data sets that live only there.

The hub is unreachable on machines without internet; rather than let ``datasets`` retry for half a
minute, :func:`hub_reachable` checks first and the error says which sources were tried and how to
use a local file instead.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from urllib.parse import urlparse

import pandas as pd

from ..errors import CeaError
from .dataset import CLASSIFICATION


@dataclass(frozen=True)
class HubSource:
    """A data set on the Hugging Face hub and how its columns map onto cea's."""

    path: str
    config: str | None = None
    columns: dict[str, str] = field(default_factory=lambda: {"text": "text", "label": "label"})
    splits: dict[str, str] = field(default_factory=lambda: {"train": "train", "test": "test"})
    single_label: bool = False  # the label column holds lists: keep rows with exactly one label

    @property
    def label(self) -> str:
        return f"hub {self.path}" + (f" ({self.config})" if self.config else "")

    def load(self, task: str = CLASSIFICATION, loader=None) -> dict[str, pd.DataFrame]:
        """Download (or read from the datasets cache) and return cea-shaped splits."""
        if loader is None:
            from datasets import load_dataset as loader
        raw = loader(self.path, self.config) if self.config else loader(self.path)
        out = {}
        for ours, theirs in self.splits.items():
            if theirs not in raw:
                raise CeaError(f"{self.label} has no split {theirs!r}; it has {', '.join(raw)}")
            frame, data = raw[theirs].to_pandas(), pd.DataFrame()
            for column, source in self.columns.items():
                if source not in frame.columns:
                    raise CeaError(f"{self.label} has no column {source!r}; it has {', '.join(frame.columns)}")
                data[column] = frame[source]
            if task == CLASSIFICATION:
                feature = raw[theirs].features[self.columns["label"]]
                if self.single_label:
                    data = data[data["label"].map(len) == 1].copy()
                    data["label"] = data["label"].map(lambda v: v[0])
                    feature = getattr(feature, "feature", feature)
                names = getattr(feature, "names", None)
                if names is not None and pd.api.types.is_integer_dtype(data["label"]):
                    data = data[data["label"] >= 0]  # hidden test labels are -1
                    data["label"] = data["label"].map(lambda i: names[i])
                data["label"] = data["label"].astype(str)
            out[ours] = data.reset_index(drop=True)
        return out


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
