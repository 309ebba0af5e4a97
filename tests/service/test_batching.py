"""Dynamic batching: concurrent items answered by one call, each with its own results, failures kept apart."""

import threading
import time

import pytest

from cea.service.batching import Batcher


def _submit_together(batcher, items):
    """Submit ``items`` from one thread each, released at once; their futures in order."""
    futures, ready = [None] * len(items), threading.Barrier(len(items))

    def one(i):
        ready.wait()
        futures[i] = batcher.submit(items[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(items))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return futures


def test_concurrent_items_are_answered_by_one_call_each_with_its_own_result():
    calls = []

    def run(items):
        calls.append(list(items))
        return [x * 10 for x in items]

    batcher = Batcher(run, max_batch=64, max_wait=0.5)
    futures = _submit_together(batcher, list(range(6)))
    assert [f.result(timeout=5) for f in futures] == [0, 10, 20, 30, 40, 50]
    assert len(calls) == 1 and sorted(calls[0]) == list(range(6))
    batcher.close()


def test_a_batch_closes_at_max_batch_sizes_and_an_item_larger_than_it_goes_alone():
    calls = []

    def run(items):
        calls.append([len(x) for x in items])
        return [len(x) for x in items]

    batcher = Batcher(run, max_batch=4, max_wait=0.3, size=len)
    futures = _submit_together(batcher, [["a"], ["b", "c"], ["d"], ["e", "f", "g"], ["h"] * 9])
    assert sorted(f.result(timeout=5) for f in futures) == [1, 1, 2, 3, 9]
    assert all(sum(sizes) <= 4 or sizes == [9] for sizes in calls) and [9] in calls
    batcher.close()


def test_a_failing_item_fails_its_own_request_only():
    def run(items):
        if "bad" in items:
            raise ValueError("bad item")
        return [x.upper() for x in items]

    batcher = Batcher(run, max_wait=0.5)
    futures = _submit_together(batcher, ["one", "bad", "two"])
    assert futures[0].result(timeout=5) == "ONE" and futures[2].result(timeout=5) == "TWO"
    with pytest.raises(ValueError, match="bad item"):
        futures[1].result(timeout=5)
    batcher.close()


def test_two_workers_run_batches_side_by_side_and_close_answers_what_is_queued():
    running, most = [0], [0]
    lock = threading.Lock()

    def run(items):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return items

    batcher = Batcher(run, max_batch=1, max_wait=0, workers=2)
    futures = [batcher.submit(i) for i in range(4)]
    batcher.close()
    assert [f.result(timeout=5) for f in futures] == [0, 1, 2, 3] and most[0] == 2
    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit(5)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="max_batch"):
        Batcher(list, max_batch=0)
    with pytest.raises(ValueError, match="max_wait"):
        Batcher(list, max_wait=-1)


def test_futures_of_an_event_loop_are_settled_in_one_wake_up_of_it_a_batch():
    import asyncio

    def run(items):
        if 3 in items:
            raise ValueError("three")  # run alone, each item: only 3's waiter fails
        return [x * 10 for x in items]

    batcher = Batcher(run, max_batch=64, max_wait=0.2)

    async def main():
        loop, wakes = asyncio.get_running_loop(), []
        wake = loop.call_soon_threadsafe
        loop.call_soon_threadsafe = lambda *a: (wakes.append(a), wake(*a))[1]
        got = await asyncio.gather(*[batcher.submit_async(i) for i in range(6)], return_exceptions=True)
        return got, wakes

    got, wakes = asyncio.run(main())
    assert got[:3] + got[4:] == [0, 10, 20, 40, 50] and isinstance(got[3], ValueError)
    assert len(wakes) == 1  # one batch, one wake-up (not one a future)
    batcher.close()
