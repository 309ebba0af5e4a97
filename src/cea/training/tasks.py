"""What a training run learns from and how it is evaluated, per kind of data.

* classes (text, label) and label sets (text, labels): label-aware objectives, P x K batches, judged on dev as
  :mod:`cea.training.schedule` plans, by kNN and the head on dev and test at the end (texts of one label: retrieval);
* pairs (text1, text2, score): cosine regression, Spearman/Pearson of cosine against the gold;
* triplets (anchor, positive, negative): the triplet loss; sentences (any data set's texts): SimCSE, miCSE, MLM.

Runs without labels are judged on ``--eval-dataset``, or on their own data set when it can judge them.

A run is read in two steps: :func:`training_data` (:class:`TrainingData`, what the encoder and the objective are
built for), then :func:`build_task` (:class:`Task`: that data with its dev evaluator, its final evaluation and, where
the objective has one, its trained head), whose evaluation functions come from :func:`evaluation_functions`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from datasets import Dataset
from sentence_transformers.sentence_transformer.evaluation import SentenceEvaluator

from ..data.dataset import (
    CLASSIFICATION,
    MULTILABEL,
    SENTENCES,
    SIMILARITY,
    TRIPLETS,
    few_shot,
    hide_classes,
    imbalance,
    normalized_scores,
    parse_imbalance,
    sentences,
)
from ..data.label_names import with_label_names
from ..defaults import AUTO, DEFAULT_OBJECTIVES
from ..encoders.embeddings import encode
from ..encoders.store import EmbeddingStore
from ..errors import CeaError
from ..evaluation.classification import evaluate_encoder
from ..evaluation.multilabel import multilabel_evaluate
from ..evaluation.similarity import evaluate_pairs
from ..knn.decision import Classifier
from ..knn.labelsets import binarize
from ..knn.search import normalize
from ..objectives import get_spec, objectives_for

KINDS = {
    CLASSIFICATION: "classes",
    MULTILABEL: "labelsets",
    SIMILARITY: "pairs",
    TRIPLETS: "triplets",
    SENTENCES: "sentences",
}
NEEDS = {
    "classes": "labelled texts (text, label)",
    "labelsets": "texts with several labels (text, labels)",
    "pairs": "scored pairs (text1, text2, score)",
    "triplets": "triplet rows (anchor, positive, negative)",
}


class DevEvaluator(SentenceEvaluator):
    """The trainer's one dev evaluator around ``fn``, ``model -> metrics (x 100)`` (the ``dev`` of
    :func:`evaluation_functions`), reporting
    fractions as sentence-transformers' evaluators do; ``history`` keeps every call for ``--select best``."""

    def __init__(self, fn, name: str = "dev", primary: str | None = None):
        super().__init__()
        self.fn, self.name, self.history, self.primary_metric = fn, name, [], primary

    def __call__(self, model, output_path=None, epoch: int = -1, steps: int = -1) -> dict[str, float]:
        metrics = self.prefix_name_to_metrics({k: v / 100 for k, v in self.fn(model).items()}, self.name)
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        self.history.append({"epoch": epoch, "steps": steps, **metrics})
        return metrics


@dataclass
class TrainingData:
    """What a run learns from: ``kind`` (a value of :data:`KINDS`), ``train_dataset`` (a ``datasets.Dataset``, columns
    in the order the objective reads them) of ``n_train`` examples; with labels, their names (``labels``), each
    example's label id and auxiliary id, and the labels hidden from training (``--unknown-classes``), and the training
    texts kNN judges with (``references``, a DataFrame); ``judged_on``, the data set whose splits judge the run (with
    labels the run's own, hidden labels hidden; else ``--eval-dataset`` or the run's own; None: nothing judges it)."""

    kind: str
    train_dataset: object
    n_train: int
    labels: list[str] = field(default_factory=list)
    label_ids: list[int] | None = None
    aux_ids: list[int] | None = None
    hidden: list[str] = field(default_factory=list)
    references: object | None = None
    judged_on: object | None = None


@dataclass
class Task:
    """A run's training data, its dev evaluator and its final evaluation, as :func:`build_task` builds them."""

    data: TrainingData
    evaluator: DevEvaluator | None  # None: nothing judges the run on dev
    primary: str | None  # key of evaluator.history entries used by --select best
    final: Callable  # model -> ({split: metrics}, predictions or None)
    head: Callable | None = None  # () -> the objective's trained head (softmax) as a LinearHead: judges dev
    store: EmbeddingStore = field(default_factory=EmbeddingStore)  # what the run's judgements encoded, per state
    dev_texts: int = 0  # the dev texts a judgement encodes (labelled texts)

    @property
    def dev_size(self) -> int | None:
        """The dev texts each judgement by the trained head encodes; None where kNN judges (cea.training.schedule)."""
        return self.dev_texts if self.primary == "dev_head_accuracy" else None


