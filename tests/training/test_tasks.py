"""What a run learns from and how it is judged (cea.training.tasks): the task built complete in one call, the trained
head's dev accuracy its primary figure where the objective has a head."""

import pytest

from cea.errors import CeaError
from cea.training import TrainConfig
from cea.training.config import load_data, with_defaults
from cea.training.tasks import build_task, evaluation_functions, training_data


class _WithHead:  # an objective with a trained head, as softmax's
    def linear_head(self, classes):
        raise AssertionError("the head is read when dev is judged, not when the task is built")


def test_the_task_is_built_complete_with_the_objectives_head_judging_dev(topics_csv):
    config = TrainConfig(dataset=topics_csv, objective="softmax")
    ds = load_data(config)
    config = with_defaults(config, ds)
    data = training_data(config, ds)
    assert data.kind == "classes" and data.labels == ["card", "geo", "transfer"] and data.judged_on is not None
    assert data.n_train == len(data.train_dataset) == len(data.label_ids)
    knn = build_task(config, data)
    assert (knn.primary, knn.evaluator.primary_metric, knn.head, knn.dev_size) == (
        "dev_knn_accuracy",
        "knn_accuracy",
        None,
        None,
    )
    headed = build_task(config, data, _WithHead())
    assert (headed.primary, headed.evaluator.primary_metric) == ("dev_head_accuracy", "head_accuracy")
    assert headed.head is not None and headed.dev_size == headed.dev_texts == len(ds["dev"])


def test_the_evaluation_functions_are_named_and_an_unlabelled_set_cannot_judge(topics_csv):
    ds = load_data(TrainConfig(dataset=topics_csv))
    functions = evaluation_functions(ds)
    assert functions.primary == "dev_knn_accuracy" and callable(functions.dev) and callable(functions.final)
    unlabelled = type("Sentences", (), {"task": "sentences", "name": "corpus"})()
    with pytest.raises(CeaError, match="corpus holds unlabelled sentences and cannot judge a model"):
        evaluation_functions(unlabelled)
