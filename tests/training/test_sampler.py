from collections import Counter

import pytest
from datasets import Dataset

from cea.errors import CeaError
from cea.training import PKBatchSampler


def _dataset(counts):
    labels = [label for label, n in counts.items() for _ in range(n)]
    return Dataset.from_dict({"text": [f"t{i}" for i in range(len(labels))], "label": labels})


def test_every_batch_has_p_labels_times_k():
    ds = _dataset({0: 10, 1: 7, 2: 12, 3: 5, 4: 9})
    sampler = PKBatchSampler(ds, batch_size=6, k=2, seed=3)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 43 // 6
    for batch in batches:
        counts = Counter(ds["label"][i] for i in batch)
        assert len(batch) == 6 and len(set(batch)) == 6
        assert sorted(counts.values()) == [2, 2, 2]


def test_order_depends_only_on_seed_and_epoch():
    ds = _dataset({0: 10, 1: 10, 2: 10})
    a, b = PKBatchSampler(ds, 4, k=2, seed=1), PKBatchSampler(ds, 4, k=2, seed=1)
    assert list(a) == list(b)
    b.set_epoch(1)
    assert list(a) != list(b)


def test_a_class_with_fewer_than_k_examples_contributes_what_it_has():
    sizes = {0: 10, 1: 8, 2: 3, 3: 1, 4: 2}  # a long tail: classes of 3, 1 and 2 examples
    ds = _dataset(sizes)
    batches, seen = list(PKBatchSampler(ds, 8, k=4, seed=0)), set()
    assert len(batches) == 24 // 8
    for batch in batches:  # two labels, each with K examples or all it has, none twice
        counts = Counter(ds["label"][i] for i in batch)
        assert len(counts) == 2 and all(n == min(4, sizes[label]) for label, n in counts.items())
        assert len(set(batch)) == len(batch)
        seen |= set(counts)
    assert {2, 3, 4} <= seen


def test_single_class_and_batch_size():
    with pytest.raises(CeaError, match="single class"):
        PKBatchSampler(_dataset({0: 10}), 4, k=2)
    with pytest.raises(CeaError, match="k_per_class 4 must divide the batch size 6"):
        PKBatchSampler(_dataset({0: 10, 1: 10}), 6, k=4)


def test_fewer_labels_than_p_keeps_the_batch_size():
    ds = _dataset({0: 20, 1: 20, 2: 20})
    sampler = PKBatchSampler(ds, batch_size=12, k=2)  # P would be 6, but there are 3 labels: K becomes 4
    for batch in sampler:
        assert sorted(Counter(ds["label"][i] for i in batch).values()) == [4, 4, 4]
    assert len(sampler) == 60 // 12


def test_texts_with_several_labels_are_batched_by_their_first_label():
    rows = [[1.0, 0.0, 0.0]] * 6 + [[1.0, 1.0, 0.0]] * 2 + [[0.0, 1.0, 1.0]] * 8 + [[0.0, 0.0, 1.0]] * 8
    ds = Dataset.from_dict({"text": [f"t{i}" for i in range(len(rows))], "label": rows})
    sampler = PKBatchSampler(ds, batch_size=4, k=2, seed=0)
    for batch in sampler:  # two texts of each of two first labels (0: rows 0-7, 1: rows 8-15, 2: rows 16-23)
        firsts = Counter(ds["label"][i].index(1.0) for i in batch)
        assert sorted(firsts.values()) == [2, 2]
