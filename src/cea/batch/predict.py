"""Batch prediction of a corpus by a bundle (``cea predict BUNDLE --input PATH --output PATH``). Into a file, in one
process: the corpus streamed in batches (:func:`cea.batch.streams.read_batches`), each batch encoded, decided and
written before the next is read (:class:`cea.batch.streams.BatchWriter`), so that memory holds one batch whatever the
corpus's size. Into a folder, on an engine (:mod:`cea.batch.engines`: this process, or Ray actors that each load the
bundle once): the corpus in numbered parts (:mod:`cea.batch.parts`), each predicted into ``part-NNNNN.parquet``; the
folder is put in place once every part is written.

What it returns
    The input's rows, every column kept (``row``: each row's number where the input has no ``id``), with ``label``
    (``unknown`` below the threshold), ``score`` and ``evidence``; ``closest`` (the best class where the answer is
    unknown); ``labels`` in a multi-label bundle; with ``top`` N, the N likeliest labels with their probabilities (the
    head's, or the neighbours' vote shares in a kNN bundle).

When to use it
    A corpus to label offline (a file on one machine, a folder of parts on a Ray cluster); ``cea serve`` for
    traffic, ``cea embed`` for embeddings.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from ..bundle.bundle import Bundle
from ..errors import OptionError
from ..hardware import bounded_primitive_cache
from ..paths import atomic_path
from .engines import run_parts, spent
from .parts import PART_ROWS, Part, plan_parts, read_part
from .streams import BATCH_ROWS, OUTPUTS, BatchWriter, read_batches

# texts searched and decided at once: the search holds their similarities to every reference (10,000 texts against
# banking77's 10,003 references: 400 MB), 1,000 at a time a tenth of that
DECIDE_ROWS = 1000


def predict_rows(
    bundle: Bundle, frame: pd.DataFrame, k: int | None = None, threshold: float | None = None, top: int = 0
) -> pd.DataFrame:
    """``frame`` (a ``text`` column) with the bundle's answers beside it (module docstring)."""
    texts = frame["text"].tolist()
    vectors = bundle.embed(texts)
    found = [
        p
        for a in range(0, len(texts), DECIDE_ROWS)  # a search's similarities: DECIDE_ROWS x the references
        for p in bundle.predict_encoded(texts[a : a + DECIDE_ROWS], vectors[a : a + DECIDE_ROWS], k, threshold)
    ]
    out = frame.assign(
        label=[p.label for p in found], score=[p.score for p in found], evidence=[p.evidence for p in found]
    )
    out["closest"] = pd.Series([p.closest for p in found], dtype="string", index=out.index)  # every batch: one schema
    if bundle.multi_label:
        out["labels"] = [[x["label"] for x in p.labels] for p in found]
    if top:
        head = bundle.head()
        if head is not None and not bundle.multi_label:
            proba = head.predict_proba(vectors)
            order = np.argsort(-proba, axis=1)[:, :top]
            out["top"] = [
                [{"label": str(head.classes[j]), "score": round(float(row[j]), 6)} for j in best]
                for row, best in zip(proba, order)
            ]
        else:
            shares = [Counter(str(n["label"]) for n in p.neighbours) for p in found]
            out["top"] = [
                [
                    {"label": label, "score": round(count / max(sum(c.values()), 1), 6)}
                    for label, count in c.most_common(top)
                ]
                for c in shares
            ]
    return out


def predict_files(
    bundle: Bundle,
    input: str,
    output: str,
    text_column: str = "text",
    k: int | None = None,
    threshold: float | None = None,
    top: int = 0,
    rows: int = BATCH_ROWS,
    overwrite: bool = False,
    say=None,
) -> int:
    """Predict every row of ``input`` (a file, folder or glob) into ``output`` (``.jsonl``, ``.csv`` or ``.parquet``),
    ``rows`` at a time; the rows written. ``say(rows)``: told after each batch. Nothing is left at ``output`` unless
    every row was written."""
    bounded_primitive_cache()  # before the first encode: memory that stays the same over any corpus
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


class PartPredictor:
    """The bundle at ``bundle_dir`` loaded once; each part given (:meth:`__call__`) predicted into
    ``folder/part-NNNNN.parquet``. A worker of :func:`cea.batch.engines.run_parts`."""

    def __init__(
        self,
        bundle_dir: str,
        folder: str,
        text_column: str = "text",
        k: int | None = None,
        threshold: float | None = None,
        top: int = 0,
        device: str | None = None,
        precision: str = "fp32",
    ):
        self.bundle = Bundle.load(bundle_dir, device=device, precision=precision)
        self.folder, self.text_column, self.k, self.threshold, self.top = Path(folder), text_column, k, threshold, top

    def close(self) -> None:
        self.bundle.close()

    def __call__(self, part: dict) -> dict:
        part, clock = Part(**part), [time.perf_counter()]
        frame = read_part(part, self.text_column)
        clock.append(time.perf_counter())
        answered = predict_rows(self.bundle, frame, self.k, self.threshold, self.top)
        clock.append(time.perf_counter())
        with atomic_path(self.folder / f"{part.name}.parquet") as tmp:
            answered.to_parquet(tmp, index=False)
        clock.append(time.perf_counter())
        return {"part": part.index, "rows": len(answered), **spent(clock)}


def is_folder(output: str | Path) -> bool:
    """Whether ``--output`` names a folder of parts (no .jsonl, .csv or .parquet suffix)."""
    return Path(output).suffix.lower() not in OUTPUTS


def predict_folder(
    bundle_dir: str | Path,
    input: str,
    output: str | Path,
    text_column: str = "text",
    k: int | None = None,
    threshold: float | None = None,
    top: int = 0,
    rows: int = PART_ROWS,
    overwrite: bool = False,
    engine: str = "local",
    address: str | None = None,
    actors: int | None = None,
    device: str | None = None,
    precision: str = "fp32",
    say=None,
) -> list[dict]:
    """Predict every row of ``input`` into the folder ``output``, one Parquet file a part of ``rows`` rows, on
    ``engine`` (:func:`cea.batch.engines.run_parts`); one dict per part (its rows, the node that did it). The
    folder appears only once complete; an existing one is refused unless ``overwrite``."""
    output = Path(output)
    if output.exists() and not overwrite:
        raise OptionError(
            "output",
            f"{output} exists; pass overwrite=True to replace it",
            cli=f"--output {output} exists; pass --overwrite to replace it",
        )
    parts = plan_parts(input, rows)
    output.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    try:
        options = {
            "bundle_dir": str(bundle_dir),
            "folder": str(work),
            "text_column": text_column,
            "k": k,
            "threshold": threshold,
            "top": top,
            "device": device,
            "precision": precision,
        }
        done = run_parts(
            PartPredictor, options, parts, engine, address, actors, gpus=str(device or "").startswith("cuda"), say=say
        )
        if output.exists():
            shutil.rmtree(output) if output.is_dir() else output.unlink()
        work.rename(output)
        return done
    finally:
        shutil.rmtree(work, ignore_errors=True)
