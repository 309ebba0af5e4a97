"""Dynamic batching: concurrent requests answered by one call over all their texts.

An encoder gives several times more texts per second in batches than one text per call (all-MiniLM-L6-v2 on two
cores: about 85 texts/s one at a time, about 320 in length-sorted batches of 64), but a service whose every request
encodes its own text never batches. :class:`Batcher` queues the requests; a worker thread takes the first waiting
request, gathers more until the batch holds ``max_batch`` texts or ``max_wait`` seconds have passed since it took
the first, and answers the whole batch with one call of ``run``. Each request gets its own results back; where the
batch's call fails, each of its requests is run alone, so a request that fails fails alone. With several
``workers``, one gathers the next batch while the others run theirs.

What it expects
    ``run(items)``: a list of results, one per item, in their order (an exception instance in place of a result
    fails that item's request only).

When to use it
    In front of any call whose cost per item falls with the batch (an encoder, a search, a classifier), as
    text-embeddings-inference and infinity batch; neither is a library to put in front of a Python call.

Example
    >>> batcher = Batcher(lambda items: [x * 2 for x in items], max_batch=64, max_wait=0.005)
    >>> batcher.submit(21).result()
    42
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass


@dataclass(slots=True)
class Waiting:
    """A queued ``item``, the ``future`` of its result and when it was ``queued`` (``time.perf_counter``)."""

    item: object
    future: Future | asyncio.Future
    queued: float


class Batcher:
    """``workers`` threads answering queued items in batches of at most ``max_batch`` sizes (an item's size:
    ``size(item)``, 1 by default; an item larger than ``max_batch`` makes a batch of its own) after waiting at most
    ``max_wait`` seconds for the batch to fill. ``on_batch(sizes, waits)``, if given, is told each batch's total
    size and every item's seconds in the queue (for metrics)."""

    def __init__(
        self,
        run: Callable[[list], list],
        max_batch: int = 64,
        max_wait: float = 0.005,
        workers: int = 1,
        size: Callable[[object], int] = lambda item: 1,
        on_batch: Callable[[int, list[float]], None] | None = None,
    ):
        for name, value, least in (("max_batch", max_batch, 1), ("max_wait", max_wait, 0), ("workers", workers, 1)):
            if value < least:
                raise ValueError(f"{name} must be at least {least}, got {value}")
        self.run, self.max_batch, self.max_wait, self.size, self.on_batch = run, max_batch, max_wait, size, on_batch
        self._queue: queue.Queue = queue.Queue()
        self._held = None  # an item taken from the queue that did not fit the last batch: first of the next
        self._gathering = threading.Lock()  # one worker gathers at a time
        self._closed = False
        self._threads = [
            threading.Thread(target=self._loop, name=f"cea-batcher-{i}", daemon=True) for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, item) -> Future:
        """A future of ``item``'s result (or of the exception its run raised)."""
        return self._put(item, Future)

    def submit_async(self, item) -> asyncio.Future:
        """From a running event loop: an asyncio future of ``item``'s result, settled in that loop together with the
        rest of its batch's (one wake-up of the loop a batch; a ``wrap_future`` of :meth:`submit` wakes it once a
        request, a tenth of a static encoder's service's time under one-text load: a py-spy profile)."""
        return self._put(item, lambda: asyncio.get_running_loop().create_future())

    def _put(self, item, make: Callable[[], Future | asyncio.Future]):
        if self._closed:
            raise RuntimeError("the batcher is closed")
        future = make()
        self._queue.put(Waiting(item, future, time.perf_counter()))
        return future

    def close(self) -> None:
        """Answer what is queued, then stop the worker."""
        self._closed = True
        self._queue.put(None)  # each worker that meets it puts it back for the next
        for thread in self._threads:
            thread.join()

    def _gather(self) -> list | None:
        """The next batch: the first item waited for without limit, then more until full or ``max_wait`` is up."""
        first = self._held if self._held is not None else self._queue.get()
        self._held = None
        if first is None:
            self._queue.put(None)
            return None
        batch, total = [first], self.size(first.item)
        deadline = time.perf_counter() + self.max_wait
        while total < self.max_batch:
            left = deadline - time.perf_counter()
            try:
                entry = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if entry is None:  # closing: answer this batch, then stop
                self._queue.put(None)
                break
            n = self.size(entry.item)
            if total + n > self.max_batch:
                self._held = entry
                break
            batch.append(entry)
            total += n
        return batch

    def _loop(self) -> None:
        while True:
            with self._gathering:
                batch = self._gather()
            if batch is None:
                return
            started = time.perf_counter()
            items = [waiting.item for waiting in batch]
            try:
                results = self.run(items)
                if len(results) != len(items):
                    raise RuntimeError(f"run gave {len(results)} results for {len(items)} items")
            except Exception as exc:  # noqa: BLE001 - each item alone, so that only the failing ones fail
                results = [exc] if len(items) == 1 else []
                for item in items if len(items) > 1 else []:
                    try:
                        results.append(self.run([item])[0])
                    except Exception as error:  # noqa: BLE001 - handed to that item's request
                        results.append(error)
            if self.on_batch is not None:
                self.on_batch(sum(self.size(x) for x in items), [started - waiting.queued for waiting in batch])
            loops: dict = {}  # each event loop's futures of this batch, settled in one call
            for waiting, result in zip(batch, results):
                if isinstance(waiting.future, asyncio.Future):
                    loops.setdefault(waiting.future.get_loop(), []).append((waiting.future, result))
                else:
                    settle([(waiting.future, result)])
            for loop, pairs in loops.items():
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for these
                    loop.call_soon_threadsafe(settle, pairs)


def settle(pairs: list) -> None:
    """Each ``(future, result)`` of ``pairs`` (asyncio futures: in their event loop): the future given its result (an
    exception instance: raised to its waiter), unless it was cancelled."""
    for future, result in pairs:
        if future.cancelled():
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)
