"""What a training run learns from and how it is judged, per kind of data.

* classes (text, label) and label sets (text, labels): label-aware objectives, P x K batches, judged on dev as
  :mod:`cea.training.judging` plans, by kNN and the head on dev and test at the end (texts of one label: retrieval);
* pairs (text1, text2, score): cosine regression, Spearman/Pearson of cosine against the gold;
* triplets (anchor, positive, negative): the triplet loss; sentences (any data set's texts): SimCSE, miCSE, MLM.

Runs without labels are judged on ``--eval-dataset``, or on their own data set when it can judge them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from datasets import Dataset
from sentence_transformers.sentence_transformer.evaluation import SentenceEvaluator

from ..data.dataset import (CLASSIFICATION, MULTILABEL, SENTENCES, SIMILARITY, TRIPLETS, few_shot, hide_classes,
                            imbalance, normalized_scores, parse_imbalance, sentences)
from ..data.label_names import with_label_names
from ..defaults import AUTO, DEFAULT_OBJECTIVES
from ..encoders.device import encode_batch
from ..encoders.store import EmbeddingStore
from ..errors import CeaError
from ..evaluation.classification import evaluate_encoder
from ..evaluation.multilabel import multilabel_evaluate
from ..evaluation.similarity import evaluate_pairs
from ..knn.decision import Classifier
from ..knn.labelsets import binarize
from ..objectives import get_spec, objectives_for

KINDS = {CLASSIFICATION: "classes", MULTILABEL: "labelsets", SIMILARITY: "pairs", TRIPLETS: "triplets",
         SENTENCES: "sentences"}
NEEDS = {"classes": "labelled texts (text, label)", "labelsets": "texts with several labels (text, labels)",
         "pairs": "scored pairs (text1, text2, score)", "triplets": "triplet rows (anchor, positive, negative)"}


class DevEvaluator(SentenceEvaluator):
    """The trainer's one dev evaluator around a judge ``model -> metrics (x 100)`` (:func:`judge`), reporting
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
class Task:
    """The data, the dev evaluator and the final evaluation of one run."""

    kind: str
    train_dataset: object  # datasets.Dataset, columns in the order the objective reads them
    evaluator: object | None  # a SentenceEvaluator with .history, or None
    primary: str | None  # key of evaluator.history entries used by --select best
    final: Callable  # model -> {split: metrics}
    n_train: int
    labels: list[str] = field(default_factory=list)
    label_ids: list[int] | None = None
    aux_ids: list[int] | None = None
    head: Callable | None = None  # () -> the objective's trained head (softmax) as a LinearHead: judges dev
    store: EmbeddingStore = field(default_factory=EmbeddingStore)  # what the run's judgements encoded, per state
    hidden: list[str] = field(default_factory=list)  # labels hidden from training (--unknown-classes)
    dev_texts: int = 0  # the dev texts a judgement encodes (labelled texts)

    @property
    def dev_size(self) -> int | None:
        """The dev texts each judgement by the trained head encodes; None where kNN judges (cea.training.judging)."""
        return self.dev_texts if self.primary == "dev_head_accuracy" else None

    def use_head(self, objective) -> None:
        """Judge with ``objective``'s trained head where it has one (one label per text): the classifier that ships
        from the run (:class:`cea.knn.decision.Classifier` with ``head="trained"``), whose dev accuracy (dev alone
        encoded) is the primary figure, reported beside kNN at the end."""
        if not hasattr(objective, "linear_head") or self.kind != "classes":
            return
        self.head = lambda: objective.linear_head(self.labels)
        self.primary, self.evaluator.primary_metric = "dev_head_accuracy", "head_accuracy"


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
        raise CeaError(f"{where} holds triplets; use --objective {' or '.join(objectives_for('triplets'))} "
                       f"(or {NEEDS[takes[0]]} for {objective})")
    if kind not in takes:
        raise CeaError(f"--objective {objective} needs {NEEDS[takes[0]]}; {where} is {task}")
    return kind


