"""Every registered index kind: add, remove, search (exact or measured recall), leave-one-out, save and load."""

import numpy as np
import pytest

from cea.errors import CeaError
from cea.knn import normalize
from cea.knn.index import INDEXES, INT8_FROM, TAIL_MIN, build_index, choose_kind, load_index, recall_at_k

PARAMS = {"hnsw": {"ef_search": 128}, "ivf": {"nlist": 16, "nprobe": 16}}  # nprobe = nlist: IVF exhaustive


@pytest.fixture(scope="module")
def clustered():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(20, 16))
    return normalize(centres[rng.integers(0, 20, 2000)] + 0.3 * rng.normal(size=(2000, 16)))


def _truth(refs, queries, k, alive=None, exclude_self=False):
    scores = queries @ refs.T
    if alive is not None:
        scores[:, ~alive] = -np.inf
    if exclude_self:
        np.fill_diagonal(scores, -np.inf)
    rows = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, rows, 1), rows


def _check(kind, got, truth):
    (sims, rows), (true_sims, true_rows) = got, truth
    if INDEXES[kind].approximate:
        overlap = np.mean([len(set(a) & set(b)) / rows.shape[1] for a, b in zip(rows.tolist(), true_rows.tolist())])
        assert overlap >= 0.95
    else:
        np.testing.assert_array_equal(rows, true_rows)
        np.testing.assert_allclose(sims, true_sims, atol=1e-5)


@pytest.mark.parametrize("kind", list(INDEXES))
def test_search_finds_the_exact_neighbours_and_survives_save_and_load(clustered, kind, tmp_path):
    refs, queries = clustered[:1500], clustered[1500:]
    index, info = build_index(refs, kind, PARAMS.get(kind), k=5)
    assert info["kind"] == kind and info["n"] == 1500 == len(index)
    got = index.search(queries, 5)
    _check(kind, got, _truth(refs, queries, 5))
    if INDEXES[kind].approximate:
        assert 0.95 <= info["recall_at_k"] <= 1.0 and info["recall_at_k"] == round(recall_at_k(index, 5), 4)
    else:
        assert info["recall_at_k"] is None
    index.save(tmp_path)
    loaded = load_index(tmp_path, info)
    np.testing.assert_array_equal(loaded.search(queries, 5)[1], got[1])
    loaded.add(queries[:10])
    assert len(loaded) == 1510 and loaded.search(queries[5:6], 1)[1][0, 0] == 1505


@pytest.mark.parametrize("kind", list(INDEXES))
def test_removed_rows_are_never_returned(clustered, kind, tmp_path):
    refs, queries = clustered[:1500], clustered[1500:1700]
    index, info = build_index(refs, kind, PARAMS.get(kind))
    gone = np.unique(index.search(queries, 3)[1][:, :2])  # the two nearest of every query
    index.remove(gone)
    alive = np.ones(1500, dtype=bool)
    alive[gone] = False
    assert len(index) == alive.sum()
    got = index.search(queries, 5)
    assert not np.isin(got[1], gone).any()
    _check(kind, got, _truth(refs, queries, 5, alive))
    index.save(tmp_path)  # tombstones are saved
    np.testing.assert_array_equal(load_index(tmp_path, info).search(queries, 5)[1], got[1])
    index.remove(np.arange(1497))  # at most 3 left: the rest of the k is -1
    left = [r for r in (1497, 1498, 1499) if alive[r]]
    sims, rows = index.search(queries[:2], 5)
    found = sorted(rows[0][rows[0] >= 0].tolist())
    assert found == left if not INDEXES[kind].approximate else set(found) <= set(left)  # a graph may miss some
    assert (rows[:, len(left) :] == -1).all() and np.isinf(sims[:, len(left) :]).all()


@pytest.mark.parametrize("kind", list(INDEXES))
def test_leave_one_out_leaves_each_query_out(clustered, kind):
    refs = clustered[:800]
    index, _ = build_index(refs, kind, PARAMS.get(kind))
    got = index.search(refs, 4, exclude_self=True)
    assert not (got[1] == np.arange(800)[:, None]).any()
    _check(kind, got, _truth(refs, refs, 4, exclude_self=True))


def test_cosines_by_hand():
    refs = normalize([[1, 0], [0, 1], [1, 1], [-1, 0]])
    for kind in INDEXES:
        index, _ = build_index(refs, kind, {"nlist": 1} if kind == "ivf" else None)
        sims, rows = index.search(normalize([[1, 0.0]]), 3)
        assert rows.tolist() == [[0, 2, 1]], kind
        np.testing.assert_allclose(sims, [[1.0, np.sqrt(0.5), 0.0]], atol=1e-2 if INDEXES[kind].approximate else 1e-6)


def test_recall_of_a_weak_index_is_measured_not_assumed(clustered):
    weak, info = build_index(clustered, "ivf", {"nlist": 64, "nprobe": 1})
    assert info["recall_at_k"] < 0.99 and info["params"] == {"nlist": 64, "nprobe": 1}
    _, default = build_index(clustered, "ivf")
    assert default["params"]["nlist"] == int(4 * np.sqrt(2000))  # 4 x sqrt(n) lists unless given


