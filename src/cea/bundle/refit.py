"""A bundle's linear head, kept in step with its examples off the request path.

A change marks the head stale (:meth:`HeadRefit.changed`). The next prediction starts a refit in a thread of its own
(from the previous weights: :func:`cea.knn.head.fit_head`) and is answered by the previous head meanwhile
(:meth:`HeadRefit.serving`): added examples count through the neighbours, and a text whose nearest reference was added
after the head was fitted (``seen``: the index rows it counts) gets the neighbours' distance-weighted vote
(:meth:`cea.knn.decision.Classifier.decide`), so an example, and a new label, is predicted from the next request. A
refit runs at most :data:`REFIT_STEPS` lbfgs iterations and installs what it reached (``on_refit`` is told its seconds
and each change's wait for it); the next goes on from there, after :data:`REFIT_PAUSE` times its length. A multi-label
bundle refits at once when a label is new to its head. Until a refit lands, a label whose examples were all removed can
still be the previous head's answer.

What it expects
    The bundle's lock over its rows, held by the callers of :meth:`HeadRefit.changed` and :meth:`HeadRefit.serving`;
    ``rows()``: the live embeddings and labels (read under that lock).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from ..knn.decision import Classifier
from ..knn.head import LinearHead

# after a refit of t seconds the next one waits REFIT_PAUSE * t: under a stream of changes the background refit takes
# at most 1 / (1 + REFIT_PAUSE) of a core from the encoder (the changes count through the neighbours meanwhile)
REFIT_PAUSE = 9.0
# lbfgs iterations of one background refit: 10 took 0.5 s at banking77's 13,460 references (one thread) where
# convergence took 35 (1.7 s), and its head agreed with the converged one on 99.7% of the rows
REFIT_STEPS = 10


class HeadRefit:
    """The head of the live rows: fitted when asked (:meth:`head`), refitted in the background while predictions go
    on (:meth:`serving`). ``latest``: the head in place (None: none yet, or a kNN bundle); ``stale``: changes came
    since it was fitted; ``running``: a background refit is under way; ``on_refit(seconds, lags)``: told of each head
    installed and the seconds since each change it counts."""

    def __init__(
        self,
        lock: threading.RLock,
        rows: Callable[[], tuple],
        classifier: Classifier,
        extent: Callable[[], int] = lambda: 0,
    ):
        self.lock, self.rows, self.extent = lock, rows, extent
        self.changes, self.running = 0, False  # changes applied (never reset); a refit thread running
        self.reset(classifier, None)
        self.on_refit: Callable[[float, list[float]], None] | None = None

    def reset(self, classifier: Classifier, head: LinearHead | None) -> None:
        """Hold ``head`` (None: fitted when asked), fitted by ``classifier`` to the rows as they are now."""
        self.classifier, self.latest, self.stale = classifier, head, False
        self.fitted_at, self.pending = self.changes, deque()  # changes the head counts; (change, time) since
        self.seen = self.extent()  # the index rows before this one are the head's; those from it came since

    def changed(self) -> None:
        """One more change of the rows (under the lock): the head is stale from now on."""
        self.changes, self.stale = self.changes + 1, True
        self.pending.append((self.changes, time.perf_counter()))

    def head(self) -> LinearHead | None:
        """The head of the live rows, refitted here (holding the lock) if they changed since it was fitted; None for
        a kNN bundle, or while fewer than two labels are left in a single-label one (the kNN vote decides then)."""
        with self.lock:
            if self.classifier.kind != "linear":
                return None
            if self.latest is None or self.stale:
                started, seen = time.perf_counter(), self.extent()
                head = self.classifier.fit(*self.rows(), previous=self.latest)
                if head is None:
                    self.latest = None
                    return None
                self._settle(head, self.changes, time.perf_counter() - started, seen)
            return self.latest

    def serving(self, labels) -> LinearHead | None:
        """The head a prediction uses now (under the lock; ``labels``: the live labels): the last one fitted, a
        refit started in the background where changes came since. Fitted here, on the request path, only where
        there is none yet or a multi-label bundle has a label its head does not know."""
        if self.classifier.kind != "linear":
            return None
        if self.latest is None or (
            self.stale
            and self.classifier.multi_label
            and not {x for s in labels for x in s} <= set(self.latest.classes)
        ):
            return self.head()
        if self.stale and not self.running:
            self.running = True
            threading.Thread(target=self._refit, name="cea-refit", daemon=True).start()
        return self.latest

    def _settle(self, head: LinearHead, changes: int, seconds: float, seen: int) -> None:
        """Install ``head``, fitted on the rows as they were after ``changes`` changes, the first ``seen`` index rows
        (under the lock); an older fit than the head in place is dropped, as is one of the same changes where the head
        in place converged. A head that did not converge leaves the head stale: the next refit goes on from it."""
        if self.latest is not None and (changes < self.fitted_at or (changes == self.fitted_at and not self.stale)):
            return
        now, lags = time.perf_counter(), []
        while self.pending and self.pending[0][0] <= changes:
            lags.append(now - self.pending.popleft()[1])
        self.latest, self.fitted_at, self.seen = head, changes, seen
        self.stale = changes < self.changes or not head.converged
        if self.on_refit is not None:
            self.on_refit(seconds, lags)

    def _refit(self) -> None:
        """Refit the head until it counts every change, off the request path (:meth:`serving` starts it)."""
        try:
            while True:
                with self.lock:
                    if not self.stale or self.latest is None:
                        self.running = False
                        return
                    (embeddings, labels), previous, changes = self.rows(), self.latest, self.changes
                    seen = self.extent()
                started = time.perf_counter()
                head = self.classifier.fit(embeddings, labels, previous=previous, steps=REFIT_STEPS)
                with self.lock:
                    if head is None:  # fewer than two labels left: the vote decides
                        self.latest, self.running = None, False
                        return
                    took = time.perf_counter() - started
                    self._settle(head, changes, took, seen)
                time.sleep(REFIT_PAUSE * took)  # under a stream of changes the refit takes at most its share of a core
        except BaseException:
            with self.lock:
                self.running = False
            raise
