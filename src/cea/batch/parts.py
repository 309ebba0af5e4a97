"""A corpus cut into numbered parts that any process can read on its own: the unit of work of ``cea predict --engine
ray`` and ``cea embed`` (which writes one output file per part, so that a rerun writes only the parts missing).

What it expects
    The input of :func:`cea.batch.streams.read_batches`: a file, folder or glob of ``.txt``, ``.jsonl``, ``.csv`` /
    ``.tsv`` or ``.parquet`` files (or texts in memory, a data set's), and the rows a part holds.

What it returns
    :func:`plan_parts`: the parts in order (:class:`Part`: its file, where it starts, its rows and the number of its
    first row over the whole input). :func:`read_part`: a part's rows as :func:`~cea.batch.streams.read_batches` gives
    them (``text``; ``row`` where the input has no ``id``), equal to the same rows read in one stream.

Why written here
    Ray Data reads files in blocks of its choosing and numbers no rows; a part that a rerun finds again under one name,
    with its rows numbered, needs a plan made once. A Parquet part reads the row groups it spans; a text part seeks to
    its first byte, found by one scan that counts the file's records (a CSV record ends at a newline outside quotes).
"""

from __future__ import annotations

import functools
import io
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..errors import CeaError
from .streams import as_rows, input_files

PART_ROWS = 2_000  # rows a part holds: 0.4-15 s of an actor's work, 500 parts a million rows


@dataclass(frozen=True)
class Part:
    """Rows ``first`` .. ``first + rows`` of the input: in ``file`` from byte ``offset`` (text) or row ``offset``
    (Parquet); ``header`` the bytes of a CSV's header; ``texts`` the rows themselves where the input is in memory."""

    index: int
    file: str | None
    offset: int
    rows: int
    first: int
    header: int = 0
    texts: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return f"part-{self.index:05d}"


def _records(fh, csv: bool):
    """``(byte offset, line, whether a record starts there, whether one ends)`` for each line of ``fh`` from where it
    stands: a CSV's quotes left open carry a record on; blank lines are no record (read_batches skips them too)."""
    position, quoted = fh.tell(), False
    for line in fh:
        position += len(line)
        if not quoted and not line.strip():
            continue
        starts = not quoted
        quoted ^= csv and line.count(b'"') % 2 == 1
        yield position - len(line), line, starts, not quoted


def _scan(file: Path, rows: int) -> tuple[list[int], int, int]:
    """A text file's byte offsets where each part of ``rows`` records starts, its records and its header's bytes."""
    csv = file.suffix.lower() in (".csv", ".tsv")
    offsets, records, header = [], 0, 0
    with open(file, "rb") as fh:
        for offset, line, starts, ends in _records(fh, csv):
            in_header = csv and not header
            if starts and not in_header and records % rows == 0:
                offsets.append(offset)
            if ends and in_header:
                header = offset + len(line)
            elif ends:
                records += 1
    return offsets, records, header


def plan_parts(spec: str | list[str], rows: int = PART_ROWS) -> list[Part]:
    """The parts of ``spec`` (a file, folder or glob; or a list of texts), ``rows`` each (a file's last may hold
    fewer; no part spans two files). A CeaError names a file that holds no rows."""
    if rows < 1:
        raise CeaError(f"rows a part holds must be at least 1, got {rows}")
    if isinstance(spec, list):
        if not spec:
            raise CeaError("the corpus has no texts")
        return [
            Part(i, None, a, len(spec[a : a + rows]), a, texts=tuple(spec[a : a + rows]))
            for i, a in enumerate(range(0, len(spec), rows))
        ]
    parts, first = [], 0
    for file in input_files(spec):
        if file.suffix.lower() == ".parquet":
            import pyarrow.parquet as pq

            try:
                n = pq.ParquetFile(file).metadata.num_rows
            except Exception as exc:  # noqa: BLE001 (pyarrow raises its own kinds on a damaged file)
                raise CeaError(f"cannot read {file.name}: {str(exc).splitlines()[0]}") from None
            pieces = [(a, min(rows, n - a)) for a in range(0, n, rows)]
            header = 0
        else:
            offsets, n, header = _scan(file, rows)
            pieces = [(o, min(rows, n - j * rows)) for j, o in enumerate(offsets)]
        if not n:
            raise CeaError(f"{file.name} holds no rows; pass a file with texts")
        for offset, count in pieces:
            parts.append(Part(len(parts), str(file), offset, count, first, header))
            first += count
    return parts


def _read_text(part: Part, file: Path) -> pd.DataFrame:
    kind = file.suffix.lower()
    csv = kind in (".csv", ".tsv")
    lines, records = [], 0
    with open(file, "rb") as fh:
        head = fh.read(part.header) if csv else b""
        fh.seek(part.offset)
        for _, line, _, ends in _records(fh, csv):
            lines.append(line)
            records += ends
            if records == part.rows:
                break
    if kind == ".txt":
        return pd.DataFrame({"text": [x.decode("utf-8").rstrip("\r\n") for x in lines]})
    if kind in (".jsonl", ".json"):
        return pd.read_json(io.BytesIO(b"".join(lines)), lines=True)
    return pd.read_csv(
        io.BytesIO(head + b"".join(lines)), sep="," if kind == ".csv" else "\t", keep_default_na=False, na_values=[""]
    )


@functools.lru_cache(maxsize=2)
def _row_group(file: str, changed: int, group: int):
    """One row group of a Parquet file, decoded once for the parts it holds (a writer's default group holds up to a
    million rows: 500 parts of one group would each decode it whole). ``changed``: the file's mtime, in the key."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(file).read_row_group(group)


def _read_parquet(part: Part, file: Path) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(file).metadata
    pieces, start = [], 0
    for g in range(meta.num_row_groups):
        n = meta.row_group(g).num_rows
        a, b = max(part.offset, start), min(part.offset + part.rows, start + n)
        if a < b:
            pieces.append(_row_group(str(file), file.stat().st_mtime_ns, g).slice(a - start, b - a))
        start += n
    return pa.concat_tables(pieces).to_pandas()


def read_part(part: Part | dict, text_column: str = "text") -> pd.DataFrame:
    """The rows of ``part`` (module docstring); a CeaError names a file that cannot be read or lacks the column."""
    part = Part(**part) if isinstance(part, dict) else part
    if part.texts is not None:
        return pd.DataFrame({"row": range(part.first, part.first + part.rows), "text": list(part.texts)})
    file = Path(part.file)
    try:
        frame = _read_parquet(part, file) if file.suffix.lower() == ".parquet" else _read_text(part, file)
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CeaError(f"cannot read {file.name}: {first}") from None
    if len(frame) != part.rows:
        raise CeaError(
            f"{file.name} changed since its parts were planned ({len(frame)} rows where {part.rows} were); run again"
        )
    return as_rows(frame, file, text_column, part.first)