def test_auto_and_bad_input(clustered):
    assert choose_kind(1000) == "exact" and choose_kind(10_000_000) == "hnsw" and choose_kind(5, "flat") == "flat"
    assert choose_kind(INT8_FROM) == "int8" and choose_kind(INT8_FROM - 1) == "exact"
    with pytest.raises(CeaError, match="unknown index kind 'annoy'; use auto or one of exact, int8, flat"):
        choose_kind(5, "annoy")
    with pytest.raises(CeaError, match="needs at least 1024 vectors to train; got 100: lower nlist"):
        build_index(clustered[:100], "ivf", {"nlist": 1024})
    index, _ = build_index(clustered[:10], "exact")
    with pytest.raises(
        CeaError, match=r"shape \(1, 3\) but the index holds vectors of 16 dimensions; pass an \(n, 16\) array"
    ):
        index.add(np.ones((1, 3)))
    with pytest.raises(CeaError, match="not unit length; normalise them first"):
        index.search(2 * clustered[:1], 1)
    with pytest.raises(CeaError, match="exclude_self needs the 10 indexed vectors as queries; got 1"):
        index.search(clustered[:1], 1, exclude_self=True)


@pytest.mark.parametrize("vnni, levels", [(True, 127), (False, 63)])
def test_int8_codes_stay_where_the_cpus_integer_products_cannot_saturate(clustered, monkeypatch, vnni, levels):
    from cea.knn import search

    monkeypatch.setattr(search, "has_vnni", lambda: vnni)
    refs, queries = clustered[:1500], clustered[1500:]
    index, _ = build_index(refs, "int8", k=5)
    assert int(np.abs(index.codes.astype(np.int32)).max()) == levels
    if levels == 63:  # exact on any CPU (full-range codes are exact only where the CPU has VNNI)
        _check("int8", index.search(queries, 5), _truth(refs, queries, 5))


def test_cpu_flags_name_vnni_from_cpuinfo(monkeypatch, tmp_path):
    import builtins

    from cea import hardware

    cpuinfo, opened = tmp_path / "cpuinfo", builtins.open
    monkeypatch.setattr(
        builtins, "open", lambda path, *a, **k: opened(cpuinfo if path == "/proc/cpuinfo" else path, *a, **k)
    )
    cpuinfo.write_text("processor: 0\nflags\t\t: fpu sse avx2\n")
    assert hardware.cpu_flags() == {"fpu", "sse", "avx2"} and not hardware.has_vnni()
    cpuinfo.write_text("processor: 0\nflags\t\t: fpu avx2 avx_vnni\n")
    assert hardware.has_vnni()


def test_int8_rows_added_wait_in_an_exact_tail_until_it_is_worth_quantising_them(clustered):
    refs, more, queries = clustered[:1000], clustered[1000:1900], clustered[1900:]
    index, _ = build_index(refs, "int8")
    index.add(more[:TAIL_MIN])  # the tail: not coded yet, searched in fp32
    assert index.n == 1000 and len(index) == 1000 + TAIL_MIN
    seen = np.concatenate([refs, more[:TAIL_MIN]])
    _check("int8", index.search(queries, 5), _truth(seen, queries, 5))
    _check("int8", index.search(more[:3], 1), _truth(seen, more[:3], 1))  # an added row is its own nearest
    assert index.search(more[:3], 1)[1][:, 0].tolist() == [1000, 1001, 1002]
    index.add(more[TAIL_MIN:])  # past TAIL_MIN: every row coded anew
    assert index.n == 1900
    _check("int8", index.search(queries, 5), _truth(clustered[:1900], queries, 5))
    index.add(more[:1])  # a duplicate row in the tail: ties keep the lower row first, as exact search does
    _check("int8", index.search(queries, 7), _truth(np.concatenate([clustered[:1900], more[:1]]), queries, 7))


def test_int8_tries_more_candidates_before_fp32_where_cosines_crowd_together(monkeypatch):
    from cea.knn import search

    rng = np.random.default_rng(1)  # one direction plus a little noise: every cosine near 1, as a static encoder's
    crowded = normalize(np.ones(64) + 0.2 * rng.normal(size=(3000, 64)))
    refs, queries = crowded[:2800], crowded[2800:]
    index, _ = build_index(refs, "int8", k=10)
    with monkeypatch.context() as once:
        once.setattr(search, "WIDER", len(refs))  # no wider pass: the first one certifies no query here
        assert search.search_int8(index, queries, 10)[2] == len(queries)
    monkeypatch.setattr(search, "search_torch", lambda *a, **kw: pytest.fail("searched again in fp32"))
    scored, scores = [], index.scores
    monkeypatch.setattr(index, "scores", lambda codes: scored.append(len(codes)) or scores(codes))
    sims, rows, fallback = search.search_int8(index, queries, 10)
    assert scored == [len(queries)]  # the wider tries read the integer scores of the one pass
    true_sims = _truth(refs, queries, 10)[0]  # the exact k best (rows of equal cosines in either order)
    np.testing.assert_allclose(np.take_along_axis(queries @ refs.T, rows, 1), true_sims, atol=1e-6)
    np.testing.assert_allclose(sims, true_sims, atol=1e-5)
    assert fallback == 0
