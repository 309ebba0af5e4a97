"""``cea fit``: from labelled data to a shipped classifier in one call (:func:`fit`).

run (the stages: probe, frozen, train, choose, ship), options (what a user asks of a fit, as one record), candidate
(one candidate encoder as a named record, its choice and its served speed as records), candidates (a fit's candidates
held together; their stages: judged on dev, ``--latency``'s static and int8 kinds, the timing, the choice), choice (a
candidate's classifier chosen on dev; what a fit says and writes of its choice), budget (its time budget: the clock,
the training callback that stops where too few steps fit), compression (``--latency``'s truncated and int8
transformers, the length cut), latency (``--latency``'s stage 4).
"""

from .run import fit

__all__ = ["fit"]
