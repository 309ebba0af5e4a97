"""cea.bundle.speed: a bundle timed as the service asks it (what cea fit --latency chooses by)."""

import torch

from cea.bundle import Bundle, speed
from cea.bundle.speed import answer_speed, served_speed


class Clock:
    """speed's clock, faked: it moves only when the bundle works."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


class Recorder:
    """A bundle's predict_many that takes 1 ms a text on ``clock`` and remembers each call's requests."""

    def __init__(self, clock):
        self.calls, self.clock = [], clock

    def predict_many(self, requests):
        assert all(request.k is None and request.threshold is None for request in requests)  # the service's own
        self.calls.append([request.texts for request in requests])
        self.clock.now += 0.001 * sum(len(texts) for texts in self.calls[-1])
        return [[] for _ in requests]


def test_one_text_requests_come_in_the_services_batches_and_bulk_in_one_request(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(speed, "time", clock)
    bundle = Recorder(clock)
    timed = answer_speed(bundle, ["a", "b", "c"], clients=16, batch=64, seconds=0.05, rounds=3, max_batch=8)
    one_text = [call for call in bundle.calls if all(len(texts) == 1 for texts in call)]
    bulk = [call for call in bundle.calls if len(call) == 1 and len(call[0]) == 64]
    assert len(one_text) >= 1 + 3 and len(bulk) >= 3 and len(one_text) + len(bulk) == len(bundle.calls)
    assert {len(call) for call in one_text[1:]} == {8}  # 16 clients: batches of at most max_batch (the warm-up: 8)
    assert bulk[0][0][:4] in (["a", "b", "c", "a"], ["b", "c", "a", "b"], ["c", "a", "b", "c"])  # the texts in turn
    assert timed["p50_ms"] == timed["p99_ms"] == 8.0  # 8 texts at 1 ms each
    assert timed["texts_per_second"] == 1000.0


def test_a_bundle_folder_is_timed_on_one_thread_as_the_service_runs_it(tiny_bert_dir, tmp_path, monkeypatch):
    Bundle.create(
        tmp_path / "b",
        tiny_bert_dir,
        ["my card is lost", "send money", "card gone"],
        ["card", "transfer", "card"],
        progress=False,
    ).close()
    seen = []
    monkeypatch.setattr(
        "cea.bundle.speed.answer_speed",
        lambda bundle, texts, **options: seen.append((torch.get_num_threads(), len(bundle.ids))) or {},
    )
    torch.set_num_threads(2)
    assert served_speed(tmp_path / "b", ["a text"]) == {} and seen == [(1, 3)]
    assert torch.get_num_threads() == 2  # as it was
