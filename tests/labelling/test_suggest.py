"""cea.labelling.suggest: the least sure texts first, one from each tight group, on a toy space."""

import numpy as np
import pytest

from cea.bundle.answers import Prediction
from cea.errors import CeaError
from cea.knn.decision import Classifier, nearest
from cea.labelling.suggest import DENSE_K, DENSITY, spread, suggest, weighted


class ToyBundle:
    """The bundle's face that suggest reads: embed, predict_encoded, head, multi_label."""

    multi_label = False

    def __init__(self, references, labels, space, unknown=()):
        self.references, self.labels, self.space, self.unknown = references, np.asarray(labels), space, set(unknown)

    @property
    def label_counts(self):
        return dict(zip(*np.unique(self.labels, return_counts=True)))

    def embed(self, texts):
        return np.stack([self.space[t] for t in texts])

    def head(self):
        return Classifier().fit(self.references, self.labels)

    def predict_encoded(self, texts, vectors):
        _, rows = nearest(self.references, vectors, 5)
        decision = Classifier().answer(self.references, self.labels, vectors)
        return [
            Prediction(
                "unknown" if t in self.unknown else str(label),
                float(score),
                [{"label": str(self.labels[r])} for r in row],
            )
            for t, label, score, row in zip(texts, decision.labels, decision.scores, rows)
        ]


def _toy(seed=0):
    rng = np.random.default_rng(seed)
    refs = np.vstack([[1, 0, 0] + 0.05 * rng.normal(size=(10, 3)), [0, 1, 0] + 0.05 * rng.normal(size=(10, 3))])
    labels = ["a"] * 10 + ["b"] * 10
    space = {f"clear a {i}": np.array([1, 0.05 * i, 0]) for i in range(4)}
    space |= {f"clear b {i}": np.array([0.05 * i, 1, 0]) for i in range(4)}
    space |= {f"between up {i}": np.array([0.7, 0.7, 0.4 + 0.001 * i]) for i in range(5)}  # one tight group
    space |= {f"between down {i}": np.array([0.7, 0.7, -0.4 - 0.001 * i]) for i in range(3)}  # another
    return ToyBundle(refs, labels, space), list(space)


def test_the_least_sure_come_first_one_from_each_tight_group(monkeypatch):
    from cea.labelling import suggest as module

    monkeypatch.setattr(module, "POOL", 4)  # the pool: the 8 texts between the classes (16 texts in all here)
    bundle, texts = _toy()
    got = suggest(bundle, texts, 2)
    assert sorted(t.split()[1] for t in got["text"]) == ["down", "up"]  # not two of the tight group of five
    assert got["score"].is_monotonic_decreasing and (got["score"] > 0.8).all()
    assert set(got["prediction"]) <= {"a", "b"} and set(got["runner_up"]) <= {"a", "b"}
    assert suggest(bundle, texts, 1)["text"].iloc[0].startswith("between")
    everything = suggest(bundle, texts, 100)  # no more than there are: all, the least sure first
    assert sorted(everything["text"]) == sorted(texts)
    assert [t.split()[0] for t in everything["text"]] == ["between"] * 8 + ["clear"] * 8


def test_a_text_answered_unknown_is_ranked_up_and_says_why():
    bundle, texts = _toy()
    bundle.unknown = {"clear a 3"}
    got = suggest(bundle, texts, 20)
    row = got[got["text"] == "clear a 3"].iloc[0]
    assert "answered unknown" in row["reason"] and row["score"] > got[got["text"] == "clear a 2"]["score"].iloc[0]


@pytest.mark.filterwarnings("ignore:Number of distinct clusters")
def test_spread_takes_the_centre_of_each_group_and_fills_up_after_duplicates():
    vectors = np.array([[1.0, 0], [1.0, 0], [1.0, 0], [0, 1.0]])
    assert spread(vectors, np.array([0.9, 0.8, 0.7, 0.1]), 2).tolist() == [0, 3]  # of equals, the best-ranked
    line = np.array([[1.0, 0.2], [1.0, 0], [1.0, -0.2], [0, 1.0]])
    assert spread(line, np.array([0.9, 0.5, 0.4, 0.8]), 2).tolist() == [3, 1]  # the middle of the line, not its end
    assert spread(line, np.array([0.9, 0.5, 0.4, 0.8]), 2, centre=False).tolist() == [0, 3]  # past the cold start
    assert spread(np.ones((6, 2)), np.arange(6.0), 2).tolist() == [5, 4]  # one group only: the next best


@pytest.mark.parametrize("clear, chosen", [(2, "line 1"), (12, "line 0")])
def test_a_group_gives_its_centre_unless_the_bundle_is_sure_of_the_candidates(monkeypatch, clear, chosen):
    from cea.labelling import suggest as module

    monkeypatch.setattr(module, "POOL", 3)  # the pool: the line of three texts, one group
    bundle, _ = _toy()  # 10 examples a class: the cold start
    bundle.space = {f"line {i}": np.array([0.72 + 0.03 * i, 0.68 - 0.03 * i, 0.3]) for i in range(3)}  # 0: least sure
    bundle.space |= {f"clear {i}": np.array([1, 0.01 * i, 0] if i % 2 else [0.01 * i, 1, 0]) for i in range(clear)}
    margins = np.diff(np.sort(bundle.head().predict_proba(bundle.embed(list(bundle.space))), 1)[:, -2:], axis=1)
    assert (margins.mean() >= module.SURE) == (clear == 12)
    assert suggest(bundle, list(bundle.space), 1)["text"].iloc[0] == chosen  # the line's middle, or its least sure


@pytest.mark.parametrize("texts, n, message", [([], 3, "no texts"), (["x"], 0, "n must be at least 1")])
def test_bad_input_is_refused(texts, n, message):
    bundle, _ = _toy()
    with pytest.raises(CeaError, match=message):
        suggest(bundle, texts, n)


def test_a_text_amid_others_like_it_beats_a_lone_one_a_little_less_sure(monkeypatch):
    from cea.labelling import suggest as module

    monkeypatch.setattr(module, "DISAGREE", 0.0)  # the margin and the density alone
    bundle, _ = _toy()
    bundle.space = {f"crowd {i}": np.array([0.74, 0.66, 0.2 + 0.01 * i]) for i in range(8)}
    bundle.space["alone"] = np.array([0.7, 0.7, -1.5])  # less sure (a smaller margin) but far from every other text
    texts = list(bundle.space)
    got = suggest(bundle, texts, len(texts))
    assert got["text"].iloc[0].startswith("crowd") and got["text"].iloc[-1] == "alone"
    assert "density" in got["reason"].iloc[0]
    monkeypatch.setattr(module, "COLD", 9)  # 10 examples a class: past the cold start
    assert suggest(bundle, texts, len(texts))["text"].iloc[0] == "alone"  # the margin alone ranks


def test_the_density_weighted_best_are_those_of_the_full_search():
    rng = np.random.default_rng(0)
    vectors = np.vstack([rng.normal(size=(300, 8)), rng.normal(size=(30, 8)) * 0.1 + 3])  # a dense corner
    score = rng.random(len(vectors))
    full = score * nearest(vectors, None, DENSE_K)[0].mean(1).clip(1e-3) ** DENSITY
    for need in (1, 5, 40, 400):
        got, density = weighted(score, vectors, need)
        best = np.argsort(-full)[: min(need, len(full))]
        assert np.allclose(got[best], full[best]) and set(np.argsort(-got)[: len(best)]) == set(best)
        assert need * 4 >= len(vectors) or np.isnan(density).any()  # not every text searched