class EvaluationFunctions(NamedTuple):
    """How a run is evaluated (:func:`evaluation_functions`): ``dev``, ``model -> dev metrics (x 100)``; ``final``,
    ``model -> ({split: metrics}, predictions or None)``; ``primary``, the dev metric that chooses (``dev_`` key)."""

    dev: Callable
    final: Callable
    primary: str


def resolve_objective(objective: str, task: str, where: str) -> str:
    """``objective``, or for ``auto`` the default for data of ``task`` (:data:`DEFAULT_OBJECTIVES`; else an error)."""
    if objective != AUTO:
        return objective
    kind = KINDS[task]
    if kind not in DEFAULT_OBJECTIVES:
        raise CeaError(f"{where} is {task}: name what to train with, --objective {' or '.join(objectives_for(kind))}")
    return DEFAULT_OBJECTIVES[kind]


def check_kind(objective: str, task: str, where: str) -> str:
    """The kind of run an objective makes on a data set of ``task``; a mismatch is a clear error."""
    kind, takes = KINDS[task], get_spec(objective).data
    if "sentences" in takes:  # the texts of any data set
        return "sentences"
    if kind == "triplets" and kind not in takes:
        raise CeaError(
            f"{where} holds triplets; use --objective {' or '.join(objectives_for('triplets'))} "
            f"(or {NEEDS[takes[0]]} for {objective})"
        )
    if kind not in takes:
        raise CeaError(f"--objective {objective} needs {NEEDS[takes[0]]}; {where} is {task}")
    return kind


def _check_judges(eval_ds) -> None:
    """Refuse a data set that cannot judge a model (unlabelled sentences)."""
    if eval_ds.task not in (SIMILARITY, TRIPLETS, CLASSIFICATION):
        raise CeaError(
            f"{eval_ds.name} holds unlabelled sentences and cannot judge a model; "
            "pass --eval-dataset stsb (or another labelled or scored set)"
        )


def evaluation_functions(
    eval_ds, references=None, k: int = 5, splits=("dev", "test"), head=None, store=None, unknown_rate=None
) -> EvaluationFunctions:
    """The dev metrics function, the final function and the primary key for an evaluation data set.
    ``final(model)`` returns ``({split: metrics}, None)``, judged by
    :func:`cea.evaluation.classification.evaluate_encoder` with the train split (or ``references``) as references;
    ``head``: ``() -> the run's trained head (a LinearHead), or None where it has none (now)``: where it gives one,
    dev is its accuracy alone and the final metrics add it; ``store``: the :class:`EmbeddingStore` the evaluations
    read and fill. ``unknown_rate``: the final linear head may answer unknown, its threshold calibrated on dev (open
    intent)."""
    _check_judges(eval_ds)
    if eval_ds.task == SIMILARITY:
        return _pair_functions(eval_ds, splits)
    if eval_ds.task == TRIPLETS:
        return _triplet_functions(eval_ds, splits)
    refs = eval_ds["train"] if references is None else references
    ref_texts, ref_labels = list(refs["text"]), refs["label"].to_numpy()

    def trained_head():
        return head() if head is not None else None

    def head_accuracy(trained, embeddings, labels) -> dict:  # as a bundle of the run's encoder and head answers
        decision = Classifier(head="trained").decide(trained, embeddings)
        return {"head_accuracy": round(100 * float(np.mean(decision.labels.astype(str) == np.asarray(labels, str))), 2)}

    def metrics(model, split_names, retrieval, rate=None):
        queries = {s: (eval_ds[s]["text"], eval_ds[s]["label"].to_numpy()) for s in split_names}
        results = evaluate_encoder(
            model,
            ref_texts,
            ref_labels,
            queries,
            k,
            retrieval=retrieval,
            reference_ids=refs.index.to_numpy(),
            keep_embeddings=split_names,
            linear=True,
            unknown_rate=rate,
            store=store,
        )
        out = {s: r.metrics() for s, r in results.items()}
        if (trained := trained_head()) is not None:
            for s, r in results.items():
                out[s].update(head_accuracy(trained, r.embeddings, r.gold))
        return out, results

    def dev(model):
        if (trained := trained_head()) is not None:  # the trained head alone: dev is encoded, the references not
            encoder = store if store is not None else EmbeddingStore()
            return head_accuracy(trained, encoder.encode(model, eval_ds["dev"]["text"]), eval_ds["dev"]["label"])
        return metrics(model, ["dev"], ())[0]["dev"]

    def final(model):
        return metrics(model, splits, ("test",), unknown_rate)[0], None

    return EvaluationFunctions(dev, final, "dev_knn_accuracy")


