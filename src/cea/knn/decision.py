"""The classifier on top of the embeddings, specified once: which it is, how it answers, and where it abstains.

:class:`Classifier` holds what a choice on dev settles (a vote of the ``k`` nearest references, or a linear head
mixed with that vote by ``knn_share``; for label sets a ``label_threshold``) and the ``unknown_threshold``
(:mod:`cea.knn.unknown`). It fits the head (:meth:`Classifier.fit`), answers (:meth:`Classifier.decide`) and sets
both thresholds on held-out references (:meth:`Classifier.calibrate`, :meth:`Classifier.with_label_threshold`). A
bundle, ``cea fit`` and the judges of :mod:`cea.evaluation` all go through it, so a classifier is judged as it serves.

What it expects
    Unit-length embeddings; labels as names (one per text) or as tuples of names (label sets).

Returns
    :meth:`Classifier.decide`: a :class:`Decision` per batch of queries (labels, scores, evidence; label sets ranked).

When to use it
    Wherever embeddings become answers: scikit-learn's estimators each do one part (a vote, a regression) but not the
    mix, the vote for labels the head has not seen yet, the label sets' threshold or the abstention, hence this module.

Example
    >>> spec, report = Classifier.choose(train_x, train_y, dev_x, dev_y)     # searched on dev, as cea fit does
    >>> spec.answer(train_x, train_y, test_x).labels                          # fitted, searched and decided
    >>> spec = Classifier("linear", k=5, C=10.0)
    >>> head = spec.fit(references, labels)
    >>> decision = spec.decide(head, queries, cosines, neighbour_labels)   # nearest first, as a search returns
    >>> decision.labels, decision.scores, decision.evidence
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np

from ..errors import OptionError
from .classifier import vote
from .head import CLASS_WEIGHTS, C as HEAD_C, fit_head, fit_label_head
from .labelsets import choose_label_threshold, choose_labels, label_shares, micro_f1
from .search import normalize, search_torch
from .unknown import abstain, count_curve, count_scale, evidence, threshold_at

KINDS = ("linear", "knn")
HEADS = ("fit", "trained")  # a linear head fitted on the references, or the one a training run trained with the encoder
WEIGHTS = ("uniform", "distance")
# thresholds are set on a fifth of the references held out of the fit, at most MAX_HOLDOUT texts
HOLDOUT, MAX_HOLDOUT = 0.2, 5000
# Classifier.choose's search on dev: the vote's k, the head's C and the vote's share mixed into the head
KS, CS, SHARES = (1, 3, 5, 7, 10, 15, 20), (0.1, 1.0, 10.0, 100.0), (0.0, 0.25, 0.5, 0.75, 1.0)
# Classifier.choose keeps the default (a fitted linear head, C = HEAD_C, no vote) unless the best setting on dev is
# ahead of it by this many standard errors of their paired difference (McNemar's): bench/heads.py small-dev,
# all-MiniLM-L6-v2 frozen, 2 annotations a class (dev of 14-30 texts), choosing freely lost 4.96 (banking77) and
# 5.41 (clinc150)
SURE = 2.0


class Decision(NamedTuple):
    labels: np.ndarray  # the chosen label of each query (a label set's best label)
    scores: np.ndarray  # its probability (head) or share of the votes (kNN)
    evidence: np.ndarray  # score x the nearest reference's cosine (/ the count curve's ratio): vs the unknown threshold
    ranked: list | None = None  # label sets: each query's chosen labels [(label, score)], best first

    @property
    def label_sets(self) -> list[tuple[str, ...]]:
        """Label sets: each query's chosen labels, in name order (as gold label sets are kept)."""
        return [tuple(sorted(label for label, _ in r)) for r in self.ranked]


