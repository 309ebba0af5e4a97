"""What a bundle takes in, whether it is being created, changed or asked: texts (none empty, encoded to unit
length by the bundle's encoder) and labels in the form the bundle keeps them (names, or sorted tuples of names
in a multi-label bundle; never the answer ``unknown``)."""

from __future__ import annotations

import numpy as np

from ..data.labels import UNKNOWN, label_name, label_set
from ..encoders.device import encode_batch
from ..encoders.embeddings import encode as encode_passes
from ..errors import CeaError
from ..knn import normalize

# the source of a label's name examples (its name's words, a Label Studio Choice's hint), before the label's own name:
# they are marked so that they are never taken for annotations
NAMED = "label-name:"


def is_label_set(label) -> bool:
    """Several labels of one example (a list, tuple or array of names) rather than one name."""
    return isinstance(label, (list, tuple, np.ndarray))


def normalise_labels(labels, multi: bool) -> list:
    """Labels as a bundle keeps them (:mod:`cea.data.labels`, as the readers do): names, or sorted tuples of distinct
    names in a multi-label bundle; empty names and the name unknown (the answer for texts of no label) are refused."""
    if multi:
        out = [label_set(label if is_label_set(label) else [label]) for label in labels]
        if any(not label for label in out):
            raise CeaError("an example has an empty list of labels; give every example at least one")
    elif any(is_label_set(label) for label in labels):
        raise CeaError(
            "this bundle holds one label per example; give each example one label, or build a bundle from "
            "examples with label lists"
        )
    else:
        out = [label_name(label) for label in labels]
        if not all(out):
            raise CeaError("an example has an empty label; give every example a label")
    if any(UNKNOWN in (label if multi else (label,)) for label in out):
        raise CeaError(
            f"{UNKNOWN!r} is the bundle's answer for texts of none of its labels; give those examples another label"
        )
    return out


def check_texts(texts) -> None:
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise CeaError(f"text {i} is empty; every example and query needs some text")


def encode(
    encoder, texts, batch_size: int | None = None, progress: bool = False, overhead: float | None = None
) -> np.ndarray:
    """Unit-length float32 embeddings of ``texts`` (checked: none empty), in passes bounded by texts and tokens; with
    ``overhead``, those that cost least (:func:`cea.encoders.embeddings.encode`)."""
    check_texts(texts)
    if not len(texts):  # an empty bundle's references: no rows of the encoder's width
        return np.zeros((0, encoder.get_embedding_dimension()), np.float32)
    batch_size = batch_size or encode_batch(encoder)
    return normalize(encode_passes(encoder, list(texts), batch_size=batch_size, overhead=overhead, progress=progress))
