"""cea.progress: bars on a terminal, plain lines elsewhere."""

import io

import pytest

from cea.errors import CeaError
from cea.progress import LINES, duration, interactive, parse_duration


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_interactive_only_on_a_terminal():
    assert interactive(_Terminal()) and not interactive(io.StringIO())
    assert duration(42.4) == "42 s" and duration(185) == "3 min 05 s"


def test_budgets_are_durations():
    assert parse_duration("15m") == 900 and parse_duration("1h30m") == 5400 and parse_duration("90s") == 90
    assert parse_duration(42) == 42 and parse_duration("2.5m") == 150
    for bad in ("soon", "0m", -1, ""):
        with pytest.raises(CeaError, match="^budget must be"):
            parse_duration(bad)
    with pytest.raises(CeaError, match="^train_budget must be a duration") as caught:
        parse_duration("soon", "train_budget")
    assert caught.value.cli.startswith("--train-budget must be a duration")


def test_a_run_reporting_in_lines_writes_one_whole_line_per_epoch(intents_csv, tiny_bert_dir, tmp_path, capfd):
    from cea.training import TrainConfig, train

    config = TrainConfig(
        dataset=intents_csv,
        model=tiny_bert_dir,
        epochs=3,
        select="best",
        batch_size=8,
        k_per_class=2,
        output=str(tmp_path / "run"),
        patience=0,
    )
    train(config, progress=LINES)
    out, err = capfd.readouterr()
    assert "\r" not in err
    assert "{'loss'" not in out + err  # the trainer's log records stay in the run's training_log.jsonl
    lines = [line for line in err.splitlines() if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in lines] == ["epoch 1", "epoch 2", "epoch 3"]
    assert all("steps/s, about" in line and " left" in line for line in lines)
    assert ", dev head_accuracy " in lines[-1]  # the head judges from its third epoch: the latest judgement


def test_a_long_epoch_says_a_line_a_minute_and_its_end_with_the_dev_figure(monkeypatch):
    from transformers import TrainerState

    from cea import progress

    clock = [0.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: clock[0])
    lines: list[str] = []
    callback = progress.epoch_lines(say=lines.append, every=60)
    state = TrainerState(max_steps=100, global_step=0, epoch=0)
    callback.on_train_begin(None, state, None)
    for step in range(1, 101):  # one epoch of 100 steps, 2 s each
        clock[0] += 2.0
        state.global_step, state.epoch = step, step / 100
        callback.on_step_end(None, state, None)
    callback.on_epoch_end(None, state, None)
    callback.on_evaluate(None, state, None, metrics={"eval_dev_knn_accuracy": 0.9})
    callback.on_train_end(None, state, None)
    assert [line.split(",")[0] for line in lines] == [
        "epoch 0.3: step 30/100",
        "epoch 0.6: step 60/100",
        "epoch 0.9: step 90/100",
        "epoch 1: step 100/100",
    ]
    assert all(", 0.50 steps/s, about " in line for line in lines)
    assert lines[-1].endswith(", dev knn_accuracy 90.00") and "dev" not in lines[0]


def test_loading_and_bundling_a_local_model_draws_no_bar(tiny_bert_dir, tmp_path, capfd):
    """transformers' "Loading weights" and "Writing model shards" bars stay off around a local model, in a library
    call too (Bundle.load in a notebook), and its own setting is as it was after."""
    from transformers.utils import logging

    from cea.bundle import Bundle
    from cea.encoders import load_encoder

    before = logging.is_progress_bar_enabled()
    logging.enable_progress_bar()  # bars on, as in a notebook (a command before may have turned them off)
    try:
        load_encoder(tiny_bert_dir)
        Bundle.create(tmp_path / "b", tiny_bert_dir, ["a card", "a transfer"], ["card", "transfer"], progress=False)
        Bundle.load(tmp_path / "b")
        assert logging.is_progress_bar_enabled()  # as it was before
    finally:
        if not before:
            logging.disable_progress_bar()
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "Writing model shards" not in err and "\r" not in err
