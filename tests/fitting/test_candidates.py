"""The candidates of one fit: which one dev names best."""

from types import SimpleNamespace

from cea.fitting.candidate import Candidate
from cea.fitting.candidates import Candidates


def _pool(tmp_path, **dev) -> Candidates:
    pool = Candidates(SimpleNamespace(task="classification"), None, None, tmp_path, None, False)
    for name, accuracy in dev.items():
        pool.kept[name] = Candidate(name, str(tmp_path / name), None, {}, choice={"dev": {"accuracy": accuracy}})
    return pool


def test_the_best_on_dev_and_on_a_tie_the_trained_encoder(tmp_path):
    assert _pool(tmp_path, frozen=80.0, trained=75.0).best_on_dev() == "frozen"
    assert _pool(tmp_path, frozen=75.0, trained=75.0).best_on_dev() == "trained"
    assert _pool(tmp_path, frozen=75.0, **{"trained-int8": 75.0}).best_on_dev() == "frozen"
    assert _pool(tmp_path, frozen=75.0, trained=75.0, **{"static-aligned": 76.0}).best_on_dev() == "static-aligned"