def judge(eval_ds, references=None, k: int = 5, splits=("dev", "test"), task=None, unknown_rate=None):
    """(dev metrics function, final function, primary key) for an evaluation data set. ``final(model)`` returns
    ``({split: metrics}, None)``, judged by :func:`cea.evaluation.classification.evaluate_encoder`
    with the train split (or ``references``) as references; a ``task`` with a head also gets the head's accuracy.
    ``unknown_rate``: the final linear head may answer unknown, its threshold calibrated on dev (open intent)."""
    if eval_ds.task == SIMILARITY:
        def final(model):
            return {s: evaluate_pairs(model, eval_ds[s]) for s in splits}, None
        return (lambda model: evaluate_pairs(model, eval_ds["dev"])), final, "dev_spearman"
    if eval_ds.task == TRIPLETS:
        def accuracy(model, frame):
            a, p, n = (model.encode(list(frame[c]), batch_size=encode_batch(model), normalize_embeddings=True)
                       for c in ("anchor", "positive", "negative"))
            return {"triplet_accuracy": round(100 * float(np.mean((a * p).sum(1) > (a * n).sum(1))), 2)}

        return (lambda model: accuracy(model, eval_ds["dev"])), \
            (lambda model: ({s: accuracy(model, eval_ds[s]) for s in splits}, None)), "dev_triplet_accuracy"
    if eval_ds.task != CLASSIFICATION:
        raise CeaError(f"{eval_ds.name} holds unlabelled sentences and cannot judge a model; "
                       "pass --eval-dataset stsb (or another labelled or scored set)")
    refs = eval_ds["train"] if references is None else references
    ref_texts, ref_labels = list(refs["text"]), refs["label"].to_numpy()

    def head_accuracy(embeddings, labels) -> dict:  # as a bundle of the run's encoder and head answers
        decision = Classifier(head="trained").decide(task.head(), embeddings)
        return {"head_accuracy": round(100 * float(np.mean(decision.labels.astype(str) == np.asarray(labels, str))), 2)}

    def metrics(model, split_names, retrieval, rate=None):
        queries = {s: (eval_ds[s]["text"], eval_ds[s]["label"].to_numpy()) for s in split_names}
        results = evaluate_encoder(model, ref_texts, ref_labels, queries, k, retrieval=retrieval,
                                   reference_ids=refs.index.to_numpy(), keep_embeddings=split_names, linear=True,
                                   unknown_rate=rate, store=task.store if task else None)
        out = {s: r.metrics() for s, r in results.items()}
        if task is not None and task.head is not None:
            for s, r in results.items():
                out[s].update(head_accuracy(r.embeddings, r.gold))
        return out, results

    def dev(model):
        if task is not None and task.head is not None:  # the trained head alone: dev is encoded, the references not
            return head_accuracy(task.store.encode(model, eval_ds["dev"]["text"]), eval_ds["dev"]["label"])
        return metrics(model, ["dev"], ())[0]["dev"]

    def final(model):
        return metrics(model, splits, ("test",), unknown_rate)[0], None

    return dev, final, "dev_knn_accuracy"


