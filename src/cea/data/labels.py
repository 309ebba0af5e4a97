"""Label names as cea keeps them, wherever they come from: a name is its text without surrounding whitespace, and a
text's several labels are a sorted tuple of distinct names. Every reader, the bundle and the linear head normalise
labels here, so ``" a"`` read from a file and ``"a"`` sent to the service are one label."""

from __future__ import annotations

import numpy as np

UNKNOWN = "unknown"  # the answer for texts of none of the labels (cea.knn.unknown), never a label's name


def label_name(value) -> str:
    """One label's name: ``value`` as a string, without surrounding whitespace."""
    return str(value).strip()


def label_set(value, separator: str | None = None) -> tuple[str, ...]:
    """One text's labels as a sorted tuple of distinct names (:func:`label_name`; empty ones dropped): lists, tuples
    and arrays as they are, strings split at ``separator`` (else one label), None and NaN no label."""
    if isinstance(value, (list, tuple, np.ndarray)):
        names = list(value)
    elif separator and isinstance(value, str):
        names = value.split(separator)
    elif value is None or (isinstance(value, float) and np.isnan(value)):
        names = []
    else:
        names = [value]
    return tuple(sorted({name for name in map(label_name, names) if name}))
