"""Corpus embedding into Parquet parts (resume, refusal, Ray actors) and a FAISS index built from the parts."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from cea.batch.corpus import embed_corpus, missing_parts, part_path, read_vectors
from cea.batch.indexing import build_index_from_parts, exact_topk
from cea.encoders import load_encoder
from cea.errors import CeaError

WORDS = "the a my card lost money transfer city river dog cat red blue pay top up account".split()


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(0)
    return [" ".join(rng.choice(WORDS, size=rng.integers(2, 9))) + f" {i}" for i in range(230)]


@pytest.fixture(scope="module")
def model(tiny_st_dir):
    return load_encoder(tiny_st_dir)


@pytest.fixture(scope="module")
def expected(corpus, model):
    x = model.encode(corpus, convert_to_numpy=True)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _all(folder):
    n = len(json.loads((folder / "manifest.json").read_text())["parts"])
    return np.concatenate([read_vectors(part_path(folder, i), 32) for i in range(n)])


def test_parts_hold_each_texts_unit_embedding_and_a_rerun_writes_only_the_missing(tmp_path, corpus, model, expected):
    first = embed_corpus(corpus, model, tmp_path, part_rows=50)
    assert sorted(d["part"] for d in first["written"]) == list(range(5)) and first["skipped"] == 0
    np.testing.assert_allclose(_all(tmp_path), expected, atol=1e-5)
    last = pd.read_parquet(part_path(tmp_path, 4))
    assert last["row"].tolist() == list(range(200, 230)) and len(last["embedding"][0]) == 32  # the last: the rest
    # a kill left part 3 missing and part 1 cut short: a rerun redoes exactly those
    part_path(tmp_path, 3).unlink()
    part_path(tmp_path, 1).write_bytes(part_path(tmp_path, 1).read_bytes()[:200])
    assert missing_parts(tmp_path) == [1, 3]
    again = embed_corpus(corpus, model, tmp_path, part_rows=50)
    assert sorted(d["part"] for d in again["written"]) == [1, 3] and again["skipped"] == 3
    np.testing.assert_allclose(_all(tmp_path), expected, atol=1e-5)


def test_a_file_with_ids_keeps_them_beside_the_embeddings(tmp_path, corpus, model, expected):
    pd.DataFrame({"id": [f"t{i}" for i in range(230)], "body": corpus}).to_parquet(tmp_path / "in.parquet")
    embed_corpus(str(tmp_path / "in.parquet"), model, tmp_path / "emb", part_rows=100, text_column="body")
    got = pd.concat([pd.read_parquet(part_path(tmp_path / "emb", i)) for i in range(3)])
    assert got.columns.tolist() == ["id", "embedding"] and got["id"].tolist() == [f"t{i}" for i in range(230)]
    np.testing.assert_allclose(_all(tmp_path / "emb"), expected, atol=1e-5)


def test_another_model_or_corpus_is_refused(tmp_path, corpus, model):
    embed_corpus(corpus, model, tmp_path, part_rows=100)
    with pytest.raises(CeaError, match="holds parts of another corpus fingerprint"):
        embed_corpus(corpus[:-1] + ["changed"], model, tmp_path, part_rows=100)
    with pytest.raises(CeaError, match="holds parts of another part rows"):
        embed_corpus(corpus, model, tmp_path, part_rows=50)
    with pytest.raises(CeaError, match="the corpus has no texts"):
        embed_corpus([], model, tmp_path / "empty")


def test_ray_actors_write_the_same_parts(tmp_path, corpus, tiny_st_dir, expected):
    pytest.importorskip("ray", reason="pip install 'cea[ray]'")
    (tmp_path / "corpus.txt").write_text("\n".join(corpus) + "\n")
    done = embed_corpus(
        str(tmp_path / "corpus.txt"), tiny_st_dir, tmp_path / "emb", part_rows=40, engine="ray", actors=2
    )
    assert sorted(d["part"] for d in done["written"]) == list(range(6)) and done["rows"] == 230
    np.testing.assert_allclose(_all(tmp_path / "emb"), expected, atol=1e-5)


def test_exact_topk_streams_over_parts(tmp_path, corpus, model):
    embed_corpus(corpus, model, tmp_path, part_rows=40)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    vectors = _all(tmp_path)
    queries = vectors[[3, 77, 229]] + 0.01
    truth = np.argsort(-(queries @ vectors.T), axis=1, kind="stable")[:, :4]
    got = exact_topk(tmp_path, manifest, queries.astype(np.float32), 4)
    assert [set(r) for r in got.tolist()] == [set(r) for r in truth.tolist()]


@pytest.mark.parametrize("kind,params", [("flat", {}), ("hnsw", {"m": 8}), ("ivf", {"nlist": 8, "nprobe": 8})])
def test_index_from_parts_finds_each_vector_and_records_its_recall(tmp_path, corpus, model, kind, params):
    embed_corpus(corpus, model, tmp_path, part_rows=60)
    info = build_index_from_parts(tmp_path, kind, params, queries=100, progress=False)
    import faiss

    index, stored = faiss.read_index(str(tmp_path / "index.faiss")), json.loads((tmp_path / "index.json").read_text())
    assert stored == info and index.ntotal == 230 and info["n"] == 230
    vectors = _all(tmp_path)
    _, found = index.search(vectors[:50], 1)
    sims = (vectors[:50] * vectors[found[:, 0]]).sum(1)
    assert np.all(sims > 0.9999)  # each vector (or an exact duplicate) is its own nearest neighbour
    if kind == "flat":
        assert info["recall_at_k"] == 1.0  # exact by construction: the measurement agrees
    assert 0.5 <= info["recall_at_k"] <= 1.0


def test_index_refuses_an_unfinished_corpus(tmp_path, corpus, model):
    embed_corpus(corpus, model, tmp_path, part_rows=50)
    part_path(tmp_path, 1).unlink()
    part_path(tmp_path, 3).unlink()
    with pytest.raises(CeaError, match="lacks 2 of 5 parts \\(first: 1\\); rerun cea embed"):
        build_index_from_parts(tmp_path, "flat", progress=False)
    embed_corpus(corpus, model, tmp_path, part_rows=50)
    with pytest.raises(CeaError, match="unknown index kind 'lsh'"):
        build_index_from_parts(tmp_path, "lsh", progress=False)


def test_the_cli_embeds_a_glob_and_indexes_it(tmp_path, corpus, tiny_st_dir):
    for i in range(2):
        (tmp_path / f"c{i}.txt").write_text("\n".join(corpus[i * 115 : (i + 1) * 115]) + "\n")
    cea = [sys.executable, "-m", "cea"]
    done = subprocess.run(
        cea
        + ["embed", str(tmp_path / "c*.txt"), "--model", tiny_st_dir, "-o", str(tmp_path / "e"), "--part-rows", "100"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    said = " ".join(done.stderr.split())  # rich wraps its lines at the console's width (a long path moves them)
    assert "4 parts written, 0 already there" in said and "all 4 parts of 230 texts" in said
    built = subprocess.run(
        cea + ["index", str(tmp_path / "e"), "--kind", "flat"], capture_output=True, text=True, timeout=300
    )
    said = " ".join(built.stderr.split())
    assert built.returncode == 0 and "flat over 230 vectors" in said and "recall@5 1.000" in said
