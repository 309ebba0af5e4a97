"""cea.fitting.options: what a user asks of cea fit, one record with fit's own arguments and defaults."""

import dataclasses
import inspect

import pytest

from cea.fitting import fit
from cea.fitting.options import FitOptions


def test_the_record_has_fits_arguments_in_order_with_the_same_defaults():
    parameters = inspect.signature(fit).parameters
    assert [f.name for f in dataclasses.fields(FitOptions)] == list(parameters)
    assert {f.name: f.default for f in dataclasses.fields(FitOptions)} == {
        name: p.default for name, p in parameters.items()
    }


def test_the_trackers_see_every_option_but_how_progress_is_shown():
    options = FitOptions(dataset={"train": "t.csv"}, models=["m"], budget=60, progress="lines", latency=20.0)
    assert options.shown() == {
        "dataset": {"train": "t.csv"},
        "output": "cea-bundle",
        "models": ["m"],
        "budget": 60,
        "text_column": "text",
        "label_column": "label",
        "split_map": None,
        "work": None,
        "device": None,
        "precision": None,
        "seed": 0,
        "label_names": "auto",
        "label_separator": None,
        "report_to": "none",
        "latency": 20.0,
    }
    assert not options.bars and FitOptions().bars and not FitOptions(progress=False).bars
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.latency = 10.0
