"""What produced a result: package versions, machine, time. Recorded with every result file."""

from __future__ import annotations

import datetime as _dt
import os
import platform
from importlib import metadata

PACKAGES = (
    "cea",
    "torch",
    "transformers",
    "sentence-transformers",
    "scikit-learn",
    "numpy",
    "faiss-cpu",
    "onnxruntime",
    "datasets",
)


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def provenance() -> dict:
    import torch

    return {
        "versions": versions(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads()},
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
