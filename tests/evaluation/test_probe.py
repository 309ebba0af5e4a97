import numpy as np
import pytest
from sklearn.metrics import f1_score
from sklearn.neighbors import KNeighborsClassifier

from cea.data import load_file
from cea.encoders import encode_layers, load_encoder
from cea.errors import CeaError
from cea.evaluation import parse_layers, probe


def test_parse_layers():
    assert parse_layers("all", 6) == [0, 1, 2, 3, 4, 5, 6]
    assert parse_layers("last", 6) == [6]
    assert parse_layers("4,2,-1", 6) == [2, 4, 6]
    with pytest.raises(CeaError, match="outside the model's 0..6"):
        parse_layers("7", 6)
    with pytest.raises(CeaError, match="cannot read layers"):
        parse_layers("top", 6)


def _vote(labels):
    """Majority vote; a tie goes to the label of the nearest neighbour among the tied ones."""
    counts = {lab: labels.count(lab) for lab in labels}
    top = max(counts.values())
    return next(lab for lab in labels if counts[lab] == top)


def _expected(model, ds, layer, pooling, k):
    """The probe's numbers recomputed with scikit-learn on independently encoded embeddings."""
    refs = list(ds["train"]["text"]) + list(ds["dev"]["text"])
    ref_y = list(ds["train"]["label"]) + list(ds["dev"]["label"])
    X = encode_layers(model, refs, [layer], [pooling], progress=False)[(layer, pooling)]
    Q = encode_layers(model, list(ds["test"]["text"]), [layer], [pooling], progress=False)[(layer, pooling)]
    idx = KNeighborsClassifier(k, metric="cosine", algorithm="brute").fit(X, ref_y).kneighbors(Q, return_distance=False)
    pred = np.array([_vote([ref_y[i] for i in row]) for row in idx])
    gold = ds["test"]["label"].to_numpy()
    return 100 * np.mean(pred == gold), 100 * f1_score(gold, pred, average="macro")


def test_probe_rows_match_an_independent_computation(tiny_bert_dir, intents_csv):
    ds = load_file(intents_csv)
    result = probe(ds, models=[tiny_bert_dir], layers="all", poolings=("mean", "cls"), k=3, progress=False)
    assert [(r["layer"], r["pooling"]) for r in result.rows] == [
        (0, "mean"),
        (0, "cls"),
        (1, "mean"),
        (1, "cls"),
        (2, "mean"),
        (2, "cls"),
    ]
    model = load_encoder(tiny_bert_dir)
    for row in result.rows:
        if (row["layer"], row["pooling"]) == (0, "cls"):
            continue  # [CLS] before any block is one vector for every text: neighbour order is arbitrary
        acc, f1 = _expected(model, ds, row["layer"], row["pooling"], 3)
        assert row["accuracy"] == pytest.approx(acc, abs=0.01)
        assert row["macro_f1"] == pytest.approx(f1, abs=0.01)
    assert result.best() == max(result.rows, key=lambda r: r["accuracy"])
    meta = result.meta
    assert meta["n_references"] == len(ds["train"]) + len(ds["dev"]) and meta["k"] == 3
    assert meta["versions"]["torch"] and meta["model_fingerprints"][tiny_bert_dir]


def test_texts_cut_at_a_max_sequence_length_are_probed_as_an_encoder_cut_there(tiny_bert_dir, intents_csv):
    ds = load_file(intents_csv)
    cut = probe(
        ds,
        models=[tiny_bert_dir],
        layers="last",
        poolings=("mean",),
        k=3,
        progress=False,
        cache=False,
        max_seq_length=4,
    )
    model = load_encoder(tiny_bert_dir)
    own = model.max_seq_length
    model.max_seq_length = 4
    acc, f1 = _expected(model, ds, cut.rows[0]["layer"], "mean", 3)
    assert (cut.rows[0]["accuracy"], cut.rows[0]["macro_f1"]) == (
        pytest.approx(acc, abs=0.01),
        pytest.approx(f1, abs=0.01),
    )
    assert cut.meta["max_seq_length"] == {tiny_bert_dir: 4}
    longer = probe(
        ds,
        models=[tiny_bert_dir],
        layers="last",
        poolings=("mean",),
        k=3,
        progress=False,
        cache=False,
        max_seq_length=own + 100,
    )  # never above the encoder's own
    assert longer.meta["max_seq_length"] == {tiny_bert_dir: own}
    with pytest.raises(CeaError, match="max_seq_length must be at least 2 tokens"):
        probe(ds, models=[tiny_bert_dir], max_seq_length=1, progress=False)


