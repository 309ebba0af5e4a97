"""The encoder fine-tuned on the labelled texts before the texts are grouped (``cea discover --fine-tune``).

What it does
    :func:`fine_tune` trains the encoder on the labelled texts alone with ``cea train``'s defaults (a tenth held out
    to stop early; label names not used as examples, as the published methods are not given them) and returns the
    trained model's folder: the known classes then lie apart, and the new classes' texts gather by what the training
    taught the encoder (USNID and MTP-CLNN train on the labelled share first too). It is ``cea train`` on them.

What it expects
    ``texts`` and ``labels`` of the labelled texts only (two classes at least); ``work``: the run's folder (the
    caller removes it).

When to use it
    ``cea discover`` does it by default where ten texts of two classes or more are labelled (:func:`worth_it`): it
    grouped better on most settings (docs/discover.md). The trained encoder's embeddings are cached under
    :func:`tuned_fingerprint`, so a second run on the same labelled texts and seed reads them back.

Example
    >>> folder = fine_tune("all-mpnet-base-v2", texts, labels, work="/tmp/tuned")  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from ..data.dataset import TextDataset
from ..errors import CeaError
from ..paths import sha256_chunks
from ..training import TrainConfig, train

DEV_SHARE = 0.1  # of the labelled texts, held out to judge the run (early stopping)
MIN_LABELLED = 10  # labelled texts below which "auto" does not fine-tune: a tenth of them would be no text
NAME = "labelled-texts"  # the data set's name in the run's records
VERSION = 1  # of what fine_tune does beyond TrainConfig's fields: bump it when that changes, so the cache misses


def fine_tune(
    model,
    texts: list[str],
    labels: list[str],
    work: str | Path,
    seed: int = 0,
    device: str | None = None,
    progress: bool | str = False,
    report_to: str = "none",
) -> Path:
    """The folder under ``work`` of ``model`` (a name or a folder) trained on ``texts`` with their ``labels`` (module
    docstring). ``progress``: :func:`cea.training.train`'s (True: a bar, ``"lines"``: a line per epoch)."""
    from sklearn.model_selection import train_test_split

    if not isinstance(model, (str, Path)):
        raise CeaError("fine_tune trains a model given by its name or folder; got a loaded model")
    frame = pd.DataFrame({"text": list(map(str, texts)), "label": list(map(str, labels))})
    if frame["label"].nunique() < 2:
        raise CeaError(f"fine-tuning needs labelled texts of two classes at least; got {frame['label'].nunique()}")
    counts = frame["label"].value_counts()
    stratify = frame["label"] if counts.min() >= 2 and len(frame) * DEV_SHARE >= len(counts) else None
    kept, dev = train_test_split(frame, test_size=DEV_SHARE, random_state=seed, stratify=stratify)
    dev = dev[dev["label"].isin(set(kept["label"]))]  # a class held out whole cannot be judged
    if dev.empty:  # every text drawn was its class's last: judge on one text of the largest class instead
        largest = kept[kept["label"] == kept["label"].value_counts().index[0]]
        if len(largest) < 2:
            raise CeaError("too few labelled texts to hold one out as dev; label two texts of a class at least")
        dev, kept = largest.head(1), kept.drop(largest.index[0])
    data = TextDataset(
        NAME,
        {"train": kept.reset_index(drop=True), "dev": dev.reset_index(drop=True), "test": dev.reset_index(drop=True)},
    )
    out = Path(work) / "run"
    # P x K batches need K texts of each class; fewer (a small labelled share): batches drawn at random
    sampler = "pk" if kept["label"].value_counts().min() >= TrainConfig.k_per_class else "shuffle"
    knn_k = min(TrainConfig.knn_k, len(kept))  # the run's kNN judgement over the kept texts: a few labelled, fewer
    train(
        TrainConfig(
            dataset=NAME,
            model=str(model),
            output=str(out),
            seed=seed,
            device=device,
            label_names="off",
            sampler=sampler,
            knn_k=knn_k,
            report_to=report_to,
        ),
        progress=progress,
        data=data,
    )
    folder = out / "model"
    if not any(folder.glob("*.json")):
        raise CeaError(f"the training run wrote no model to {folder}")
    return folder


def tuned_fingerprint(base: str, texts: list[str], labels: list[str], seed: int = 0) -> str:
    """The embedding cache's name for the encoder :func:`fine_tune` trains from these arguments: a hash of ``base`` (the
    base weights' fingerprint), the labelled texts and labels, the seed, the training configuration and
    :data:`VERSION`, so the trained encoder's embeddings are found without training it again."""
    config = asdict(TrainConfig(dataset=NAME, seed=seed, label_names="off"))
    config = sorted((k, v) for k, v in config.items() if k not in ("model", "output", "device"))
    parts = [f"fine-tuned:{VERSION}:{DEV_SHARE}", base, repr(config)]
    parts += [f"{text}\x1e{label}" for text, label in zip(map(str, texts), map(str, labels))]
    return "tuned-" + sha256_chunks(part.encode("utf-8") + b"\x1f" for part in parts)[:16]


def worth_it(labels: list) -> bool:
    """Whether ``discover(..., fine_tune="auto")`` fine-tunes on these labels (None: unlabelled): two classes at least
    and :data:`MIN_LABELLED` labelled texts, so that a tenth of them can be held out to judge the run."""
    given = [lab for lab in labels if lab is not None]
    return len(set(given)) >= 2 and len(given) >= MIN_LABELLED


def labelled_part(texts: list[str], labels: list) -> tuple[list[str], list[str]]:
    """The labelled texts (``labels[i]`` not None) and their labels."""
    rows = np.flatnonzero([lab is not None for lab in labels])
    return [texts[i] for i in rows], [labels[i] for i in rows]
