"""Index backends agree with exact search; recall is measured; save and load round-trip."""

import numpy as np
import pytest

from cea.errors import CeaError
from cea.knn.index import VectorIndex, build_index, choose_kind, recall_at_k


@pytest.fixture
def clustered():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(20, 16))
    return (centres[rng.integers(0, 20, 2000)] + 0.3 * rng.normal(size=(2000, 16))).astype(np.float32)


@pytest.mark.parametrize("kind, params", [("exact", {}), ("flat", {}), ("hnsw", {"ef_search": 128}),
                                          ("ivf", {"nlist": 16, "nprobe": 16})])
def test_every_kind_finds_the_exact_neighbours(clustered, kind, params, tmp_path):
    index, info = build_index(clustered[:1500], kind, params)
    assert info.kind == kind and info.n == 1500
    exact, _ = build_index(clustered[:1500], "exact")
    sims, rows = index.search(clustered[1500:], 5)
    true_sims, true_rows = exact.search(clustered[1500:], 5)
    overlap = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(rows.tolist(), true_rows.tolist())])
    assert overlap >= (1.0 if kind in ("exact", "flat") else 0.95)
    np.testing.assert_allclose(sims[:, 0], true_sims[:, 0], atol=1e-4 if kind in ("exact", "flat") else 0.05)
    if kind in ("hnsw", "ivf"):  # nprobe = nlist makes IVF exhaustive
        assert 0.95 <= info.recall_at_k <= 1.0
    else:
        assert info.recall_at_k is None
    index.save(tmp_path / kind)
    loaded = VectorIndex.load(tmp_path / kind, kind, index.params)
    np.testing.assert_array_equal(loaded.search(clustered[1500:], 5)[1], rows)
    loaded.add(clustered[1500:1510])
    assert len(loaded) == 1510 and loaded.search(clustered[1505:1506], 1)[1][0, 0] == 1505


def test_recall_of_a_weak_index_is_measured_not_assumed(clustered):
    weak = VectorIndex("ivf", 16, {"nlist": 64, "nprobe": 1})
    weak.add(clustered)
    assert recall_at_k(weak, 5) < 0.99


def test_auto_and_bad_input(clustered):
    assert choose_kind(1000) == "exact" and choose_kind(10_000_000) == "hnsw" and choose_kind(5, "flat") == "flat"
    with pytest.raises(CeaError, match="unknown index 'annoy'"):
        choose_kind(5, "annoy")
    with pytest.raises(CeaError, match="needs at least 1024 vectors to train"):
        build_index(clustered[:100], "ivf")
    index, _ = build_index(clustered[:10], "exact")
    with pytest.raises(CeaError, match="dimensions"):
        index.add(np.ones((1, 3)))
