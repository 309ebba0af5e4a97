"""How ``cea fit`` chooses a candidate encoder's classifier on dev, and what it says and writes of its choice.

What it does
    :func:`choose_classifier` chooses a candidate's classifier on dev (:meth:`cea.knn.decision.Classifier.choose`)
    and scores it on test (a :class:`cea.fitting.candidate.Choice`); :func:`label_issues` runs ``cea check`` on the
    shipped examples; :func:`in_words` puts the classifier in words, :func:`classifier_settings` as ``fit.json`` keeps
    it; :func:`final_line` is the line a fit ends on; :func:`written` writes ``fit.json``, the bundle's card and its
    report.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from ..bundle import Bundle
from ..data.dataset import MULTILABEL
from ..evaluation.classification import scores
from ..evaluation.multilabel import multilabel_scores
from ..knn.decision import Classifier
from ..labelling.check import check_labels
from ..paths import write_json
from ..progress import duration
from ..reports.card import write_bundle_card
from ..reports.html import build_report
from .candidate import Choice


def label_issues(frame: pd.DataFrame, vectors: np.ndarray, shown: int = 20) -> dict | None:
    """``cea check`` on the bundle's examples in the chosen encoder's space (:mod:`cea.labelling.check`): how many
    labels are probably wrong, the likeliest ``shown``, the duplicates labelled differently, the classes confused
    most; None where a label has a single text (the classifier cannot be asked about it out of fold)."""
    labels = frame["label"].astype(str).to_numpy()
    if np.unique(labels, return_counts=True)[1].min() < 2:
        return None
    check = check_labels(list(frame["text"]), labels, vectors)
    rows = check.issues.head(shown)[["row", "text", "label", "suggested", "score"]]
    return {
        "flagged": len(check.issues),
        "of": len(frame),
        "rows": rows.to_dict("records"),
        "conflicting_duplicates": len(check.conflicts),
        "confused": [list(c) for c in check.confused[:5]],
    }


def choose_classifier(ds, embedded: dict, rare: list[str], trained=None, like: Classifier | None = None) -> Choice:
    """An encoder's classifier chosen on dev (:meth:`cea.knn.decision.Classifier.choose`, train as references, the
    ``trained`` head of its training run among the linear heads where it has one; ``like``: only that classifier's
    k, votes, C and vote share tried, for an encoder that differs from the one it was chosen for by rounding alone),
    what the search measured (``dev``: the chosen classifier's dev accuracy, or micro-F1 for label sets, as a bundle
    of the train texts answers; one label per text: its macro-F1 and the ``rare`` labels' too), that classifier in
    words (``described``, as the CLI and the report show it) and test figures from its ``embedded`` splits with train
    and dev as references; ``classifier``: the chosen one."""
    y = {s: list(ds[s]["labels" if ds.task == MULTILABEL else "label"]) for s in ("train", "dev", "test")}
    grid = (
        {}
        if like is None
        else dict(ks=[like.k], weights=[like.weights], Cs=[like.C], shares=sorted({0.0, like.knn_share}))
    )
    spec, report = Classifier.choose(embedded["train"], y["train"], embedded["dev"], y["dev"], trained=trained, **grid)
    head = trained if spec.head == "trained" else None
    decision = spec.answer(
        np.vstack([embedded["train"], embedded["dev"]]), y["train"] + y["dev"], embedded["test"], head
    )
    if spec.multi_label:
        test = {k: v for k, v in multilabel_scores(decision.label_sets, y["test"]).items() if k != "per_label_f1"}
    else:
        test = scores(decision.labels, y["test"], rare)
        dev = spec.answer(embedded["train"], y["train"], embedded["dev"], head).labels
        report = {**report, **{k: v for k, v in scores(dev, y["dev"], rare).items() if k != "accuracy"}}
    return Choice(dev=report, described=in_words(spec), test=test, classifier=spec)


def in_words(spec: Classifier) -> str:
    """The classifier in a few words: ``linear head, C=10`` or ``k=7, distance`` (label sets: and the threshold)."""
    if spec.multi_label:
        return (
            f"a linear head per label, C={spec.C:g}" if spec.kind == "linear" else f"k={spec.k}"
        ) + f", labels from {spec.label_threshold:g}"
    if spec.kind == "linear":
        return ("the trained linear head" if spec.head == "trained" else f"linear head, C={spec.C:g}") + (
            f", {spec.knn_share:g} kNN (k={spec.k}, {spec.weights})" if spec.knn_share else ""
        )
    return f"k={spec.k}, {spec.weights}"


def classifier_settings(spec: Classifier) -> dict:
    """The classifier a fit chose, as ``fit.json`` keeps it."""
    return {
        "classifier": spec.kind,
        "C": spec.C,
        "knn_share": spec.knn_share,
        "k": spec.k,
        "weights": spec.weights,
        "head": spec.head,
    }


def final_line(summary: dict, spec: Classifier, output: Path, seconds: float) -> str:
    """The line a fit ends on: what it chose and its test figures."""
    test, metric = summary["test"], summary["metric"]
    return (
        f"{summary['chosen']} {summary['model']} (layer {summary['layer']}, {in_words(spec)}): test "
        f"{metric.replace('_', '-')} {test[metric]:.2f}, macro-F1 {test['macro_f1']:.2f}"
        + (f", rare-class F1 {test['rare_f1']:.2f}" if test.get("rare_f1") is not None else "")
        + f"; bundle of {summary['references']} examples in {output} ({duration(seconds)})"
    )


def written(summary: dict, work: Path, bundle: Bundle, name: str, trained: bool) -> None:
    """``fit.json`` in the work folder and the bundle, the bundle's card with its test figures, and its report."""
    write_json(work / "fit.json", summary)
    shutil.copy(work / "fit.json", bundle.root / "fit.json")
    write_bundle_card(bundle.root)
    runs = [work] + sorted(work.glob("probe-*")) + ([work / "train"] if trained else [])
    build_report(runs, bundle.root / "report.html", title=f"cea fit: {name}", maps=False)
