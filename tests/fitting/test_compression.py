import pytest

from cea.fitting.compression import depths, extras


def curve(model="m", length=128, **figures):
    return [{"model": model, "max_seq_length": length, "layer": int(k[1:]), "accuracy": v} for k, v in figures.items()]


@pytest.mark.parametrize(
    "rows, depth, expected",
    [
        # the upper half below 6 blocks (3-5): the best, layer 5, and the shallowest within 2 points of it, layer 4
        (curve(L0=20, L1=95, L2=75, L3=80, L4=83, L5=84, L6=90), 6, [4, 5]),
        (curve(L1=80, L2=81, L3=81, L4=81, L5=81, L6=82), 6, [3]),  # ties: the shallower; both rules name layer 3
        (curve(L6=90), 6, []),  # no layer below the trained depth
        # another model's or another length's layers: not read
        (curve(L1=50, L2=90, L3=99) + curve("other", L2=99) + curve(length=64, L2=99), 3, [2]),
        (curve(L1=61.5, L2=61.7, L3=62.8, L4=66.9), 4, [2, 3]),  # trec50's curve, 4 blocks trained
    ],
)
def test_the_depths_come_from_the_upper_half_of_the_probe_curve(rows, depth, expected):
    assert depths(rows, "m", 128, depth, "accuracy") == expected


def test_the_reserve_grows_with_the_candidates_the_texts_and_the_choosing():
    each = 10 + 0.002 * 10_000 / 2 + 0.25 * 5.0  # an int8 export, its encode (2x PyTorch) and its narrowed choice
    assert extras(3, 4, 0.002, 10_000, 5.0) == pytest.approx(3 * each + 4 * 5.0 + 9 * 8)
    assert extras(3, 4, 0.002, 20_000, 5.0) > extras(3, 4, 0.002, 10_000, 5.0) > extras(2, 4, 0.002, 10_000, 5.0)
    assert extras(3, 4, 0.002, 10_000, 9.0) > extras(3, 4, 0.002, 10_000, 5.0) > extras(3, 3, 0.002, 10_000, 5.0)


class Model:
    device, max_seq_length = "cpu", 128


def test_int8_candidates_make_the_trained_ones_first_and_only_what_ends_before_the_deadline(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from cea.fitting import candidates, compression
    from cea.fitting.candidate import Candidate, Choice
    from cea.fitting.options import FitOptions

    clock, made = [100.0], []
    monkeypatch.setattr(candidates.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(candidates, "is_static", lambda model: False)
    monkeypatch.setattr(candidates.LinearHead, "beside", staticmethod(lambda folder: None))

    def int8(parent, length, folder, ds, store):  # each export takes 30 s of the fake clock
        made.append(folder.name)
        clock[0] += 30.0
        return Candidate(folder.name, str(folder), parent.encoder, {})

    def choose_classifier(ds, embeddings, rare, trained, like):  # the parent's dev figure, less what its int8 loses
        return Choice({"accuracy": like.dev - lost.get(f"{like.name}-int8", 0.0)}, "", {}, like)

    monkeypatch.setattr(compression, "int8", int8)
    monkeypatch.setattr(candidates, "choose_classifier", choose_classifier)
    dev, lost = {"frozen": 80.0, "trained": 90.0, "truncated-3": 88.0, "truncated-2": 85.0}, {"truncated-3-int8": 1.0}

    def judged():
        kept = candidates.Candidates(SimpleNamespace(task="classification"), None, None, tmp_path, FitOptions())
        for name, v in dev.items():
            kept.add(
                Candidate(name, name, Model(), {}),
                choice=Choice({"accuracy": v}, "", {}, SimpleNamespace(name=name, dev=v)),
            )
        return kept

    # 100 s from now: the first estimated at 20 s, the rest at what the one before took (30 s): three fit
    first = judged()
    first.int8(None, deadline=200.0, first=20.0)
    assert made == ["trained-int8", "truncated-3-int8", "truncated-2-int8"]  # the frozen one's: no better than trained
    assert "truncated-3-int8" not in first and "trained-int8" in first  # 1 dev point lost: dropped
    assert (first["trained-int8"].backend, first["trained-int8"].max_seq_length) == ("onnx-int8", 128)
    assert first["trained-int8"].summary() == {
        "dev": {"accuracy": 90.0},
        "described": "",
        "test": {},
        "backend": "onnx-int8",
        "max_seq_length": 128,
    }
    assert first.skipped == [
        "truncated-3-int8 (dev 1.00 points below truncated-3; at most 0.3)",
        "frozen-int8 (the trained encoder's is as fast and no worse on dev)",
    ]
    made.clear(), clock.__setitem__(0, 100.0)
    dev["frozen"] = 95.0  # better than trained: made, last
    second = judged()
    second.int8(None, deadline=170.0, first=20.0)  # 70 s: two exports of 30
    assert made == ["trained-int8", "truncated-3-int8"]
    assert [line for line in second.skipped if "no time left" in line] == [
        "truncated-2-int8 (no time left)",
        "frozen-int8 (no time left)",
    ]
