"""Sharded corpus embedding (two processes' shares, resume, refusal) and a FAISS index built from the shards."""

import json

import numpy as np
import pytest

from cea.encoders import load_encoder
from cea.encoders.corpus import embed_corpus, missing_shards, shard_path
from cea.errors import CeaError
from cea.knn.shards import build_index_from_shards, exact_topk, load_shard_index

WORDS = "the a my card lost money transfer city river dog cat red blue pay top up account".split()


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(0)
    return [" ".join(rng.choice(WORDS, size=rng.integers(2, 9))) + f" {i}" for i in range(230)]


@pytest.fixture(scope="module")
def model(tiny_st_dir):
    return load_encoder(tiny_st_dir)


def _all(folder, n_shards):
    return np.concatenate([np.load(shard_path(folder, i)) for i in range(n_shards)])


def test_two_processes_share_the_shards_and_a_rerun_resumes(tmp_path, corpus, model):
    first = embed_corpus(corpus, model, tmp_path, shard_size=50, rank=0, world=2, progress=False)
    assert first["written"] == [0, 2, 4] and missing_shards(tmp_path) == [1, 3]
    second = embed_corpus(corpus, model, tmp_path, shard_size=50, rank=1, world=2, progress=False)
    assert second["written"] == [1, 3] and missing_shards(tmp_path) == []
    expected = model.encode(corpus, convert_to_numpy=True)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(_all(tmp_path, 5), expected, atol=1e-5)
    assert np.load(shard_path(tmp_path, 4)).shape == (30, 32)  # the last shard holds the rest
    # a kill left shard 3 missing and shard 1 cut short: one process alone redoes exactly those
    shard_path(tmp_path, 3).unlink()
    shard_path(tmp_path, 1).write_bytes(shard_path(tmp_path, 1).read_bytes()[:200])
    again = embed_corpus(corpus, model, tmp_path, shard_size=50, progress=False)
    assert again["written"] == [1, 3] and again["skipped"] == [0, 2, 4]
    np.testing.assert_allclose(_all(tmp_path, 5), expected, atol=1e-5)


def test_another_model_or_corpus_is_refused(tmp_path, corpus, model, tiny_bert_dir):
    embed_corpus(corpus, model, tmp_path, shard_size=100, progress=False)
    with pytest.raises(CeaError, match="holds shards of another corpus fingerprint"):
        embed_corpus(corpus[:-1] + ["changed"], model, tmp_path, shard_size=100, progress=False)
    with pytest.raises(CeaError, match="holds shards of another shard size"):
        embed_corpus(corpus, model, tmp_path, shard_size=50, progress=False)
    with pytest.raises(CeaError, match="the corpus has no texts"):
        embed_corpus([], model, tmp_path / "empty", progress=False)


def test_exact_topk_streams_over_shards(tmp_path, corpus, model):
    embed_corpus(corpus, model, tmp_path, shard_size=40, progress=False)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    vectors = _all(tmp_path, 6)
    queries = vectors[[3, 77, 229]] + 0.01
    truth = np.argsort(-(queries @ vectors.T), axis=1, kind="stable")[:, :4]
    got = exact_topk(tmp_path, manifest, queries.astype(np.float32), 4)
    assert [set(r) for r in got.tolist()] == [set(r) for r in truth.tolist()]


@pytest.mark.parametrize("kind,params", [("flat", {}), ("hnsw", {"m": 8}), ("ivf", {"nlist": 8, "nprobe": 8})])
def test_index_from_shards_finds_each_vector_and_records_its_recall(tmp_path, corpus, model, kind, params):
    embed_corpus(corpus, model, tmp_path, shard_size=60, progress=False)
    info = build_index_from_shards(tmp_path, kind, params, queries=100, progress=False)
    index, stored = load_shard_index(tmp_path)
    assert stored == info and index.ntotal == 230 and info["n"] == 230
    vectors = _all(tmp_path, 4)
    _, found = index.search(vectors[:50], 1)
    sims = (vectors[:50] * vectors[found[:, 0]]).sum(1)
    assert np.all(sims > 0.9999)  # each vector (or an exact duplicate) is its own nearest neighbour
    if kind == "flat":
        assert info["recall_at_k"] == 1.0  # exact by construction: the measurement agrees
    assert 0.5 <= info["recall_at_k"] <= 1.0


def test_index_refuses_an_unfinished_corpus(tmp_path, corpus, model):
    embed_corpus(corpus, model, tmp_path, shard_size=50, rank=0, world=2, progress=False)
    with pytest.raises(CeaError, match="lacks 2 of 5 shards \\(first: 1\\); rerun cea embed"):
        build_index_from_shards(tmp_path, "flat", progress=False)
    with pytest.raises(CeaError, match="unknown index kind 'lsh'"):
        embed_corpus(corpus, model, tmp_path, shard_size=50, rank=1, world=2, progress=False)
        build_index_from_shards(tmp_path, "lsh", progress=False)
