"""Encoding in the passes that cost least: the cuts are the cheapest for the cost model, and the embeddings equal one
pass's."""

import itertools

import numpy as np
import pytest

from cea.encoders import load_encoder
from cea.encoders.embeddings import encode, least_cost_passes, token_lengths, token_passes


def _cost(passes, lengths, overhead):
    return sum(overhead + len(p) * max(lengths[i] for i in p) for p in passes)


@pytest.mark.parametrize("overhead", [0.0, 5.0, 50.0])
def test_the_passes_cost_least_among_every_cut_of_the_sorted_texts(overhead):
    lengths = [12, 3, 40, 5, 11, 9, 70, 4]
    passes = least_cost_passes(lengths, overhead, most=8)
    assert sorted(np.concatenate(passes).tolist()) == list(range(8))  # each text once
    order = np.argsort(lengths, kind="stable")
    best = min(
        _cost([order[a:b] for a, b in zip((0,) + cuts, cuts + (8,))], lengths, overhead)
        for r in range(8)
        for cuts in itertools.combinations(range(1, 8), r)
    )
    assert _cost(passes, lengths, overhead) == pytest.approx(best)


def test_the_overhead_sets_how_texts_are_grouped():
    lengths = [10, 10, 11, 12, 60, 61]
    assert [sorted(p.tolist()) for p in least_cost_passes(lengths, 0.0, most=6)] == [[0, 1], [2], [3], [4], [5]]
    assert [sorted(p.tolist()) for p in least_cost_passes(lengths, 30.0, most=6)] == [[0, 1, 2, 3], [4, 5]]
    assert [sorted(p.tolist()) for p in least_cost_passes(lengths, 1e6, most=6)] == [[0, 1, 2, 3, 4, 5]]
    assert [len(p) for p in least_cost_passes([5] * 10, 1e6, most=4)] == [2, 4, 4]  # never more than most


def test_encoding_in_passes_gives_one_pass_embeddings_in_input_order(tiny_st_dir):
    model = load_encoder(tiny_st_dir)
    texts = [
        "a short one",
        "a much longer text with many more words in it than the others",
        "mid length text",
        "x",
        "another fairly long sentence about nothing at all",
    ]
    assert token_lengths(model, texts)[3] < token_lengths(model, texts)[1]
    np.testing.assert_allclose(encode(model, texts, overhead=0.0), encode(model, texts), atol=1e-5)


def test_token_passes_hold_fewer_long_texts_and_never_more_than_the_budget():
    lengths = [10, 200, 12, 180, 9, 500, 11]
    passes = token_passes(lengths, tokens=400, most=64)
    assert sorted(np.concatenate(passes).tolist()) == list(range(7))  # each text once
    assert [p.tolist() for p in passes] == [[5], [1, 3], [2, 6, 0, 4]]  # longest first; 500 alone, over the budget
    assert all(len(p) * max(lengths[i] for i in p) <= 400 for p in passes[1:])
    assert [len(p) for p in token_passes([5] * 10, tokens=400, most=4)] == [4, 4, 2]  # and never more than most


def test_least_cost_passes_keep_to_the_token_budget():
    lengths = [10, 10, 11, 12, 60, 61]
    assert [sorted(p.tolist()) for p in least_cost_passes(lengths, 1e6, most=6, tokens=100)] == [
        [0, 1, 2, 3],  # 4 x 12 tokens; with the 60s: 6 x 61, over 100
        [4],
        [5],
    ]
    assert [len(p) for p in least_cost_passes([300, 5], 1e6, most=6, tokens=100)] == [1, 1]  # a long text alone


def test_every_pass_of_the_encoder_keeps_to_its_token_budget(tiny_st_dir, monkeypatch):
    """PyTorch: the texts cut by tokens before sentence-transformers' encode, which would cut 64 texts whatever their
    lengths; the embeddings are the same."""
    model = load_encoder(tiny_st_dir)
    texts = ["word " * n for n in (3, 100, 5, 90, 4, 120, 6)]
    lengths = token_lengths(model, texts)
    whole = model.encode(texts, convert_to_numpy=True)
    seen, own = [], model.encode

    def spy(batch, **kw):
        seen.append(len(batch) * max(token_lengths(model, batch)))
        return own(batch, **kw)

    monkeypatch.setattr(model, "encode", spy)
    got = encode(model, texts, tokens=250)
    assert len(seen) > 1 and max(seen) <= max(250, max(lengths))
    np.testing.assert_allclose(got, whole, atol=1e-5)
