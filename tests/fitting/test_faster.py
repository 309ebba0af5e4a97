import pytest

from cea.fitting.faster import depths, extras


def curve(model="m", length=128, **figures):
    return [{"model": model, "max_seq_length": length, "layer": int(k[1:]), "accuracy": v} for k, v in figures.items()]


@pytest.mark.parametrize("rows, depth, expected", [
    # the upper half below 6 blocks (3-5): the best, layer 5, and the shallowest within 2 points of it, layer 4
    (curve(L0=20, L1=95, L2=75, L3=80, L4=83, L5=84, L6=90), 6, [4, 5]),
    (curve(L1=80, L2=81, L3=81, L4=81, L5=81, L6=82), 6, [3]),  # ties: the shallower; both rules name layer 3
    (curve(L6=90), 6, []),  # no layer below the trained depth
    # another model's or another length's layers: not read
    (curve(L1=50, L2=90, L3=99) + curve("other", L2=99) + curve(length=64, L2=99), 3, [2]),
    (curve(L1=61.5, L2=61.7, L3=62.8, L4=66.9), 4, [2, 3]),  # trec50's curve, 4 blocks trained
])
def test_the_depths_come_from_the_upper_half_of_the_probe_curve(rows, depth, expected):
    assert depths(rows, "m", 128, depth, "accuracy") == expected


def test_the_reserve_grows_with_the_candidates_the_texts_and_the_judging():
    each = 10 + 0.002 * 10_000 / 3 + 0.25 * 5.0  # an int8 export, its encode and its narrowed choice
    assert extras(3, 4, 0.002, 10_000, 5.0) == pytest.approx(3 * each + 4 * 5.0 + 9 * 8)
    assert extras(3, 4, 0.002, 20_000, 5.0) > extras(3, 4, 0.002, 10_000, 5.0) > extras(2, 4, 0.002, 10_000, 5.0)
    assert extras(3, 4, 0.002, 10_000, 9.0) > extras(3, 4, 0.002, 10_000, 5.0) > extras(3, 3, 0.002, 10_000, 5.0)
