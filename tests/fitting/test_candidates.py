"""The candidates of one fit: which one dev names best; timed without the service."""

import subprocess
import sys
from types import SimpleNamespace

from cea.fitting.candidate import Candidate, Choice
from cea.fitting.candidates import Candidates
from cea.fitting.options import FitOptions


def _candidates(tmp_path, **dev) -> Candidates:
    candidates = Candidates(SimpleNamespace(task="classification"), None, None, tmp_path, FitOptions())
    for name, accuracy in dev.items():
        candidates.kept[name] = Candidate(
            name, str(tmp_path / name), None, {}, choice=Choice({"accuracy": accuracy}, "k=1, uniform", {}, None)
        )
    return candidates


def test_the_best_on_dev_and_on_a_tie_the_trained_encoder(tmp_path):
    assert _candidates(tmp_path, frozen=80.0, trained=75.0).best_on_dev() == "frozen"
    assert _candidates(tmp_path, frozen=75.0, trained=75.0).best_on_dev() == "trained"
    assert _candidates(tmp_path, frozen=75.0, **{"trained-int8": 75.0}).best_on_dev() == "frozen"
    assert (
        _candidates(tmp_path, frozen=75.0, trained=75.0, **{"static-aligned": 76.0}).best_on_dev() == "static-aligned"
    )


def test_a_fit_times_its_bundles_without_loading_the_service():
    """cea.bundle.speed times a bundle as the service runs it, from the batching defaults both read (cea.defaults):
    importing cea.fitting loads no module of cea.service, nor FastAPI or prometheus."""
    code = (
        "import sys, cea.fitting, cea.fitting.candidates; "
        "print(sorted(m for m in sys.modules if m.startswith(('cea.service', 'fastapi', 'prometheus_client'))))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr[-2000:]