def _pair_functions(eval_ds, splits) -> EvaluationFunctions:
    """Scored pairs: Spearman/Pearson of cosine against the gold, on dev and on ``splits``."""

    def final(model):
        return {s: evaluate_pairs(model, eval_ds[s]) for s in splits}, None

    return EvaluationFunctions(lambda model: evaluate_pairs(model, eval_ds["dev"]), final, "dev_spearman")


def _triplet_functions(eval_ds, splits) -> EvaluationFunctions:
    """Triplets: the share whose anchor lies nearer its positive than its negative, on dev and on ``splits``."""

    def accuracy(model, frame):
        a, p, n = (normalize(encode(model, list(frame[c]))) for c in ("anchor", "positive", "negative"))
        return {"triplet_accuracy": round(100 * float(np.mean((a * p).sum(1) > (a * n).sum(1))), 2)}

    return EvaluationFunctions(
        lambda model: accuracy(model, eval_ds["dev"]),
        lambda model: ({s: accuracy(model, eval_ds[s]) for s in splits}, None),
        "dev_triplet_accuracy",
    )


def training_data(config, ds, eval_ds=None) -> TrainingData:
    """What a run of ``config`` learns from in the loaded data set ``ds``, and what judges it (``eval_ds``, a loaded
    ``--eval-dataset``: runs without labels); refused, before anything is trained, where it cannot be."""
    kind = check_kind(config.objective, ds.task, ds.name)
    train_frame = ds["train"]
    if kind == "classes":
        return _class_data(config, ds, train_frame)
    if kind == "labelsets":
        return _label_set_data(config, ds, train_frame)
    if config.shots or config.imbalance:
        raise CeaError(f"--shots and --imbalance apply to labelled data; {ds.name} is {ds.task}")
    if config.train_limit and kind != "sentences":  # sentences are limited below, after deduplication
        train_frame = train_frame.sample(n=min(config.train_limit, len(train_frame)), random_state=config.limit_seed)
    target = eval_ds if eval_ds is not None else (ds if ds.task != SENTENCES else None)
    if target is not None:
        _check_judges(target)
    if kind == "pairs":
        data = Dataset.from_dict(
            {
                "text1": list(train_frame["text1"]),
                "text2": list(train_frame["text2"]),
                "label": normalized_scores(train_frame, ds.score_range).tolist(),
            }
        )
        return TrainingData(kind, data, len(train_frame), judged_on=target)
    if kind == "triplets":
        data = Dataset.from_dict({c: list(train_frame[c]) for c in ("anchor", "positive", "negative")})
        return TrainingData(kind, data, len(train_frame), judged_on=target)
    texts = sentences(ds["train"])
    if config.train_limit:
        texts = list(
            np.random.default_rng(config.limit_seed).permutation(np.array(texts, dtype=object))[: config.train_limit]
        )
    if len(texts) < 2:
        raise CeaError(f"{ds.name} has {len(texts)} distinct sentence(s) to train on; {config.objective} needs more")
    columns = {"text": texts} if config.objective == "mlm" else {"anchor": texts, "positive": texts}
    return TrainingData(kind, Dataset.from_dict(columns), len(texts), judged_on=target)


def _class_data(config, ds, train_frame) -> TrainingData:
    hidden = []
    if config.unknown_classes:  # open intent: hidden labels leave train and dev, their test texts read unknown
        ds, hidden = hide_classes(ds, config.unknown_classes, config.shots_seed)
        train_frame = ds["train"]
    if config.shots:
        train_frame = few_shot(train_frame, config.shots, config.shots_seed)
    if config.imbalance:
        train_frame = imbalance(train_frame, parse_imbalance(config.imbalance), config.shots_seed)
    if config.train_limit:
        train_frame = train_frame.sample(n=min(config.train_limit, len(train_frame)), random_state=config.seed)
    if not config.aux_label_column:  # names as examples (train and references); they have no auxiliary label
        train_frame = with_label_names(train_frame, config.label_names)
    names = sorted(set(train_frame["label"]))
    if len(names) < 2:
        raise CeaError("the training data has a single class; label-aware objectives need at least two")
    label2id = {name: i for i, name in enumerate(names)}
    ids = [label2id[x] for x in train_frame["label"]]
    aux_ids = None
    if config.aux_label_column:
        aux_index = {name: i for i, name in enumerate(sorted(set(train_frame["aux"])))}
        aux_ids = [aux_index[x] for x in train_frame["aux"]]
    labels = [[a, b] for a, b in zip(ids, aux_ids)] if aux_ids is not None else ids
    data = Dataset.from_dict({"text": list(train_frame["text"]), "label": labels})
    return TrainingData("classes", data, len(ids), names, ids, aux_ids, hidden, references=train_frame, judged_on=ds)


