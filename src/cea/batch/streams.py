"""Tables too large to hold: a corpus read in batches of rows (:func:`read_batches`) and results written batch by batch
(:class:`BatchWriter`), so that batch prediction holds one batch at a time whatever the corpus's size.

What it expects
    Input: a file, a folder or a glob of ``.txt`` (a text a line), ``.jsonl``, ``.csv``/``.tsv`` or ``.parquet``
    files, read in order of their names; a text column (``--text-column``), every other column kept. Output: a
    ``.jsonl``, ``.csv`` or ``.parquet`` file, by its suffix.

What it returns
    Batches as pandas frames with the text column named ``text`` and a ``row`` column (the row's number over the whole
    input) where the input has no ``id`` column, so that a row can be found again whatever the order of the work.

Why written here
    pandas reads CSV and JSON Lines in chunks and pyarrow Parquet in record batches, each with its own call; this puts
    the four formats, and a folder or glob of them, behind one iterator, and writes the output to a temporary file
    renamed into place only once complete (a run that fails leaves nothing that looks finished).
"""

from __future__ import annotations

import glob
import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from ..errors import CeaError

INPUTS = (".txt", ".jsonl", ".json", ".csv", ".tsv", ".parquet")
OUTPUTS = (".jsonl", ".csv", ".parquet")
BATCH_ROWS = 10_000  # rows read at a time


def input_files(spec: str) -> list[Path]:
    """The files of ``spec`` (a file, a folder of them, or a glob), sorted by name; a CeaError names what is missing."""
    path = Path(spec)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in INPUTS and not p.name.startswith("."))
    elif any(c in spec for c in "*?["):
        files = sorted(Path(p) for p in glob.glob(spec) if Path(p).suffix.lower() in INPUTS)
    elif path.exists():
        if path.suffix.lower() not in INPUTS:  # a folder's and a glob's files are of these already
            raise CeaError(f"cannot read {path.name}: use a .txt, .jsonl, .csv, .tsv or .parquet file")
        files = [path]
    else:
        raise CeaError(f"--input {spec} does not exist; pass a file, a folder or a glob of text files")
    if not files:
        raise CeaError(f"--input {spec} holds no .txt, .jsonl, .csv, .tsv or .parquet file")
    return files


def _chunks(file: Path, rows: int) -> Iterator[pd.DataFrame]:
    kind = file.suffix.lower()
    if kind == ".txt":
        with open(file, encoding="utf-8") as fh:
            lines = (line.rstrip("\n") for line in fh if line.strip())
            while batch := list(itertools.islice(lines, rows)):
                yield pd.DataFrame({"text": batch})
    elif kind in (".jsonl", ".json"):
        yield from pd.read_json(file, lines=True, chunksize=rows)
    elif kind in (".csv", ".tsv"):
        yield from pd.read_csv(
            file, sep="," if kind == ".csv" else "\t", keep_default_na=False, na_values=[""], chunksize=rows
        )
    else:
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(file).iter_batches(batch_size=rows):
            yield batch.to_pandas()


def as_rows(chunk: pd.DataFrame, file: Path, text_column: str, first: int) -> pd.DataFrame:
    """``chunk`` of ``file`` with its text in ``text`` and, where it has no ``id`` column, its rows numbered from
    ``first`` in ``row``; a CeaError names a missing text column and the columns there are."""
    column = "text" if file.suffix.lower() == ".txt" else text_column
    if column not in chunk.columns:
        raise CeaError(
            f"{file.name} has no column {column!r} (it has {', '.join(map(str, chunk.columns))}); "
            "choose one with --text-column"
        )
    chunk = chunk.rename(columns={column: "text"})
    chunk["text"] = chunk["text"].astype(str)
    if "id" not in chunk.columns:
        chunk.insert(0, "row", range(first, first + len(chunk)))
    return chunk.reset_index(drop=True)


def read_batches(spec: str, text_column: str = "text", rows: int = BATCH_ROWS) -> Iterator[pd.DataFrame]:
    """Batches of at most ``rows`` rows of the input ``spec``, as the module docstring says; a CeaError names a file
    that cannot be read, an empty one, and a missing text column with the columns it has."""
    done = 0
    for file in input_files(spec):
        seen = 0
        try:
            for chunk in _chunks(file, rows):
                chunk = as_rows(chunk, file, text_column, done)
                done, seen = done + len(chunk), seen + len(chunk)
                yield chunk
        except CeaError:
            raise
        except (ValueError, OSError, pd.errors.ParserError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CeaError(f"cannot read {file.name}: {first}") from None
        if not seen:
            raise CeaError(f"{file.name} holds no rows; pass a file with texts")


class BatchWriter:
    """Writes frames to ``path`` (``.jsonl``, ``.csv`` or ``.parquet``) a batch at a time via a hidden file beside it,
    renamed onto ``path`` at :meth:`close` (removed on an error); refused where ``path`` exists unless ``overwrite``."""

    def __init__(self, path: str | Path, overwrite: bool = False):
        self.path = Path(path)
        if self.path.suffix.lower() not in OUTPUTS:
            raise CeaError(f"--output {self.path.name}: write a .jsonl, .csv or .parquet file")
        if self.path.exists() and not overwrite:
            raise CeaError(f"--output {self.path} exists; pass --overwrite to replace it")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(f".{self.path.name}.part")
        self._fh = self._parquet = None
        self.rows = 0

    def write(self, frame: pd.DataFrame) -> None:
        kind = self.path.suffix.lower()
        if kind == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.Table.from_pandas(frame, preserve_index=False)
            if self._parquet is None:
                self._parquet = pq.ParquetWriter(self.tmp, table.schema)
            self._parquet.write_table(table.cast(self._parquet.schema))
        else:
            if self._fh is None:
                self._fh = open(self.tmp, "w", encoding="utf-8", newline="")  # noqa: SIM115 (closed in close)
            if kind == ".csv":
                frame.to_csv(self._fh, index=False, header=self.rows == 0)
            else:
                for record in frame.to_dict("records"):
                    self._fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self.rows += len(frame)

    def close(self) -> None:
        """Finish the file and put it in place (fsync'd first)."""
        if self._parquet is not None:
            self._parquet.close()
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
        if self._parquet is None and self._fh is None:
            self.tmp.touch()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        for handle in (self._parquet, self._fh):
            if handle is not None:
                handle.close()
        self.tmp.unlink(missing_ok=True)

    def __enter__(self) -> BatchWriter:
        return self

    def __exit__(self, kind, *exc) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()
