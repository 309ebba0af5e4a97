"""The judge of a background fit (:mod:`cea.service.fine_tuning`): whether the fitted bundle replaces the live one,
decided on the annotations both held back.

Rule
    Each bundle classifies the held-back annotations as it would serve them (:func:`cea.service.fine_tuning.scored`).
    Where their counts of right answers differ by more than :data:`CLOSE` texts, the one with more is chosen. A tie,
    or a difference of one or two texts, is broken by a finer measure on the same texts: the mean paired difference of
    the log-probability each bundle gives the gold label (clipped at :data:`FLOOR`), a proper score that sees a text
    answered right with more confidence, or wrong with less. The fitted bundle is swapped in only where it is ahead;
    on equal figures (log-probabilities within :data:`EQUAL`) the live one stays.

Why
    A few dozen held-back texts can rarely tell two good models apart by accuracy alone: on an easy set both get all
    of them right, and one text in 13 decides a small one. Label Studio's users then never see the fitted encoder.
    No peer backend fine-tunes in the background (:mod:`cea.service.fine_tuning`), so none judges such a fit: hence
    this module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CLOSE = 2  # held-back texts: a difference in right answers of at most this many is decided by the finer measure
FLOOR = 1e-4  # the smallest probability a log-probability reads (a gold label a bundle gives 0 does not sink a mean)
# mean log-probabilities closer than this are equal: a fit that kept the frozen encoder scores as the live bundle does,
# but for float noise (banking77, 3 a class: -1.7084 against -1.7084, and swapped before this bound)
EQUAL = 1e-4


@dataclass(frozen=True)
class Scored:
    """One bundle's answers on the held-back annotations: per text, whether it was right and the probability it gave
    the gold label."""

    right: np.ndarray  # bool, one per held-back text
    gold_probability: np.ndarray  # float in [0, 1], one per held-back text

    @property
    def accuracy(self) -> float:
        """Percent of the texts answered right."""
        return 100.0 * float(np.mean(self.right))

    @property
    def log_probability(self) -> np.ndarray:
        """Each text's log-probability of its gold label, the probability clipped at :data:`FLOOR`."""
        return np.log(np.clip(self.gold_probability, FLOOR, 1.0))


@dataclass(frozen=True)
class Verdict:
    """The judge's decision: ``swap`` (the fitted bundle replaces the live one), the measure that decided it
    (``accuracy`` or ``log-probability``), both bundles' figures and ``why`` in words."""

    swap: bool
    decided_by: str
    live_accuracy: float
    fitted_accuracy: float
    live_log_probability: float
    fitted_log_probability: float
    why: str

    def figures(self) -> dict:
        """The figures a fit's outcome reports (rounded): accuracies in percent, mean log-probabilities."""
        return {
            "live_accuracy": round(self.live_accuracy, 2),
            "fitted_accuracy": round(self.fitted_accuracy, 2),
            "live_log_probability": round(self.live_log_probability, 4),
            "fitted_log_probability": round(self.fitted_log_probability, 4),
            "decided_by": self.decided_by,
        }


def judge(live: Scored, fitted: Scored, close: int = CLOSE) -> Verdict:
    """The :class:`Verdict` on ``fitted`` against ``live``, both scored on the same held-back texts in the same order
    (module docstring: more right answers by more than ``close`` texts, else the higher mean log-probability of the
    gold label; ties keep ``live``)."""
    if live.right.shape != fitted.right.shape:
        raise ValueError(
            f"live and fitted were scored on {live.right.size} and {fitted.right.size} texts; score "
            "both on the same held-back annotations"
        )
    gained = int(fitted.right.sum()) - int(live.right.sum())
    live_lp, fitted_lp = float(live.log_probability.mean()), float(fitted.log_probability.mean())
    said = (
        f"the fit got {fitted.accuracy:.2f}% of the {fitted.right.size} held-back annotations right, the live "
        f"bundle {live.accuracy:.2f}%"
    )
    if abs(gained) > close:
        swap, decided_by = gained > 0, "accuracy"
    else:
        swap, decided_by = fitted_lp > live_lp + EQUAL, "log-probability"
        said += (
            f"; within {close} texts, so decided by the mean log-probability of the gold label: "
            f"{fitted_lp:.4f} against {live_lp:.4f}"
        )
    return Verdict(swap, decided_by, live.accuracy, fitted.accuracy, live_lp, fitted_lp, said)
