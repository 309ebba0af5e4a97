"""cea.fitting.candidate: a candidate, its choice and its served speed as records, and what fit.json says of them."""

import numpy as np

from cea.fitting.candidate import Candidate, Choice, Served


def test_fit_json_keeps_the_choice_in_words_an_exports_backend_and_the_speed_where_timed():
    choice = Choice({"accuracy": 90.0}, "linear head, C=10", {"accuracy": 88.0}, classifier=object())
    candidate = Candidate("frozen", "f", None, {s: np.ones((2, 3)) for s in ("train", "dev", "test")}, choice=choice)
    assert candidate.summary() == {
        "dev": {"accuracy": 90.0},
        "described": "linear head, C=10",
        "test": {"accuracy": 88.0},
    }
    assert candidate.dev("accuracy") == 90.0 and candidate.classifier is choice.classifier
    assert candidate.vectors().shape == (6, 3)
    candidate.backend, candidate.max_seq_length = "onnx-int8", 64
    candidate.served = Served(p99_ms=12.5, p50_ms=4.0, texts_per_second=900.0)
    assert list(candidate.summary()) == ["dev", "described", "test", "backend", "max_seq_length", "served"]
    assert candidate.summary()["served"] == {"p99_ms": 12.5, "p50_ms": 4.0, "texts_per_second": 900.0}
    assert Served(12.5, 4.0, 900.0, frontier=True).summary() == {
        "p99_ms": 12.5,
        "p50_ms": 4.0,
        "texts_per_second": 900.0,
        "frontier": True,
    }