@dataclass(frozen=True)
class Classifier:
    """The classifier on top of the embeddings: ``kind`` ``linear`` (a logistic regression with inverse
    regularisation ``C``, one per label for label sets) or ``knn`` (the vote of the ``k`` nearest references,
    ``weights`` uniform or distance); ``knn_share`` (linear): ``(1 - knn_share) * head + knn_share * vote shares``.
    ``multi_label``: each text gets every label whose score reaches ``label_threshold``. ``unknown_threshold``: below
    this evidence the answer is unknown (None: never). ``k`` is also how many neighbours a bundle lists.
    ``class_weight``: :func:`cea.knn.head.class_weights` (None: each example weighs 1). ``count_curve`` (set by
    :meth:`calibrate`): :func:`cea.knn.unknown.count_curve`, the ratios that scale small classes' evidence.
    ``head`` (linear): ``fit`` on the references, or ``trained``: the head a training run trained beside the encoder
    (its dev judgements chose the weights by it), used as it is until the references change (then refitted from it)."""

    kind: str = "linear"
    k: int = 5
    weights: str = "uniform"
    C: float = HEAD_C
    knn_share: float = 0.0
    multi_label: bool = False
    label_threshold: float | None = None
    unknown_threshold: float | None = None
    class_weight: str | None = "median"
    count_curve: tuple = ()
    head: str = "fit"

    def __post_init__(self):
        if self.kind not in KINDS:
            raise OptionError(
                "kind",
                f"{self.kind!r} is unknown; use one of {', '.join(KINDS)}",
                cli=f"--classifier {self.kind!r} is unknown; use one of {', '.join(KINDS)}",
            )
        if self.k < 1:
            raise OptionError("k", f"must be at least 1, got {self.k}")
        if self.weights not in WEIGHTS:
            raise OptionError("weights", f"{self.weights!r} is unknown; use uniform or distance")
        if self.C <= 0:
            raise OptionError("C", f"must be positive, got {self.C}", cli=f"--head-c must be positive, got {self.C}")
        if not 0 <= self.knn_share <= 1:
            raise OptionError("knn_share", f"must be between 0 and 1, got {self.knn_share}")
        if self.class_weight not in CLASS_WEIGHTS:
            raise OptionError(
                "class_weight",
                f"must be median or None, got {self.class_weight!r}",
                cli=f"--class-weight must be median or none, got {self.class_weight!r}",
            )
        if self.head not in HEADS:
            raise OptionError("head", f"must be fit or trained, got {self.head!r}")
        if self.unknown_threshold is not None and self.unknown_threshold < 0:
            raise OptionError("unknown_threshold", f"must be at least 0, got {self.unknown_threshold}")

    # --- the manifest of a bundle ------------------------------------------------------------------
    @classmethod
    def from_manifest(cls, manifest: dict) -> Classifier:
        """The classifier a bundle's manifest describes (a bundle without a ``classifier`` entry votes)."""
        setting, unknown = manifest.get("classifier", {"kind": "knn"}), manifest.get("unknown", {})
        return cls(
            setting["kind"],
            k=manifest.get("k", 5),
            weights=manifest.get("weights", "uniform"),
            C=setting.get("C", HEAD_C),
            knn_share=setting.get("knn_share", 0.0),
            head=setting.get("head", "fit"),
            multi_label=bool(manifest.get("multi_label")),
            label_threshold=setting.get("label_threshold"),
            unknown_threshold=unknown.get("threshold"),
            class_weight=setting.get("class_weight"),
            count_curve=tuple((int(n), float(r)) for n, r in unknown.get("count_curve", ())),
        )

    def manifest(self) -> dict:
        """The manifest's entries for this classifier, but ``unknown`` (:meth:`unknown_manifest`)."""
        setting = {
            "kind": self.kind,
            "C": self.C,
            **(
                {"label_threshold": self.label_threshold}
                if self.multi_label
                else {"knn_share": self.knn_share, "class_weight": self.class_weight}
            ),
            **({"head": self.head} if self.head != "fit" else {}),
        }
        return {"k": self.k, "weights": self.weights, "classifier": setting, "multi_label": self.multi_label}

    def unknown_manifest(self, rate: float | None) -> dict:
        """The manifest's ``unknown`` entry: threshold, calibration ``rate`` (None: by hand or none), count curve."""
        return {"threshold": self.unknown_threshold, "rate": rate, "count_curve": [list(x) for x in self.count_curve]}

    def replace(self, **changes) -> Classifier:
        return Classifier(**{**asdict(self), **changes})

    # --- fitting and answering ---------------------------------------------------------------------
    def fit(self, embeddings: np.ndarray, labels, previous=None, steps: int | None = None):
        """The linear head of these references (:func:`cea.knn.head.fit_head`; label sets:
        :func:`cea.knn.head.fit_label_head`), started from ``previous``'s weights, ``steps`` bounding lbfgs from
        them; None for a kNN classifier, or where fewer than two labels are left (the vote decides then)."""
        if self.kind != "linear" or (not self.multi_label and len(set(labels)) < 2):
            return None
        if self.multi_label:
            return fit_label_head(embeddings, labels, self.C, previous=previous)
        return fit_head(embeddings, labels, self.C, previous=previous, steps=steps, class_weight=self.class_weight)

    def decide(
        self,
        head,
        vectors: np.ndarray,
        sims: np.ndarray | None = None,
        neighbour_labels: np.ndarray | None = None,
        counts=None,
        fresh: np.ndarray | None = None,
    ) -> Decision:
        """The :class:`Decision` on unit-length query ``vectors`` from their nearest references (cosines ``sims``,
        labels ``neighbour_labels``, None where a query has fewer), nearest first, and the ``head`` :meth:`fit`
        returned. ``counts`` (each label's examples among the references) sets the evidence's ``count_curve`` ratio.
        No neighbours (a linear classifier without a kNN share): the head alone answers, its probability the evidence
        (a training run's dev judgement, which encodes no references).

        With a head the answer is its most probable class (mixed with the vote by ``knn_share``), else the neighbours'
        majority (ties to the nearest, as :class:`cea.knn.KNNClassifier`'s); the score is its probability or vote share.
        A query whose nearest neighbour carries a label added after the head was fitted, or is itself such an example
        (``fresh``: per neighbour, added after the head), is answered by its neighbours' distance-weighted vote."""
        if self.multi_label:
            return self._decide_sets(head, vectors, sims, neighbour_labels)
        if neighbour_labels is None:
            if head is None or self.knn_share:
                raise OptionError("neighbour_labels", "are needed by a kNN vote; give the nearest references' labels")
            proba = head.predict_proba(vectors)
            return Decision(head.classes[proba.argmax(1)].astype(object), proba.max(1), proba.max(1))
        classes, labels, votes, decided = self._vote(sims, neighbour_labels)
        chosen, scores = classes[decided].astype(object), votes.max(1) / votes.sum(1)
        if head is not None:
            proba, known = self._mixed(head, vectors, classes, votes)
            chosen, scores = head.classes[proba.argmax(1)].astype(object), proba.max(1)
            new = np.flatnonzero(
                (~known[np.maximum(labels[:, 0], 0)] | (False if fresh is None else fresh[:, 0])) & (labels[:, 0] >= 0)
            )
            if len(new):
                decided, votes = vote(labels[new], len(classes), 1.0 - sims[new], "distance")
                chosen[new], scores[new] = classes[decided], votes.max(1) / votes.sum(1)
        scale = None if counts is None else count_scale(self.count_curve, counts, chosen)
        return Decision(chosen, scores, evidence(scores, sims[:, 0], scale))

    def probabilities(self, head, vectors: np.ndarray, sims: np.ndarray, neighbour_labels: np.ndarray) -> np.ndarray:
        """Each query's class probabilities as :meth:`decide` weighs them (columns in ``head.classes``): the head's,
        mixed with the vote of its neighbours by ``knn_share`` (``cea check`` flags labels on them)."""
        classes, _, votes, _ = self._vote(sims, neighbour_labels)
        return self._mixed(head, vectors, classes, votes)[0]

    def _vote(self, sims: np.ndarray, neighbour_labels: np.ndarray):
        """``(classes, labels, votes, decided)``: the neighbours' classes, their class numbers (-1: none), each
        query's votes per class and the vote's winner (:func:`cea.knn.classifier.vote`)."""
        present = np.not_equal(neighbour_labels, None)
        classes, codes = np.unique(neighbour_labels[present].astype(str), return_inverse=True)
        labels = np.full(sims.shape, -1)
        labels[present] = codes
        decided, votes = vote(labels, len(classes), 1.0 - sims, self.weights)
        return classes, labels, votes, decided

    def _mixed(self, head, vectors: np.ndarray, classes: np.ndarray, votes: np.ndarray):
        """The head's probabilities mixed with ``votes`` by ``knn_share`` and which vote classes the head knows (the
        vote's classes are live labels; those added since the head are not)."""
        known = head.columns(classes) >= 0
        return head.mixed_proba(vectors, votes[:, known], classes[known], self.knn_share), known

    def answer(self, references: np.ndarray, labels, queries: np.ndarray, head=None, found=None) -> Decision:
        """The :class:`Decision` on ``queries`` of a bundle of these ``references`` (labels, or label sets): the head
        fitted on them (or ``head``), their ``k`` nearest (or ``found``, a search at least ``k`` deep:
        :func:`nearest`) and :meth:`decide`, small classes' evidence scaled where the classifier has a count curve."""
        if self.head == "trained" and head is None:
            raise OptionError("head", "is trained: it comes with its encoder (head.npz beside it); give it")
        labels = _objects(labels) if self.multi_label else np.asarray(labels, dtype=str)
        sims, idx = nearest(references, queries, self.k) if found is None else found
        sims, idx = sims[:, : self.k], idx[:, : self.k]
        head = self.fit(references, labels) if head is None else head
        neighbours = labels[idx] if self.multi_label else labels[idx].astype(object)
        counts = Counter(labels.tolist()) if self.count_curve and not self.multi_label else None
        return self.decide(head, normalize(queries), sims, neighbours, counts)

    def class_probabilities(
        self, references: np.ndarray, labels, queries: np.ndarray, head=None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(classes, probabilities)``: each query's probability of every class, as :meth:`answer` weighs them on
        these ``references`` (single labels): the head's mixed with the vote of the ``k`` nearest by ``knn_share``
        (:meth:`probabilities`, columns in the head's classes), or without a head the neighbours' shares of the vote
        (columns in the classes among them). A background fit's judge reads the gold label's (:mod:`cea.service.
        judging`)."""
        if self.multi_label:
            raise OptionError("multi_label", "has label sets, scored label by label; use answer's scores")
        if self.head == "trained" and head is None:
            raise OptionError("head", "is trained: it comes with its encoder (head.npz beside it); give it")
        labels = np.asarray(labels, dtype=str)
        sims, idx = nearest(references, queries, self.k)
        neighbours = labels[idx].astype(object)
        head = self.fit(references, labels) if head is None else head
        if head is not None:
            return head.classes, self.probabilities(head, normalize(queries), sims, neighbours)
        classes, _, votes, _ = self._vote(sims, neighbours)
        return classes, votes / votes.sum(1, keepdims=True)

    def answers(self, decision: Decision) -> np.ndarray:
        """The labels of ``decision``, :data:`cea.knn.unknown.UNKNOWN` where its evidence is below the threshold."""
        return abstain(decision.labels, decision.evidence, self.unknown_threshold)

    @classmethod
    def choose(
        cls,
        references: np.ndarray,
        labels,
        queries: np.ndarray,
        gold,
        ks=KS,
        Cs=CS,
        shares=SHARES,
        weights=WEIGHTS,
        kinds=KINDS,
        class_weight: str | None = "median",
        trained=None,
        sure: float = SURE,
    ) -> tuple[Classifier, dict]:
        """The classifier best on ``queries`` (a dev split, labels ``gold``) with ``references`` as its examples, and
        what the search measured. One label per text: the vote's ``k`` and ``weights`` (ties to the smaller k, then
        uniform), the head's ``C``, then the vote's share mixed into the head (ties to the smaller; 1: the vote
        alone). Label sets: the vote's ``k`` and the head's ``C``, each with its best micro-F1's ``label_threshold``.
        ``kinds``: the kinds tried. ``trained``: the head a training run trained with the encoder (one label per
        text), tried beside the fitted ones and kept where it is better on ``queries`` (``head="trained"``).

        Returns ``(classifier, report)``; the report's ``accuracy`` (label sets: ``micro_f1``) is the chosen
        classifier's on ``queries`` as :meth:`answer` (and a bundle of these references) gives it; ``knn`` and
        ``linear``: each kind's best setting and figure."""
        first = next(iter(labels), "")
        multi = not isinstance(first, str) and not np.isscalar(first)
        labels = _objects(labels) if multi else np.asarray(labels, dtype=str)
        gold = list(gold) if multi else np.asarray(gold, dtype=str)
        ks = sorted({k for k in ks if k <= len(labels)}) or [len(labels)]
        found = nearest(references, queries, ks[-1])
        metric = "micro_f1" if multi else "accuracy"

        def right(spec, head=None) -> np.ndarray:  # one label per text: which queries it gets right
            return spec.answer(references, labels, queries, head, found).labels.astype(str) == gold

        def score(spec, head=None) -> float:
            if multi:
                return micro_f1(spec.answer(references, labels, queries, head, found).label_sets, gold)
            return round(100 * float(np.mean(right(spec, head))), 2)

        def tuned(spec, head=None):  # label sets: the threshold of the best micro-F1 on these queries
            return spec.label_threshold_on(references, labels, queries, gold, head, found) if multi else spec

        base = cls(k=ks[-1], multi_label=multi, class_weight=class_weight)
        votes = [
            (score(spec), spec)
            for spec in (
                tuned(base.replace(kind="knn", k=k, weights=w))
                for w in (("uniform",) if multi else weights)
                for k in ks
            )
        ]
        best = max(votes, key=lambda r: r[0])  # max keeps the first of ties: the smaller k, then uniform
        vote = best[1]
        report = {"knn": {"k": vote.k, "weights": vote.weights, metric: best[0]}}
        if "knn" not in kinds:
            best = (-1.0, vote)
        default = base.replace(kind="linear", k=vote.k, weights=vote.weights)
        if "linear" in kinds and (multi or len(set(labels)) > 1):
            head_score, spec, head = _best_head(default, Cs, references, labels, trained, score, tuned)
            report["linear"] = {
                "C": spec.C,
                "knn_share": 0.0,
                metric: head_score,
                **({"head": "trained"} if spec.head == "trained" else {}),
            }
            # the head mixed with a share of the vote (label sets: the head alone); the vote alone is share 1
            mixes = (
                [(head_score, spec)]
                if multi
                else [
                    (score(spec.replace(knn_share=s), head), spec.replace(knn_share=s)) for s in sorted(shares) if s < 1
                ]
            )
            mix = max(mixes, key=lambda r: r[0])
            if mix[0] >= best[0]:  # ties to the head, then to the smaller share
                best = mix
                report["linear"]["knn_share"] = mix[1].knn_share
        chosen = best[1]
        if sure and not multi and "linear" in kinds and len(set(labels)) > 1 and chosen != default:
            ahead = right(chosen, trained if chosen.head == "trained" else None)
            behind = right(default)
            wins, losses = int(np.sum(ahead & ~behind)), int(np.sum(~ahead & behind))
            if wins - losses <= sure * np.sqrt(wins + losses):
                chosen = default
                report["kept_default"] = f"{wins} won, {losses} lost on dev"
        report = {
            "classifier": chosen.kind,
            metric: score(chosen, trained if chosen.head == "trained" else None),
            **report,
        }
        if multi:
            report["label_threshold"] = chosen.label_threshold
        return chosen, report

    def _decide_sets(self, head, vectors, sims, neighbour_sets) -> Decision:
        """Label sets: every label whose score (the head's probability, or without one its share of the neighbours,
        :func:`label_shares`) reaches ``label_threshold``, the best where none does (:func:`choose_labels`)."""
        classes, shares = (head.classes, head.predict_proba(vectors)) if head else label_shares(neighbour_sets)
        column = {c: i for i, c in enumerate(classes)}
        ranked = [
            sorted(((label, float(shares[i, column[label]])) for label in chosen), key=lambda kv: (-kv[1], kv[0]))
            for i, chosen in enumerate(choose_labels(shares, classes, self.label_threshold))
        ]
        scores = shares.max(1)
        return Decision(_objects([r[0][0] for r in ranked]), scores, evidence(scores, sims[:, 0]), ranked)

    # --- thresholds set on held-out references -----------------------------------------------------
    def _held_out_decision(self, embeddings: np.ndarray, labels, seed: int, head=None) -> tuple[Decision, np.ndarray]:
        """The decision on the references :func:`held_out` holds out, fitted on the rest (or by a trained ``head``),
        and the held-out rows."""
        labels = _objects(labels) if self.multi_label else np.asarray(labels, dtype=str)
        rows_in, rows_out = held_out(labels, seed)
        return self.answer(embeddings[rows_in], labels[rows_in], embeddings[rows_out], head), rows_out

    def calibrate(self, embeddings: np.ndarray, labels, rate: float, seed: int = 0, head=None) -> Classifier:
        """This classifier with the ``unknown_threshold`` that turns away a share ``rate`` of texts of its classes (the
        ``rate``-quantile of the evidence of held-out references) and, single-label, the references' count curve
        (:func:`cea.knn.unknown.count_curve`). More references at prediction time turn fewer away. ``head``: the
        head, used where it is a trained one (``head="trained"``; a fitted one is fitted on the rest)."""
        spec = self if self.multi_label else self.replace(count_curve=count_curve(embeddings, labels, seed))
        decision, _ = spec._held_out_decision(embeddings, labels, seed, head if self.head == "trained" else None)
        return spec.replace(unknown_threshold=threshold_at(decision.evidence, rate))

    def held_out_accuracy(self, embeddings: np.ndarray, labels, seed: int = 0) -> tuple[float, int]:
        """Accuracy (percent) of the held-out fifth of single-label references classified from the rest, and its size:
        how two encodings of the same references are compared."""
        decision, rows_out = self._held_out_decision(embeddings, labels, seed)
        gold = np.asarray(labels, dtype=str)[rows_out]
        return 100.0 * float(np.mean(decision.labels.astype(str) == gold)), len(rows_out)

    def with_label_threshold(self, embeddings: np.ndarray, label_sets, seed: int = 0) -> Classifier:
        """This (multi-label) classifier with the best ``label_threshold`` on held-out references
        (:meth:`label_threshold_on`)."""
        sets = _objects(label_sets)
        rows_in, rows_out = held_out(sets, seed)
        return self.label_threshold_on(embeddings[rows_in], sets[rows_in], embeddings[rows_out], sets[rows_out])

    def label_threshold_on(
        self, references: np.ndarray, label_sets, queries: np.ndarray, gold, head=None, found=None
    ) -> Classifier:
        """This (multi-label) classifier with the ``label_threshold`` of the best micro-F1 of ``queries`` (label sets
        ``gold``), scored by the head (``head``, or one fitted here) or the ``k`` nearest references (``found``)."""
        sets = _objects(label_sets)
        head = self.fit(references, sets) if head is None else head
        if head is None:
            idx = (nearest(references, queries, self.k) if found is None else found)[1][:, : self.k]
        classes, scores = (head.classes, head.predict_proba(queries)) if head else label_shares(sets[idx])
        return self.replace(label_threshold=choose_label_threshold(scores, classes, list(gold)))


def nearest(references: np.ndarray, queries: np.ndarray | None, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(cosines, rows)`` of each query's ``k`` nearest references (at most all), nearest first, by exact search
    (:func:`cea.knn.search.search_torch`); ``queries`` None: each reference among the others (leave-one-out)."""
    refs = normalize(references)
    if queries is None:
        return search_torch(refs, refs, min(k, len(refs) - 1), self_match=True)
    return search_torch(refs, normalize(queries), min(k, len(refs)))


def held_out(labels: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows kept and rows held out: a fifth of the references, at most :data:`MAX_HOLDOUT`, stratified where every
    (single) label has two."""
    from sklearn.model_selection import train_test_split

    n_out = int(min(max(1, round(HOLDOUT * len(labels))), MAX_HOLDOUT))
    counts = None if labels.dtype == object else np.unique(labels, return_counts=True)[1]  # label sets: not stratified
    stratify = labels if counts is not None and counts.min() >= 2 and len(counts) <= n_out else None
    return train_test_split(np.arange(len(labels)), test_size=n_out, random_state=seed, stratify=stratify)


def _best_head(linear: Classifier, Cs, references: np.ndarray, labels, trained, score, tuned):
    """``(figure, classifier, head)`` of the best on dev: ``linear`` fitted with each C, or the ``trained`` head."""
    heads = []
    for C in sorted(Cs):
        spec = linear.replace(C=C)
        head = spec.fit(references, labels)
        spec = tuned(spec, head)
        heads.append((score(spec, head), spec, head))
    head_score, spec, head = max(heads, key=lambda r: r[0])
    if trained is None or linear.multi_label:  # a trained head takes one label per text
        return head_score, spec, head
    own = spec.replace(head="trained")
    return max([(head_score, spec, head), (score(own, trained), own, trained)], key=lambda r: r[0])


def _objects(values) -> np.ndarray:
    """A 1-d object array of ``values`` (tuples stay elements; ``np.array`` would stack tuples of one length)."""
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out
