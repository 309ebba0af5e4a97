"""Batch prediction of a corpus by a bundle in one process (``cea predict BUNDLE --input PATH --output PATH``): the
corpus streamed in batches (:func:`cea.data.streams.read_batches`), each batch encoded, decided and written before the
next is read (:class:`cea.data.streams.BatchWriter`), so that memory holds one batch whatever the corpus's size.

What it returns
    The input's rows, every column kept (``row``: each row's number where the input has no ``id``), with ``label``
    (``unknown`` below the threshold), ``score`` and ``evidence``; ``closest`` (the best class where the answer is
    unknown); ``labels`` in a multi-label bundle; with ``top`` N, the N likeliest labels with their probabilities (the
    head's, or the neighbours' vote shares in a kNN bundle).

When to use it
    A corpus on one machine; ``cea serve`` for traffic, ``cea embed`` for embeddings.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pandas as pd

from ..data.streams import BATCH_ROWS, BatchWriter, read_batches
from .bundle import Bundle

# texts searched and decided at once: the search holds their similarities to every reference (10,000 texts against
# banking77's 10,003 references: 400 MB), 1,000 at a time a tenth of that
DECIDE_ROWS = 1000


def predict_rows(bundle: Bundle, frame: pd.DataFrame, k: int | None = None, threshold: float | None = None,
                 top: int = 0) -> pd.DataFrame:
    """``frame`` (a ``text`` column) with the bundle's answers beside it (module docstring)."""
    texts = frame["text"].tolist()
    vectors = bundle.embed(texts)
    found = [p for a in range(0, len(texts), DECIDE_ROWS)  # a search's similarities: DECIDE_ROWS x the references
             for p in bundle.predict_many([(texts[a:a + DECIDE_ROWS], k, threshold)], vectors[a:a + DECIDE_ROWS])[0]]
    out = frame.assign(label=[p.label for p in found], score=[p.score for p in found],
                       evidence=[p.evidence for p in found])
    out["closest"] = pd.Series([p.closest for p in found], dtype="string", index=out.index)  # every batch: one schema
    if bundle.multi_label:
        out["labels"] = [[x["label"] for x in p.labels] for p in found]
    if top:
        head = bundle.head()
        if head is not None and not bundle.multi_label:
            proba = head.predict_proba(vectors)
            order = np.argsort(-proba, axis=1)[:, :top]
            out["top"] = [[{"label": str(head.classes[j]), "score": round(float(row[j]), 6)} for j in best]
                          for row, best in zip(proba, order)]
        else:
            shares = [Counter(str(n["label"]) for n in p.neighbours) for p in found]
            out["top"] = [[{"label": label, "score": round(count / max(sum(c.values()), 1), 6)}
                           for label, count in c.most_common(top)] for c in shares]
    return out


def predict_files(bundle: Bundle, input: str, output: str, text_column: str = "text", k: int | None = None,
                  threshold: float | None = None, top: int = 0, rows: int = BATCH_ROWS, overwrite: bool = False,
                  say=None) -> int:
    """Predict every row of ``input`` (a file, folder or glob) into ``output`` (``.jsonl``, ``.csv`` or ``.parquet``),
    ``rows`` at a time; the rows written. ``say(rows)``: told after each batch. Nothing is left at ``output`` unless
    every row was written."""
    with BatchWriter(output, overwrite) as writer:
        for frame in read_batches(input, text_column, rows):
            answered = predict_rows(bundle, frame, k, threshold, top)
            if output.lower().endswith(".csv"):  # lists as JSON in a CSV cell
                for column in ("labels", "top"):
                    if column in answered:
                        answered[column] = [json.dumps(x) for x in answered[column]]
            writer.write(answered)
            if say is not None:
                say(writer.rows)
        return writer.rows
