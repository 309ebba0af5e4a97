"""``cea fit``: from labelled data to a shipped classifier in one call (:func:`fit`).

run (the stages: probe, frozen, train, choose, ship), judgement (a candidate judged on dev; what a fit says and
writes of its choice), budget (its time budget: the clock, the training callback that stops where too few steps fit),
candidates (``--latency``'s static candidates, and the fastest one that fits).
"""

from .run import fit

__all__ = ["fit"]
