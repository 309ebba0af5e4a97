"""A bundle's changes: its rows in memory kept in step with its store, and this process's changes made durable.

Before each request, what other processes changed since is applied (:meth:`Changes.sync`). A change of this process
(:meth:`Changes.make`) is made under the store's lock after catching up, so ids never collide; its record is written
without holding the bundle (predictions go on from the state before it), and it is applied and durable (one fsync'd
log line, or one committed transaction) when the call returns.

What it expects
    The store (:class:`cea.bundle.references.Store`), the bundle's lock over its rows, ``apply(record)``: one record
    applied to those rows, and ``reload()``: everything loaded afresh (after a compaction elsewhere).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from .references import Store


class Changes:
    """This process's changes to a store, one at a time, and the other processes' applied before each request.
    ``reload_next``: load everything afresh at the next :meth:`sync` (after a write that failed)."""

    def __init__(self, store: Store, lock: threading.RLock, apply: Callable[[dict], None], reload: Callable[[], None]):
        self.store, self.lock, self.apply, self.reload = store, lock, apply, reload
        self._changing = threading.RLock()  # a change of this process
        self.writing, self.reload_next = False, False  # its record being written; load afresh next

    def sync(self) -> None:
        """Apply what other processes changed since (under the lock); nothing while a change of this process is
        being written (:meth:`make` applies it, and what came before it, itself)."""
        if self.writing:
            return
        records = None if self.reload_next else self.store.pull()
        if records is None:
            self.reload()
            self.reload_next = False
        else:
            for record in records:
                self.apply(record)

    def make(self, record: Callable[[], dict | None]) -> dict | None:
        """One change: catch up and ``record()`` it (ids, checks; None: nothing to change) holding the lock, write it
        without (predictions go on meanwhile, from the state before it), then apply it. Durable when this returns; a
        write that failed leaves this process to load afresh."""
        with self._changing:
            written = False
            try:
                with self.store.locked():
                    with self.lock:
                        self.sync()
                        made = record()
                        if made is None:  # nothing to change
                            return None
                        self.writing = written = True
                    self.store.append(made)
                with self.lock:
                    self.writing = False
                    self.apply(made)
            except BaseException:
                with self.lock:
                    self.writing, self.reload_next = False, self.reload_next or written
                raise
            return made

    @contextlib.contextmanager
    def alone(self):
        """The only change anywhere (this process's, the store's and the lock), caught up: for a compaction."""
        with self._changing, self.store.locked(), self.lock:
            self.sync()
            yield
