"""Changes: a change made durable and applied here, replayed by another process and a restart; a write in progress
holds nobody's reads; a write that failed loads afresh."""

import threading

import pytest

from cea.bundle import Bundle
from cea.bundle.changes import Changes
from cea.bundle.references import FolderStore
from cea.knn.decision import Classifier


@pytest.fixture
def folder(tmp_path, tiny_st_dir, intents):
    Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier("knn", k=1),
        progress=False,
    ).close()
    return tmp_path / "b"


def opened(folder, applied, reloads):
    """A Changes over a folder store of its own (as another process would hold), recording what it applies."""
    store = FolderStore(folder)
    store.load()
    return Changes(store, threading.RLock(), applied.append, lambda: reloads.append(store.load()))


def ops(records):
    return [(r["op"], r["ids"]) for r in records]


def test_a_change_is_applied_here_and_replayed_by_another_process_and_a_restart(folder):
    here, there, reloads = [], [], []
    one, two = opened(folder, here, reloads), opened(folder, there, reloads)
    assert one.make(lambda: {"op": "remove", "ids": [3]}) == {"op": "remove", "ids": [3]}
    assert ops(here) == [("remove", [3])] and there == []  # durable and applied here; the other syncs first
    two.make(lambda: {"op": "relabel", "ids": [5], "labels": ["card"]})  # caught up under the lock, then its own
    assert ops(there) == [("remove", [3]), ("relabel", [5])]
    with one.lock:
        one.sync()
    assert ops(here) == [("remove", [3]), ("relabel", [5])] and reloads == []
    assert ops(FolderStore(folder).load().records) == [("remove", [3]), ("relabel", [5])]  # a restart replays both


def test_a_record_being_written_holds_no_reader_and_is_applied_once_written(folder):
    applied, reloads = [], []
    changes = opened(folder, applied, reloads)
    append, writing, release = changes.store.append, threading.Event(), threading.Event()

    def slow_append(record):
        writing.set()
        release.wait(10)
        append(record)

    changes.store.append = slow_append
    making = threading.Thread(target=changes.make, args=(lambda: {"op": "remove", "ids": [2]},))
    making.start()
    assert writing.wait(10)

    def read():  # a request's read
        with changes.lock:
            changes.sync()

    reading = threading.Thread(target=read)
    reading.start()
    reading.join(10)  # done while the record is still held in its write: the lock is free meanwhile
    assert not reading.is_alive() and not release.is_set() and applied == [] and changes.writing
    release.set()
    making.join(10)
    assert ops(applied) == [("remove", [2])] and not changes.writing


def test_a_write_that_failed_loads_everything_afresh_at_the_next_sync(folder):
    applied, reloads = [], []
    changes = opened(folder, applied, reloads)

    def failing(record):
        raise OSError("disk full")

    changes.store.append = failing
    with pytest.raises(OSError, match="disk full"):
        changes.make(lambda: {"op": "remove", "ids": [1]})
    assert changes.reload_next and not changes.writing and applied == []
    with changes.lock:
        changes.sync()
    assert len(reloads) == 1 and not changes.reload_next and reloads[0].records == []  # nothing was written
