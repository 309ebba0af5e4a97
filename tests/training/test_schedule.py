"""The dev schedule (cea.training.schedule): the epochs a kNN-judged run evaluates dev after, and the plan of a run
its trained head judges."""

import pytest

from cea.training.schedule import evaluation_epochs, plan


@pytest.mark.parametrize(
    "epochs, select, judged",
    [
        (3, "last", [1, 2, 3]),
        (6, "last", [2, 4, 6]),
        (10, "last", [4, 8, 10]),
        (7, "last", [3, 6, 7]),
        (10, "best", list(range(1, 11))),
        (1, "last", []),
        (1, "best", [1]),
        (2.5, "last", [1, 2, 3]),
    ],
)
def test_dev_is_judged_at_every_epoch_only_when_select_best_chooses_among_them(epochs, select, judged):
    assert evaluation_epochs(epochs, select) == judged


@pytest.mark.parametrize(
    "select, patience, dev, expected",
    [
        (
            "best",
            2,
            40,
            ("steps", 5, (), 27),
        ),  # a trained head judges every half epoch of 9 steps, from its third epoch
        ("best", 2, 400, ("steps", 25, (), 27)),  # ... or after twice the dev texts trained (batches of 32), the longer
        ("last", 0, 40, ("epoch", None, (4, 8, 10), 0)),  # nothing chooses: about three judgements
        ("last", 2, None, ("epoch", None, tuple(range(1, 11)), 0)),  # kNN judges each epoch where patience counts
        ("best", None, None, ("epoch", None, tuple(range(1, 11)), 0)),
    ],
)
def test_the_plan_judges_every_half_epoch_where_the_head_judges(select, patience, dev, expected):
    got = plan(10, 9, select, patience, dev, batch_size=32, from_epoch=3)
    assert (got.strategy, got.steps, got.epochs, got.start) == expected
