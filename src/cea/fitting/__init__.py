"""``cea fit``: from labelled data to a shipped classifier in one call (:func:`fit`).

run (the stages: probe, frozen, train, choose, ship), candidate (one candidate encoder as a named record), candidates
(a fit's candidates held together; their stages: judged on dev, ``--latency``'s static and int8 kinds, the timing, the
choice), choice (a candidate's classifier chosen on dev; what a fit says and writes of its choice), budget (its time
budget: the clock, the training callback that stops where too few steps fit), faster (``--latency``'s truncated and
int8 transformers, the length cut), latency (``--latency``'s stage 4).
"""

from .run import fit

__all__ = ["fit"]