def _label_set_data(config, ds, train_frame) -> TrainingData:
    """Texts with several labels: multi-hot label rows (P x K batches go by each text's first label)."""
    if config.shots or config.imbalance or config.unknown_classes or config.aux_label_column:
        raise CeaError(
            f"--shots, --imbalance, --unknown-classes and --aux-label-column take one label per text; "
            f"{ds.name} has several"
        )
    if config.train_limit:
        train_frame = train_frame.sample(n=min(config.train_limit, len(train_frame)), random_state=config.seed)
    names = sorted(set(train_frame["labels"].explode()))
    if len(names) < 2:
        raise CeaError("the training data has a single label; label-aware objectives need at least two")
    data = Dataset.from_dict(
        {"text": list(train_frame["text"]), "label": binarize(train_frame["labels"], names).astype(np.float32).tolist()}
    )
    return TrainingData("labelsets", data, len(train_frame), names, references=train_frame, judged_on=ds)


def build_task(config, data: TrainingData, objective=None, store: EmbeddingStore | None = None) -> Task:
    """The task of a run of ``config`` on ``data`` (:func:`training_data`), complete: its dev evaluator and final
    evaluation, reading and filling ``store`` (what was encoded before; None: a new store in memory). Where
    ``objective`` (built for ``data``) has a trained head (softmax) and each text one label, that head is the
    classifier that ships from the run (:class:`cea.knn.decision.Classifier` with ``head="trained"``): its dev accuracy
    (dev alone encoded) is the primary figure, reported beside kNN at the end."""
    store = EmbeddingStore() if store is None else store
    if data.kind == "classes":
        return _class_task(config, data, objective, store)
    if data.kind == "labelsets":
        return _label_set_task(config, data, store)
    if data.judged_on is None:
        return Task(data, None, None, lambda model: ({}, None), store=store)
    dev, final, primary = evaluation_functions(data.judged_on)
    return Task(data, DevEvaluator(dev, "dev", primary.removeprefix("dev_")), primary, final, store=store)


def _class_task(config, data: TrainingData, objective, store: EmbeddingStore) -> Task:
    ds, references = data.judged_on, data.references
    head = (lambda: objective.linear_head(data.labels)) if hasattr(objective, "linear_head") else None

    def trained_head():  # read when judged: the run drops its head where the weights it keeps are another step's
        return task.head() if task.head is not None else None

    # dev: texts of the labels seen in training; test: every text (an unseen label counts as wrong)
    known = ds["dev"]["label"].isin(data.labels)
    dev_only = dataclasses.replace(ds, splits={**ds.splits, "dev": ds["dev"][known]}) if not known.all() else ds
    dev = evaluation_functions(dev_only, references, k=config.knn_k, head=trained_head, store=store).dev
    final = evaluation_functions(
        ds,
        references,
        k=config.knn_k,
        head=trained_head,
        store=store,
        unknown_rate=config.unknown_rate if data.hidden else None,
    ).final
    primary = "dev_head_accuracy" if head is not None else "dev_knn_accuracy"
    task = Task(
        data,
        DevEvaluator(dev, "dev", primary.removeprefix("dev_")),
        primary,
        final,
        head,
        store,
        dev_texts=len(dev_only["dev"]),
    )
    return task


def _label_set_task(config, data: TrainingData, store: EmbeddingStore) -> Task:
    """Judged by the kNN vote per label and at the end also by a logistic regression per label
    (:mod:`cea.evaluation.multilabel`)."""
    ds, train_frame = data.judged_on, data.references

    def label_set_metrics(model, splits, linear=False):
        state = store.state(model)
        queries = {s: (store.encode(model, ds[s]["text"], state=state), list(ds[s]["labels"])) for s in splits}
        return multilabel_evaluate(
            store.encode(model, train_frame["text"], state=state),
            list(train_frame["labels"]),
            queries,
            k=config.knn_k,
            linear=linear,
        )

    def final(model):  # the kNN vote and a logistic regression per label, as a bundle classifies
        result = label_set_metrics(model, ("dev", "test"), linear=True)
        return result.metrics(), result

    evaluator = DevEvaluator(lambda model: label_set_metrics(model, ("dev",)).metrics()["dev"], "dev", "knn_micro_f1")
    return Task(data, evaluator, "dev_knn_micro_f1", final, store=store)
