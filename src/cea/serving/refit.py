"""The bundle's linear head, kept in step with its examples off the request path.

A change marks the head stale. The next prediction starts a refit in a thread of its own (from the previous
weights, a new label's row from its examples: :func:`cea.knn.head.fit_head`) and is answered by the previous head
meanwhile: added examples already count through the neighbours, and a text whose nearest reference carries a label
the head does not know yet is answered by the distance-weighted vote of its neighbours
(:meth:`cea.knn.decision.Classifier.decide`), so a new label is predicted from the next request. The refitted head is
installed when ready (``on_refit`` is told its seconds and each change's wait for it). A background refit runs at
most :data:`REFIT_STEPS` lbfgs iterations and installs what it reached; where that was not convergence the next
refit goes on from there, so a change reaches the head in a fraction of a full refit's time. Refits are spaced by
:data:`REFIT_PAUSE` times their length, which bounds their share of a core under a stream of changes. A multi-label
bundle refits at once when a label is new to its head. Until a refit lands, a label whose examples were all removed
can still be the previous head's answer.

What it expects
    :class:`HeadRefits` is a part of :class:`cea.serving.Bundle`, which holds what it reads: ``lock`` (the rows in
    memory), ``classifier`` (:class:`cea.knn.decision.Classifier`), ``multi_label``, the live ``embeddings`` and
    ``labels``, ``_counts`` (live labels), ``_changes`` (changes applied), and the head's state it sets in
    ``_install`` and ``_apply``: ``_head``, ``_head_stale``, ``_head_changes``, ``_pending`` (each change and its
    time) and ``_refitting``; ``on_refit``, called after each refit, or None.
"""

from __future__ import annotations

import threading
import time

from ..knn.head import LinearHead

# after a refit of t seconds the next one waits REFIT_PAUSE * t: under a stream of changes the background refit takes
# at most 1 / (1 + REFIT_PAUSE) of a core from the encoder (the changes count through the neighbours meanwhile)
REFIT_PAUSE = 9.0
# lbfgs iterations of one background refit: 10 took 0.5 s at banking77's 13,460 references (one thread) where
# convergence took 35 (1.7 s), and its head agreed with the converged one on 99.7% of the rows
REFIT_STEPS = 10


class HeadRefits:
    """The head of a bundle's live examples: fitted when asked (:meth:`head`), refitted in the background while
    predictions go on (:meth:`_serving_head`)."""


    def head(self) -> LinearHead | None:
        """The linear head of the live examples, refitted here (holding the bundle) if they changed since it was
        fitted; None for a kNN bundle, or while fewer than two labels are left in a single-label one (the kNN vote
        decides then)."""
        with self.lock:
            if not self._linear:
                return None
            if self._head is None or self._head_stale:
                started = time.perf_counter()
                head = self._fit(self.embeddings, self.labels, self._head)
                if head is None:
                    self._head = None
                    return None
                self._settle(head, self._changes, time.perf_counter() - started)
            return self._head

    _linear = property(lambda self: self.classifier.kind == "linear")

    def _fit(self, embeddings, labels, previous, steps: int | None = None) -> LinearHead | None:
        """The head of these rows (:meth:`cea.knn.decision.Classifier.fit`); ``steps`` bounds a single-label head's
        lbfgs from ``previous`` (a multi-label head converges)."""
        return self.classifier.fit(embeddings, labels, previous=previous, steps=steps)

    def _settle(self, head: LinearHead, changes: int, seconds: float) -> None:
        """Install ``head``, fitted on the rows as they were after ``changes`` changes (under the lock); an older
        fit than the head in place is dropped, as is one of the same changes where the head in place converged. A
        head that did not converge leaves the head stale: the next refit goes on from it."""
        if self._head is not None and (changes < self._head_changes
                                       or (changes == self._head_changes and not self._head_stale)):
            return
        now, lags = time.perf_counter(), []
        while self._pending and self._pending[0][0] <= changes:
            lags.append(now - self._pending.popleft()[1])
        self._head, self._head_changes = head, changes
        self._head_stale = changes < self._changes or not head.converged
        if self.on_refit is not None:
            self.on_refit(seconds, lags)

    def _serving_head(self) -> LinearHead | None:
        """The head a prediction uses now (under the lock): the last one fitted, a refit started in the background
        where changes came since. Fitted here, on the request path, only where there is none yet or a multi-label
        bundle has a label its head does not know."""
        if not self._linear:
            return None
        if self._head is None or (self._head_stale and self.multi_label
                                  and not {x for s in self._counts for x in s} <= set(self._head.classes)):
            return self.head()
        if self._head_stale and not self._refitting:
            self._refitting = True
            threading.Thread(target=self._refit, name="cea-refit", daemon=True).start()
        return self._head

    def _refit(self) -> None:
        """Refit the head until it counts every change, off the request path (:meth:`_serving_head` starts it)."""
        try:
            while True:
                with self.lock:
                    if not self._head_stale or self._head is None:
                        self._refitting = False
                        return
                    embeddings, labels, previous, changes = self.embeddings, self.labels, self._head, self._changes
                started = time.perf_counter()
                head = self._fit(embeddings, labels, previous, steps=REFIT_STEPS)
                with self.lock:
                    if head is None:  # fewer than two labels left: the vote decides
                        self._head, self._refitting = None, False
                        return
                    took = time.perf_counter() - started
                    self._settle(head, changes, took)
                time.sleep(REFIT_PAUSE * took)  # under a stream of changes the refit takes at most its share of a core
        except BaseException:
            with self.lock:
                self._refitting = False
            raise
