"""HeadRefit: a change makes the head stale; predictions get the previous head at once while the refit runs in the
background, and the refitted head (a new label included) once it lands."""

import threading
import time

import numpy as np

import cea.bundle.refit as refit
from cea.bundle.refit import HeadRefit
from cea.knn.decision import Classifier


def clusters(labels, per=8, seed=0):
    """Unit-length rows around one direction per label."""
    rng = np.random.default_rng(seed)
    centres = {label: rng.normal(size=16) for label in labels}
    x = np.stack([centres[label] + 0.3 * rng.normal(size=16) for label in labels for _ in range(per)])
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), [
        label for label in labels for _ in range(per)
    ]


class Gated:
    """A classifier whose fits wait until ``open`` is set."""

    def __init__(self, classifier):
        self.classifier, self.open = classifier, threading.Event()

    def __getattr__(self, name):
        return getattr(self.classifier, name)

    def fit(self, *args, **kwargs):
        assert self.open.wait(10)
        return self.classifier.fit(*args, **kwargs)


def test_predictions_get_the_previous_head_until_the_refit_lands(monkeypatch):
    monkeypatch.setattr(refit, "REFIT_PAUSE", 0.0)
    x, y = clusters(["a", "b", "c"])
    rows, lock, gated = {"x": x[:16], "y": y[:16]}, threading.RLock(), Gated(Classifier(k=1))
    heads = HeadRefit(lock, lambda: (rows["x"], rows["y"]), gated)
    lags = []
    heads.on_refit = lambda seconds, waited: lags.append(len(waited))
    gated.open.set()
    first = heads.head()  # none yet: fitted when asked
    assert first.classes.tolist() == ["a", "b"] and not heads.stale and lags == [0]
    gated.open.clear()
    with lock:  # a change: label c's examples added
        rows["x"], rows["y"] = x, y
        heads.changed()
        assert heads.stale and heads.serving(rows["y"]) is first  # at once, the refit started meanwhile
    assert heads.running
    served = []

    def ask():
        with lock:
            served.append(heads.serving(rows["y"]))

    asking = threading.Thread(target=ask)
    asking.start()
    asking.join(10)  # answered while the refit is held at its gate: nobody waits for it, no second one starts
    assert served == [first] and not gated.open.is_set() and heads.latest is first
    gated.open.set()
    for _ in range(200):
        if not heads.running:
            break
        time.sleep(0.05)
    assert not heads.running and not heads.stale and heads.latest is not first
    assert heads.latest.classes.tolist() == ["a", "b", "c"] and heads.serving(rows["y"]) is heads.latest
    assert lags[1] == 1 and sum(lags) == 1  # the first refit installed counted the change


def test_a_knn_classifier_has_no_head_to_refit():
    x, y = clusters(["a", "b"])
    heads = HeadRefit(threading.RLock(), lambda: (x, y), Classifier("knn", k=1))
    heads.changed()
    assert heads.head() is None and heads.serving(y) is None and not heads.running


def test_an_example_added_since_the_head_answers_the_texts_nearest_it(tmp_path, tiny_st_dir, monkeypatch):
    from cea.bundle import Bundle

    monkeypatch.setattr(HeadRefit, "_refit", lambda self: None)  # the background refit never lands here
    x, y = clusters(["a", "b"], per=4)
    x = np.hstack([x, np.zeros((len(x), 16), np.float32)])  # the tiny BERT's 32 dimensions
    query = (x[0] + x[4]) / np.linalg.norm(x[0] + x[4])  # between the two classes
    vectors = {f"t{i}": v for i, v in enumerate(x)} | {"query": query, "twin": query}
    bundle = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        [f"t{i}" for i in range(len(x))],
        y,
        embeddings=x,
        classifier=Classifier(k=3),
        progress=False,
    )
    bundle.embed = lambda batch: np.stack([vectors[t] for t in batch])
    before = bundle.predict(["query"])[0].label
    other = "b" if before == "a" else "a"
    bundle.add(["twin"], [other])
    assert bundle.refit.stale and bundle.predict(["query"])[0].label == other  # before any refit
    assert bundle.predict(["t1"])[0].label == "a"  # a text nearest an older example: the head's answer
