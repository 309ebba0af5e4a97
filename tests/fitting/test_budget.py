"""cea.fitting.budget: cea fit's time budget, spent (parsed: tests/test_progress.py)."""

import pytest

import cea.fitting.budget as budget_module
from cea.fitting.budget import budget_callback


@pytest.mark.parametrize(
    "deadline, stop_at, why",
    [
        (15, 7, "15 of 100 steps fit at 1.00 s a step, under 20%"),  # measured over steps 3-7: stops there
        (30, 31, "the budget's deadline, after 31 of 100 steps"),  # 30 fit: it goes on to the deadline
    ],
)
def test_training_goes_on_where_a_useful_share_of_its_steps_fits(monkeypatch, deadline, stop_at, why):
    from transformers import TrainerControl, TrainerState

    now = [0.0]
    monkeypatch.setattr(budget_module.time, "perf_counter", lambda: now[0])
    budget = budget_callback(deadline)
    state, control = TrainerState(global_step=0, max_steps=100), TrainerControl()
    budget.on_train_begin(None, state, control)
    while not control.should_training_stop and state.global_step < 100:  # a step takes one second
        now[0] += 1
        state.global_step += 1
        budget.on_step_end(None, state, control)
    assert state.global_step == stop_at and budget.stopped == why
    assert budget.report()["seconds_per_step"] == 1.0 and budget.report()["planned_steps"] == 100