def test_concatenation_and_leave_one_out(tiny_bert_dir, tmp_path, intents_csv):
    from tests.conftest import build_tiny_bert

    other = build_tiny_bert(tmp_path / "other", layers=3, seed=1)
    ds = load_file(intents_csv)
    result = probe(
        ds, models=[f"{tiny_bert_dir}+{other}"], layers="last", poolings=("mean",), k=3, mode="loo", progress=False
    )
    assert len(result.rows) == 1 and result.rows[0]["layer"] == "last"
    texts = [t for s in ("train", "dev", "test") for t in ds[s]["text"]]
    labels = np.array([y for s in ("train", "dev", "test") for y in ds[s]["label"]])
    parts = []
    for folder, layer in ((tiny_bert_dir, 2), (other, 3)):
        e = encode_layers(load_encoder(folder), texts, [layer], ["mean"], progress=False)[(layer, "mean")]
        parts.append(e / np.linalg.norm(e, axis=1, keepdims=True))
    X = np.hstack(parts)
    idx = KNeighborsClassifier(3, metric="cosine", algorithm="brute").fit(X, labels).kneighbors(return_distance=False)
    top = np.mean([(labels[row] == labels[i]).any() for i, row in enumerate(idx)])
    assert result.rows[0]["top_k_accuracy"] == pytest.approx(100 * top, abs=0.01)
    assert result.meta["n_queries"] == len(texts)


def test_probe_bad_input(tiny_bert_dir, intents_csv):
    ds = load_file(intents_csv)
    with pytest.raises(CeaError, match="larger than the"):
        probe(ds, models=[tiny_bert_dir], k=1000, progress=False)
    with pytest.raises(CeaError, match="unknown mode"):
        probe(ds, models=[tiny_bert_dir], mode="cv", progress=False)


def test_texts_with_several_labels_are_probed_by_micro_f1_of_the_majority_vote_per_label(
    tiny_bert_dir, topic_sets_jsonl
):
    from sklearn.neighbors import NearestNeighbors

    ds = load_file(topic_sets_jsonl)
    result = probe(ds, models=[tiny_bert_dir], layers="last", poolings=("mean",), k=3, progress=False)
    row = result.rows[0]
    assert result.metric == "micro_f1" and result.best() is row
    # independently: scikit-learn's neighbours, labels carried by 2 of 3 (or the most carried one), sklearn's F1
    model = load_encoder(tiny_bert_dir)
    refs = list(ds["train"]["text"]) + list(ds["dev"]["text"])
    ref_sets = list(ds["train"]["labels"]) + list(ds["dev"]["labels"])
    X = encode_layers(model, refs, [2], ["mean"], progress=False)[(2, "mean")]
    Q = encode_layers(model, list(ds["test"]["text"]), [2], ["mean"], progress=False)[(2, "mean")]
    idx = (
        NearestNeighbors(n_neighbors=3, metric="cosine", algorithm="brute").fit(X).kneighbors(Q, return_distance=False)
    )
    classes = ds.labels
    carried = np.array([[sum(c in ref_sets[i] for i in row) for c in classes] for row in idx])
    predicted = carried >= 2
    predicted[np.arange(len(carried)), carried.argmax(1)] = True
    gold = np.array([[c in labels for c in classes] for labels in ds["test"]["labels"]])
    assert row["micro_f1"] == pytest.approx(100 * f1_score(gold, predicted, average="micro"), abs=0.01)
    assert row["subset_accuracy"] == pytest.approx(100 * np.mean((gold == predicted).all(1)), abs=0.01)
    with pytest.raises(CeaError, match="--mode loo takes texts with one label each"):
        probe(ds, models=[tiny_bert_dir], mode="loo", progress=False)
