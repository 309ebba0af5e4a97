"""What a training run learns from and how it is judged, per kind of data.

* classes (text, label): label-aware objectives, P x K batches, kNN on dev each epoch, kNN and
  top-k retrieval on dev and test at the end;
* pairs (text1, text2, score): cosine regression, Spearman/Pearson of cosine against the gold;
* triplets (anchor, positive, negative): explicit triplet loss;
* sentences (unlabelled text, or the texts of any data set): SimCSE, miCSE, MLM.

Runs without labels are judged on ``--eval-dataset`` (a similarity set: Spearman; a classification
set: kNN with its train split as references), or on their own data set when it can judge them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from sentence_transformers.sentence_transformer.evaluation import SentenceEvaluator

from ..data.dataset import CLASSIFICATION, SENTENCES, SIMILARITY, TRIPLETS, normalized_scores, sentences
from ..errors import CeaError
from ..objectives import get_spec, objectives_for

KINDS = {CLASSIFICATION: "classes", SIMILARITY: "pairs", TRIPLETS: "triplets", SENTENCES: "sentences"}
NEEDS = {"classes": "labelled texts (text, label)", "pairs": "scored pairs (text1, text2, score)",
         "triplets": "triplet rows (anchor, positive, negative)"}


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
    head_labels: dict[str, int] | None = None


class MetricsEvaluator(SentenceEvaluator):
    """A sentence-transformers evaluator from a function ``model -> metrics (x 100)``.

    Like sentence-transformers' own evaluators it reports fractions (so the trainer logs
    ``eval_dev_spearman`` = 0.85); ``history`` keeps every call for ``--select best``.
    """

    def __init__(self, fn, name: str = "dev", primary: str | None = None):
        super().__init__()
        self.fn, self.name, self.history = fn, name, []
        self.primary_metric = primary

    def __call__(self, model, output_path=None, epoch: int = -1, steps: int = -1) -> dict[str, float]:
        metrics = self.prefix_name_to_metrics({k: v / 100 for k, v in self.fn(model).items()}, self.name)
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        self.history.append({"epoch": epoch, "steps": steps, **metrics})
        return metrics


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


def _hf(columns: dict):
    from datasets import Dataset

    return Dataset.from_dict(columns)


def judge(eval_ds, references=None, reference_labels=None, k: int = 5, splits=("dev", "test")):
    """(dev metrics function, final metrics function, primary key) for an evaluation data set."""
    from ..evaluation.retrieval import retrieval_scores
    from ..evaluation.similarity import evaluate_pairs
    from ..knn import KNNClassifier

    if eval_ds.task == SIMILARITY:
        def final(model):
            return {s: evaluate_pairs(model, eval_ds[s]) for s in splits}
        return (lambda model: evaluate_pairs(model, eval_ds["dev"])), final, "dev_spearman"
    if eval_ds.task == TRIPLETS:
        def accuracy(model, frame):
            a, p, n = (model.encode(list(frame[c]), batch_size=64, normalize_embeddings=True)
                       for c in ("anchor", "positive", "negative"))
            return {"triplet_accuracy": round(100 * float(np.mean((a * p).sum(1) > (a * n).sum(1))), 2)}

        return (lambda model: accuracy(model, eval_ds["dev"])), \
            (lambda model: {s: accuracy(model, eval_ds[s]) for s in splits}), "dev_triplet_accuracy"
    if eval_ds.task != CLASSIFICATION:
        raise CeaError(f"{eval_ds.name} holds unlabelled sentences and cannot judge a model; "
                       "pass --eval-dataset stsb (or another labelled or scored set)")
    refs_text = list(eval_ds["train"]["text"]) if references is None else list(references)
    refs_labels = eval_ds["train"]["label"].to_numpy() if reference_labels is None else np.asarray(reference_labels)

    def knn_metrics(model, ref, split, with_retrieval):
        emb = model.encode(list(eval_ds[split]["text"]), batch_size=64)
        gold = eval_ds[split]["label"].to_numpy()
        out = {f"knn_{m}": round(100 * v, 2) for m, v in KNNClassifier(k).fit(ref, refs_labels).evaluate(emb, gold).items()}
        if with_retrieval:
            out.update(retrieval_scores(ref, refs_labels, emb, gold))
        return out

    def dev(model):
        return knn_metrics(model, model.encode(refs_text, batch_size=64), "dev", False)

    def final(model):
        ref = model.encode(refs_text, batch_size=64)  # once for every split
        return {s: knn_metrics(model, ref, s, s == "test") for s in splits}

    return dev, final, "dev_knn_accuracy"


def build_task(config, ds, eval_ds=None) -> Task:
    """Turn a loaded data set into the trainer's dataset, a dev evaluator and a final evaluation."""
    kind = check_kind(config.objective, ds.task, ds.name)
    train_frame = ds["train"]
    if kind == "classes":
        return _class_task(config, ds, train_frame)
    if config.shots or config.imbalance:
        raise CeaError(f"--shots and --imbalance apply to labelled data; {ds.name} is {ds.task}")
    if config.train_limit and kind != "sentences":  # sentences are limited below, after deduplication
        train_frame = train_frame.sample(n=min(config.train_limit, len(train_frame)), random_state=config.limit_seed)
    target = eval_ds if eval_ds is not None else (ds if ds.task != SENTENCES else None)
    dev_fn, final, primary = judge(target) if target is not None else (None, lambda model: {}, None)
    evaluator = MetricsEvaluator(dev_fn, "dev", primary and primary.removeprefix("dev_")) if dev_fn else None
    if kind == "pairs":
        data = _hf({"text1": list(train_frame["text1"]), "text2": list(train_frame["text2"]),
                    "label": normalized_scores(train_frame, ds.score_range).tolist()})
        return Task(kind, data, evaluator, primary, final, len(train_frame))
    if kind == "triplets":
        data = _hf({c: list(train_frame[c]) for c in ("anchor", "positive", "negative")})
        return Task(kind, data, evaluator, primary, final, len(train_frame))
    texts = sentences(ds["train"])
    if config.train_limit:
        texts = list(np.random.default_rng(config.limit_seed).permutation(np.array(texts, dtype=object))
                     [:config.train_limit])
    if len(texts) < 2:
        raise CeaError(f"{ds.name} has {len(texts)} distinct sentence(s) to train on; {config.objective} needs more")
    columns = {"text": texts} if config.objective == "mlm" else {"anchor": texts, "positive": texts}
    return Task(kind, _hf(columns), evaluator, primary, final, len(texts))


def _class_task(config, ds, train_frame) -> Task:
    from .evaluator import KNNEvaluator

    if config.shots:
        from ..data.dataset import few_shot

        train_frame = few_shot(train_frame, config.shots, config.shots_seed)
    if config.imbalance:
        from ..data.dataset import imbalance, parse_imbalance

        train_frame = imbalance(train_frame, parse_imbalance(config.imbalance), config.shots_seed)
    if config.train_limit:
        train_frame = train_frame.sample(n=min(config.train_limit, len(train_frame)), random_state=config.seed)
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
    data = _hf({"text": list(train_frame["text"]), "label": labels})
    dev = ds["dev"]
    known = dev["label"].isin(label2id)
    evaluator = KNNEvaluator(train_frame["text"], ids, dev["text"][known], [label2id[x] for x in dev["label"][known]],
                             k=config.knn_k, name="dev")
    _, final, _ = judge(ds, train_frame["text"], train_frame["label"], k=config.knn_k)
    return Task("classes", data, evaluator, "dev_knn_accuracy", final, len(ids), names, ids, aux_ids, label2id)