def build_task(config, ds, eval_ds=None) -> Task:
    """Turn a loaded data set into the trainer's dataset, a dev evaluator and a final evaluation."""
    kind = check_kind(config.objective, ds.task, ds.name)
    train_frame = ds["train"]
    if kind == "classes":
        return _class_task(config, ds, train_frame)
    if kind == "labelsets":
        return _label_set_task(config, ds, train_frame)
    if config.shots or config.imbalance:
        raise CeaError(f"--shots and --imbalance apply to labelled data; {ds.name} is {ds.task}")
    if config.train_limit and kind != "sentences":  # sentences are limited below, after deduplication
        train_frame = train_frame.sample(n=min(config.train_limit, len(train_frame)), random_state=config.limit_seed)
    target = eval_ds if eval_ds is not None else (ds if ds.task != SENTENCES else None)
    dev_fn, final, primary = judge(target) if target is not None else (None, lambda model: ({}, None), None)
    evaluator = DevEvaluator(dev_fn, "dev", primary.removeprefix("dev_")) if dev_fn else None
    if kind == "pairs":
        data = Dataset.from_dict({"text1": list(train_frame["text1"]), "text2": list(train_frame["text2"]),
                                  "label": normalized_scores(train_frame, ds.score_range).tolist()})
        return Task(kind, data, evaluator, primary, final, len(train_frame))
    if kind == "triplets":
        data = Dataset.from_dict({c: list(train_frame[c]) for c in ("anchor", "positive", "negative")})
        return Task(kind, data, evaluator, primary, final, len(train_frame))
    texts = sentences(ds["train"])
    if config.train_limit:
        texts = list(np.random.default_rng(config.limit_seed).permutation(np.array(texts, dtype=object))
                     [:config.train_limit])
    if len(texts) < 2:
        raise CeaError(f"{ds.name} has {len(texts)} distinct sentence(s) to train on; {config.objective} needs more")
    columns = {"text": texts} if config.objective == "mlm" else {"anchor": texts, "positive": texts}
    return Task(kind, Dataset.from_dict(columns), evaluator, primary, final, len(texts))


def _class_task(config, ds, train_frame) -> Task:
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
    task = Task("classes", data, None, "dev_knn_accuracy", None, len(ids), names, ids, aux_ids, hidden=hidden)
    # dev: texts of the labels seen in training; test: every text (an unseen label counts as wrong)
    known = ds["dev"]["label"].isin(label2id)
    dev_only = dataclasses.replace(ds, splits={**ds.splits, "dev": ds["dev"][known]}) if not known.all() else ds
    dev_fn, _, _ = judge(dev_only, train_frame, k=config.knn_k, task=task)
    task.dev_texts = len(dev_only["dev"])
    _, task.final, _ = judge(ds, train_frame, k=config.knn_k, task=task,
                             unknown_rate=config.unknown_rate if hidden else None)
    task.evaluator = DevEvaluator(dev_fn, "dev", "knn_accuracy")
    return task


def _label_set_task(config, ds, train_frame) -> Task:
    """Texts with several labels: multi-hot label rows, P x K batches by each text's first label, judged by the kNN vote
    per label and at the end also by a logistic regression per label (:mod:`cea.evaluation.multilabel`)."""
    if config.shots or config.imbalance or config.unknown_classes or config.aux_label_column:
        raise CeaError(f"--shots, --imbalance, --unknown-classes and --aux-label-column take one label per text; "
                       f"{ds.name} has several")
    if config.train_limit:
        train_frame = train_frame.sample(n=min(config.train_limit, len(train_frame)), random_state=config.seed)
    names = sorted(set(train_frame["labels"].explode()))
    if len(names) < 2:
        raise CeaError("the training data has a single label; label-aware objectives need at least two")
    data = Dataset.from_dict({"text": list(train_frame["text"]),
                              "label": binarize(train_frame["labels"], names).astype(np.float32).tolist()})

    def judge_sets(model, splits, linear=False):
        state = task.store.state(model)
        queries = {s: (task.store.encode(model, ds[s]["text"], state=state), list(ds[s]["labels"])) for s in splits}
        return multilabel_evaluate(task.store.encode(model, train_frame["text"], state=state),
                                   list(train_frame["labels"]), queries, k=config.knn_k, linear=linear)

    def final(model):  # the kNN vote and a logistic regression per label, as a bundle classifies
        result = judge_sets(model, ("dev", "test"), linear=True)
        return result.metrics(), result

    evaluator = DevEvaluator(lambda model: judge_sets(model, ("dev",)).metrics()["dev"], "dev", "knn_micro_f1")
    task = Task("labelsets", data, evaluator, "dev_knn_micro_f1", final, len(train_frame), names)
    return task
