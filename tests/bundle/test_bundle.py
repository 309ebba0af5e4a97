"""Bundles: create, predict, grow (new classes too), shrink, relabel, survive a crash; refuse damage."""

import json
import time

import numpy as np
import pytest

from cea.bundle import Bundle
from cea.errors import CeaError
from cea.knn.decision import Classifier


def test_predict_and_a_new_class_without_retraining(made, tmp_path):
    first = made.predict(["my card is lost a"])[0]
    assert first.label == "card" and first.neighbours[0]["text"] == "my card is lost a"
    assert first.neighbours[0]["cosine"] == pytest.approx(1.0, abs=1e-5)
    ids = made.add(["red dog and blue cat", "blue cat and red dog"], ["animals", "animals"])
    assert ids == [24, 25] and made.label_counts["animals"] == 2
    assert made.predict(["red dog and blue cat"])[0].label == "animals"
    again = Bundle.load(made.root)  # the log replays: the addition is durable
    assert again.predict(["red dog and blue cat"])[0].label == "animals" and len(again.ids) == 26


def test_label_names_become_examples_where_they_are_words(tmp_path, tiny_st_dir, intents):
    texts, labels = list(intents["text"]), list(intents["label"])
    named = Bundle.create(
        tmp_path / "n",
        tiny_st_dir,
        texts,
        labels,
        classifier=Classifier("knn", k=1),
        progress=False,
        label_names="auto",
    )
    assert len(named.ids) == 27 and sorted(named.texts[24:]) == ["card", "geo", "transfer"]
    answer = named.predict(["geo"])[0]
    assert answer.label == "geo" and answer.neighbours[0]["text"] == "geo"
    assert answer.neighbours[0]["cosine"] == pytest.approx(1.0, abs=1e-5)
    assert named.sources[:24] == [None] * 24  # the names are marked as such: never taken for annotations
    assert sorted(named.sources[24:]) == ["label-name:card", "label-name:geo", "label-name:transfer"]
    plain = Bundle.create(tmp_path / "p", tiny_st_dir, texts, labels, classifier=Classifier("knn", k=1), progress=False)
    assert len(plain.ids) == 24  # the library's default: exactly the examples given


def test_an_empty_bundle_takes_its_labels_by_their_names(tmp_path, tiny_st_dir):
    """A labelling project's start: no examples, then each label's name (and a hint) as its first examples, marked
    as names; a label held already, or given no text, is left alone."""
    empty = Bundle.create(
        tmp_path / "e", tiny_st_dir, [], [], classifier=Classifier("knn", k=1), progress=False, label_names="auto"
    )
    assert len(empty) == 0 and empty.label_counts == {} and empty.manifest["label_names"] == "on"
    assert empty.embeddings.shape == (0, 32) and Bundle.load(empty.root).version == "0.0"
    with pytest.raises(CeaError, match="holds no examples"):
        empty.predict(["my card is lost"])
    given = {"lost_card": ["lost card", "I lost my card", "lost card"], "transfer": ["transfer"], "geo": [" "]}
    assert empty.name_labels(given) == ["lost_card", "transfer"]
    assert empty.label_counts == {"lost_card": 2, "transfer": 1} and empty.texts == [
        "lost card",
        "I lost my card",
        "transfer",
    ]
    assert empty.sources == ["label-name:lost_card"] * 2 + ["label-name:transfer"]
    assert empty.name_labels({"transfer": ["send money"]}) == [] and len(empty) == 3  # held already
    assert empty.predict(["I lost my card"])[0].label == "lost_card"
    assert empty.set_examples("label-studio:1:1", ["wire it to my sister"], ["transfer"]) == [3]
    assert empty.add(["where am i"], ["geo"]) == [4]  # a label of a word added later: its name comes with it
    again = Bundle.load(empty.root)  # the log replays the names and their marks
    assert (
        again.sources
        == empty.sources
        == ["label-name:lost_card"] * 2 + ["label-name:transfer", "label-studio:1:1", None, "label-name:geo"]
    )
    assert again.label_counts == {"geo": 2, "lost_card": 2, "transfer": 2}


def test_names_alone_answer_by_the_nearest_name_centred_on_the_texts_asked_about(tmp_path, tiny_st_dir, intents):
    """Before any annotation the nearest name answers, centred on the mean of every text asked about once there are
    MIN_ASKED of them; the first annotation hands the answers back to the classifier."""
    from cea.knn.names import MIN_ASKED, nearest_names

    bundle = Bundle.create(tmp_path / "n", tiny_st_dir, [], [], progress=False, label_names="auto")
    bundle.name_labels({"card": ["card", "my card"], "transfer": ["transfer"], "geo": ["where"]})
    assert bundle.names_only
    names, labels = bundle.embeddings, np.array(bundle.labels)
    texts = list(intents["text"])
    first = bundle.predict(texts[:3], k=2)  # too few asked about yet: not centred
    assert [p.label for p in first] == nearest_names(names, labels, bundle.embed(texts[:3]), None)[0].tolist()
    assert bundle.asked.count == 3 and bundle.asked.centre is None
    asked = [texts[i % len(texts)] for i in range(3, 3 + MIN_ASKED)]
    found = bundle.predict(asked, k=2)
    centre = bundle.embed(texts[:3] + asked).mean(0)
    chosen, scores, cosines, rows = nearest_names(names, labels, bundle.embed(asked), centre, k=2)
    assert [p.label for p in found] == chosen.tolist()
    np.testing.assert_allclose([p.score for p in found], scores, atol=1e-5)
    np.testing.assert_allclose([[n["cosine"] for n in p.neighbours] for p in found], cosines, atol=1e-5)
    assert [[n["id"] for n in p.neighbours] for p in found] == bundle.ids[rows].tolist()
    bundle.set_examples("label-studio:1:1", [texts[0]], ["card"])  # an annotation: the classifier answers
    assert not bundle.names_only
    raw = bundle.embed(asked[:1]) @ bundle.embeddings.T
    assert bundle.predict(asked[:1], k=1)[0].neighbours[0]["cosine"] == pytest.approx(float(raw.max()), abs=1e-5)


def test_a_label_added_later_gets_its_name_as_a_bundle_built_with_it(tmp_path, tiny_st_dir, intents):
    texts, labels = list(intents["text"]), list(intents["label"])
    first = [i for i, label in enumerate(labels) if label != "geo"]
    grown = Bundle.create(
        tmp_path / "g",
        tiny_st_dir,
        [texts[i] for i in first],
        [labels[i] for i in first],
        classifier=Classifier("knn", k=1),
        progress=False,
        label_names="auto",
    )
    assert grown.manifest["label_names"] == "on" and len(grown.ids) == 16 + 2
    later = [i for i, label in enumerate(labels) if label == "geo"]
    assert grown.add([texts[i] for i in later], ["geo"] * 8) == list(range(18, 26))  # the name's id is not returned
    assert grown.add(["my card is lost again"], ["card"]) == [27]  # a known label: no name again
    assert grown.get(26) == {"id": 26, "label": "geo", "text": "geo"}
    built = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        texts + ["my card is lost again"],
        labels + ["card"],
        classifier=Classifier("knn", k=1),
        progress=False,
        label_names="auto",
    )
    assert sorted(zip(grown.texts, grown.labels)) == sorted(zip(built.texts, built.labels))
    assert sorted(Bundle.load(grown.root).texts) == sorted(built.texts)  # the log replays the name too
    assert grown.set_examples("label-studio:1:1", ["how is the weather today"], ["weather_query"]) == [28]
    assert grown.get(29)["text"] == "weather query"  # an annotation's new label gets its name too, not its key
    assert grown.remove_sources(["label-studio:1:1"])[0] and grown.get(29)["label"] == "weather_query"
    plain = Bundle.create(
        tmp_path / "p",
        tiny_st_dir,
        [texts[i] for i in first],
        [labels[i] for i in first],
        classifier=Classifier("knn", k=1),
        progress=False,
    )
    assert plain.manifest["label_names"] == "off"
    plain.add([texts[i] for i in later], ["geo"] * 8)
    assert len(plain.ids) == 24 and "geo" not in plain.texts


def test_remove_relabel_compact_and_a_torn_log_line(made):
    made.remove([0])
    made.relabel([1], ["lost card"])
    assert 0 not in made.ids.tolist() and made.labels[made.ids.tolist().index(1)] == "lost card"
    with open(made.root / "wal.jsonl", "ab") as fh:
        fh.write(b'1234abcd {"op": "add", "ids": [99')  # a crash in the middle of a write
    reopened = Bundle.load(made.root)
    assert len(reopened.ids) == 23 and reopened.labels[reopened.ids.tolist().index(1)] == "lost card"
    assert reopened.add(["red dog"], ["animals"]) == [24]  # appended after the cut, not onto the torn line
    assert Bundle.load(made.root).get(24) == {"id": 24, "label": "animals", "text": "red dog"}
    reopened.compact()
    assert reopened.manifest["generation"] == 1 and (made.root / "wal.jsonl").read_bytes() == b""
    assert not (made.root / "gen-0").exists()
    compacted = Bundle.load(made.root)
    assert compacted.ids.tolist() == reopened.ids.tolist() and compacted.labels == reopened.labels
    assert len(compacted.ids) == 24
    np.testing.assert_array_equal(compacted.embeddings, reopened.embeddings)


def test_bad_input(made):
    with pytest.raises(CeaError, match="unknown example id\\(s\\) 999"):
        made.remove([999])
    with pytest.raises(CeaError, match="text 1 is empty"):
        made.add(["fine", "  "], ["a", "b"])
    with pytest.raises(CeaError, match="text 0 is empty"):
        made.predict([""])


def test_damaged_newer_or_mismatched_bundles_are_refused(made, tmp_path, tiny_st_dir):
    root = made.root
    data = bytearray((root / "gen-0" / "embeddings.npy").read_bytes())
    data[-1] ^= 0xFF
    (root / "gen-0" / "embeddings.npy").write_bytes(bytes(data))
    with pytest.raises(CeaError, match="gen-0/embeddings.npy does not match its checksum"):
        Bundle.load(root)
    other = Bundle.create(tmp_path / "c", tiny_st_dir, ["a b", "c d"], ["x", "y"], progress=False).root
    manifest = json.loads((other / "manifest.json").read_text())
    (other / "manifest.json").write_text(json.dumps({**manifest, "format": "cea.bundle/2"}))
    with pytest.raises(
        CeaError, match="holds format 'cea.bundle/2', not cea.bundle/1; a newer cea.bundle format needs a newer cea"
    ):
        Bundle.load(other)
    (other / "manifest.json").write_text(json.dumps(manifest))
    with open(other / "gen-0" / "embeddings.npy", "wb") as fh:
        np.save(fh, np.zeros((2, 7), np.float32))
    from cea.bundle.layout import sha256

    manifest["files"]["gen-0/embeddings.npy"] = sha256(other / "gen-0" / "embeddings.npy")
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CeaError, match="embeddings have 7 dimensions but its encoder gives 32"):
        Bundle.load(other)
    with pytest.raises(CeaError, match="already exists"):
        Bundle.create(other, tiny_st_dir, ["a"], ["x"], progress=False)


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_a_faiss_index_grows_forgets_and_survives_compaction(tmp_path, tiny_st_dir, intents, kind):
    made = Bundle.create(
        tmp_path / kind,
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier("knn", k=1),
        index=kind,
        progress=False,
    )
    assert made.manifest["index"]["kind"] == kind and (made.root / "gen-0" / "index.faiss").exists()
    if kind == "hnsw":
        assert 0.9 <= made.manifest["index"]["recall_at_k"] <= 1.0
    made.add(["red dog blue cat"], ["animals"])
    assert made.predict(["red dog blue cat"])[0].label == "animals"
    made.remove([24])  # a tombstone: the index keeps the row, predictions skip it
    assert made.predict(["red dog blue cat"])[0].neighbours[0]["id"] != 24
    made.remove([0])
    assert made.predict(["my card is lost a"])[0].neighbours[0]["id"] != 0
    reopened = Bundle.load(made.root)
    assert len(reopened.ids) == 23 and reopened.predict(["my card is lost a"])[0].neighbours[0]["id"] != 0
    reopened.compact()
    assert len(reopened.index) == 23 and reopened.manifest["index"]["n"] == 23
    assert Bundle.load(made.root).predict(["transfer money to my account b"])[0].label == "transfer"


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_an_onnx_bundle_predicts_like_the_torch_one(made, tmp_path, tiny_st_dir, intents, backend):
    fast = Bundle.create(
        tmp_path / backend,
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier("knn", k=1),
        progress=False,
        backend=backend,
    )
    assert fast.manifest["backend"] == backend and type(fast.encoder).__name__ == "OnnxEncoder"
    queries = list(intents["text"])
    assert [p.label for p in fast.predict(queries)] == [p.label for p in made.predict(queries)]
    if backend == "onnx":
        np.testing.assert_allclose(fast.embeddings, made.embeddings, atol=1e-5)
    fast.add(["red dog and blue cat"], ["animals"])
    again = Bundle.load(fast.root)  # reopened with the same backend, the log replayed
    assert (
        type(again.encoder).__name__ == "OnnxEncoder" and again.predict(["red dog and blue cat"])[0].label == "animals"
    )


def test_an_int8_bundle_takes_the_embeddings_its_export_computed(tmp_path, tiny_st_dir, intents):
    """cea fit's int8 candidate: the references encoded once by the export beside the model, not again."""
    from cea.encoders import load_encoder
    from cea.encoders.onnx import OnnxEncoder, export_onnx

    texts, labels = list(intents["text"]), list(intents["label"])
    folder = tmp_path / "model"
    encoder = load_encoder(tiny_st_dir)
    encoder.save(str(folder))
    with pytest.raises(CeaError, match="embeddings for backend onnx-int8 come from the export beside the model"):
        Bundle.create(
            tmp_path / "none",
            str(folder),
            texts,
            labels,
            embeddings=np.ones((len(texts), 32)),
            backend="onnx-int8",
            progress=False,
        )
    assert not (tmp_path / "none").exists()
    export_onnx(encoder, folder, int8=True, calibration=texts)
    given = OnnxEncoder(folder, "int8").encode(texts) * 2  # not unit length: the bundle normalises them
    made = Bundle.create(
        tmp_path / "b",
        str(folder),
        texts,
        labels,
        embeddings=given,
        backend="onnx-int8",
        encoder=encoder,
        classifier=Classifier("knn", k=1),
        progress=False,
        label_names="off",
    )
    assert made.manifest["backend"] == "onnx-int8" and type(made.encoder).__name__ == "OnnxEncoder"
    np.testing.assert_allclose(made.embeddings, given / np.linalg.norm(given, axis=1, keepdims=True), atol=1e-6)
    assert [p.label for p in made.predict(texts)] == labels  # queries encoded by the same export


def test_an_onnx_bundle_is_exported_from_the_fp32_weights_whatever_the_precision(made, tmp_path, tiny_st_dir, intents):
    """--precision applies to the torch encoder; the ONNX graph always comes from the fp32 weights."""
    onnx = Bundle.create(
        tmp_path / "onnx-bf16",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier(k=1),
        progress=False,
        backend="onnx",
        precision="bf16",
    )
    np.testing.assert_allclose(onnx.embeddings, made.embeddings, atol=1e-5)
    torch_bf16 = Bundle.create(
        tmp_path / "torch-bf16",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier(k=1),
        progress=False,
        precision="bf16",
    )
    assert np.abs(torch_bf16.embeddings - made.embeddings).max() > 1e-4  # the bf16 weights did encode these


def test_unknown_backend_leaves_nothing(tmp_path, tiny_st_dir, intents):
    with pytest.raises(CeaError, match="unknown backend 'tensorrt'; use auto or one of torch, onnx, onnx-int8"):
        Bundle.create(tmp_path / "b", tiny_st_dir, ["a text"], ["x"], backend="tensorrt")
    assert not (tmp_path / "b").exists() and not list(tmp_path.glob(".b.tmp-*"))


def test_distance_weighted_votes(tmp_path, tiny_st_dir):
    """k = 3 over one exact match of label x and two further neighbours of label y: uniform votes give y,
    distance votes (1 / (1 - cos)) give x, and the score is that label's share of the weights."""
    texts = ["my card is lost", "transfer money to my account", "transfer money to my account now"]
    made = Bundle.create(
        tmp_path / "d",
        tiny_st_dir,
        texts,
        ["x", "y", "y"],
        classifier=Classifier("knn", k=3, weights="distance"),
        progress=False,
    )
    uniform = Bundle.create(
        tmp_path / "u", tiny_st_dir, texts, ["x", "y", "y"], classifier=Classifier("knn", k=3), progress=False
    )
    assert made.manifest["weights"] == "distance" and uniform.manifest["weights"] == "uniform"
    got, plain = made.predict(["my card is lost"])[0], uniform.predict(["my card is lost"])[0]
    assert (got.label, plain.label) == ("x", "y") and plain.score == pytest.approx(2 / 3)
    weights = {n["label"]: 0.0 for n in got.neighbours}
    for n in got.neighbours:
        weights[n["label"]] += 1.0 if n["cosine"] >= 1.0 - 1e-6 else 1.0 / (1.0 - n["cosine"])
    expected = 1.0 if got.neighbours[0]["cosine"] >= 1.0 - 1e-6 else weights["x"] / sum(weights.values())
    assert got.score == pytest.approx(expected, rel=1e-4)
    with pytest.raises(CeaError, match="weights 'near' is unknown"):
        Bundle.create(
            tmp_path / "w", tiny_st_dir, texts, ["x", "y", "y"], classifier=Classifier(weights="near"), progress=False
        )
    assert not (tmp_path / "w").exists()


def _independent(bundle, texts):
    """Labels and probabilities of scikit-learn's logistic regression (C = 10, a class with fewer examples than the
    median class weighing median / count) fitted here on the bundle's live reference embeddings, for ``texts``
    encoded by the bundle's encoder."""
    from sklearn.linear_model import LogisticRegression

    q = bundle.encoder.encode(texts, convert_to_numpy=True)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    names, counts = np.unique(bundle.labels, return_counts=True)
    weights = {str(c): max(1.0, float(np.median(counts)) / n) for c, n in zip(names, counts)}
    model = LogisticRegression(C=10.0, max_iter=3000, class_weight=weights).fit(bundle.embeddings, bundle.labels)
    proba = model.predict_proba(q)
    return model.classes_[proba.argmax(1)].tolist(), proba.max(1)


def test_the_linear_head_predicts_is_refitted_after_changes_and_survives_restarts(tmp_path, tiny_st_dir, intents):
    made = Bundle.create(
        tmp_path / "h",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier(k=2),
        progress=False,
    )
    assert made.manifest["classifier"] == {"kind": "linear", "C": 10.0, "knn_share": 0.0, "class_weight": "median"}
    assert (made.root / "gen-0" / "head.npz").exists()
    queries = ["my card is lost", "transfer money", "red dog and blue cat"]
    labels, scores = _independent(made, queries)
    got = made.predict(queries)
    assert [p.label for p in got] == labels and len(got[0].neighbours) == 2
    np.testing.assert_allclose([p.score for p in got], scores, atol=1e-4)
    # a new class: the next prediction answers it (its text's nearest reference carries it) and starts the refit;
    # the refitted head counts the live examples, the new class included
    made.add(["red dog and blue cat", "blue cat and red dog", "a red dog", "a blue cat"], ["animals"] * 4)
    made.remove([0])
    labels, scores = _independent(made, queries)
    assert [p.label for p in made.predict(queries)] == labels and labels[2] == "animals"
    assert "animals" in made.head().classes.tolist() and made.refit.stale is False
    got = made.predict(queries)
    assert [p.label for p in got] == labels
    np.testing.assert_allclose([p.score for p in got], scores, atol=2e-3)
    # a restart replays the log and refits the same head; compaction stores it with the new generation
    again = Bundle.load(made.root)
    assert [p.label for p in again.predict(queries)] == labels
    again.compact()
    assert (made.root / "gen-1" / "head.npz").exists()
    compacted = Bundle.load(made.root)
    assert compacted.refit.stale is False and "animals" in compacted.head().classes.tolist()
    np.testing.assert_allclose([p.score for p in compacted.predict(queries)], scores, atol=2e-3)


def test_background_refits_go_on_in_bounded_steps_until_the_head_converges(tmp_path, tiny_st_dir, intents, monkeypatch):
    import cea.bundle.refit as refit

    monkeypatch.setattr(refit, "REFIT_STEPS", 1)
    monkeypatch.setattr(refit, "REFIT_PAUSE", 0.0)
    made = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier(k=2),
        progress=False,
    )
    installed = []
    made.on_refit = lambda seconds, lags: installed.append(
        (made.refit.latest.n_iter, made.refit.latest.converged, len(lags))
    )
    made.add(["red dog and blue cat", "a blue cat"], ["animals"] * 2)
    made.predict(["a red dog"])  # starts the background refit: one lbfgs step at a time
    for _ in range(300):
        if not made.refit.running:
            break
        time.sleep(0.05)
    assert len(installed) > 2 and installed[0] == (1, False, 1)  # the first step already counts the change
    assert all(n == 1 and not converged for n, converged, _ in installed[:-1])
    assert installed[-1][1] and not made.refit.stale
    full = Bundle.load(made.root).head()  # converged from scratch on the same rows
    np.testing.assert_allclose(
        made.refit.latest.predict_proba(made.embeddings), full.predict_proba(made.embeddings), atol=5e-3
    )


def test_a_linear_bundle_left_with_one_label_votes_and_bad_classifiers_are_refused(tmp_path, tiny_st_dir):
    made = Bundle.create(
        tmp_path / "two",
        tiny_st_dir,
        ["my card is lost", "send money"],
        ["card", "transfer"],
        classifier=Classifier(k=1),
        progress=False,
    )
    made.remove([1])
    assert made.head() is None and made.predict(["send money"])[0].label == "card"
    with pytest.raises(CeaError, match="classifier linear needs examples of at least two labels"):
        Bundle.create(tmp_path / "one", tiny_st_dir, ["a text"], ["x"], progress=False)
    with pytest.raises(CeaError, match="kind 'tree' is unknown"):
        Bundle.create(
            tmp_path / "t", tiny_st_dir, ["a", "b"], ["x", "y"], classifier=Classifier("tree"), progress=False
        )
    with pytest.raises(CeaError, match="C must be positive"):
        Bundle.create(tmp_path / "c", tiny_st_dir, ["a", "b"], ["x", "y"], classifier=Classifier(C=0.0), progress=False)
    assert not any((tmp_path / name).exists() for name in ("one", "t", "c"))


def test_a_linear_head_mixed_with_the_knn_vote(tmp_path, tiny_st_dir, intents):
    """knn_share 0.4: probabilities 0.6 x scikit-learn's head + 0.4 x the distance-weighted 3-NN vote shares,
    computed here from the neighbours the bundle reports."""
    made = Bundle.create(
        tmp_path / "m",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier(k=3, weights="distance", knn_share=0.4),
        progress=False,
    )
    from sklearn.linear_model import LogisticRegression

    queries = ["my card is lost", "transfer money", "red dog and blue cat", "what is the capital"]
    q = made.encoder.encode(queries, convert_to_numpy=True)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    model = LogisticRegression(C=10.0, max_iter=3000).fit(made.embeddings, made.labels)
    for p, head in zip(made.predict(queries), model.predict_proba(q)):
        votes = dict.fromkeys(model.classes_, 0.0)
        for n in p.neighbours:
            votes[n["label"]] += 1.0 / max(1.0 - n["cosine"], 1e-12)
        mixed = 0.6 * head + 0.4 * np.array([votes[c] for c in model.classes_]) / sum(votes.values())
        assert p.label == model.classes_[mixed.argmax()] and p.score == pytest.approx(mixed.max(), abs=1e-3)
    with pytest.raises(CeaError, match="knn_share must be between 0 and 1"):
        Bundle.create(
            tmp_path / "bad", tiny_st_dir, ["a", "b"], ["x", "y"], classifier=Classifier(knn_share=2.0), progress=False
        )


def test_a_bundle_from_before_the_head_still_votes(made):
    """Manifests written before the linear head existed name no classifier: such a bundle keeps the kNN vote."""
    manifest = json.loads((made.root / "manifest.json").read_text())
    del manifest["classifier"]
    (made.root / "manifest.json").write_text(json.dumps(manifest))
    old = Bundle.load(made.root)
    assert old.head() is None
    assert [p.label for p in old.predict(["my card is lost a", "red dog"])] == [
        p.label for p in made.predict(["my card is lost a", "red dog"])
    ]


def test_a_threshold_answers_unknown_below_the_evidence_and_survives_a_restart(tmp_path, tiny_st_dir, intents):
    texts, labels = list(intents["text"]), list(intents["label"])
    made = Bundle.create(tmp_path / "u", tiny_st_dir, texts, labels, classifier=Classifier(k=3), progress=False)
    assert made.unknown_threshold is None
    assert made.manifest["unknown"] == {"threshold": None, "rate": None, "count_curve": []}
    queries = ["my card is lost a", "red dog and blue cat", "what is the capital city b"]
    free = made.predict(queries)
    for p in free:
        assert p.label != "unknown" and p.closest is None
        assert p.evidence == pytest.approx(p.score * max(p.neighbours[0]["cosine"], 0), abs=2e-6)
    low, high = sorted(p.evidence for p in free)[:2]
    cut = (low + high) / 2  # between the weakest and the second weakest evidence
    for p, before in zip(made.predict(queries, threshold=cut), free):
        expected = ("unknown", before.label) if before.evidence < cut else (before.label, None)
        assert (p.label, p.closest) == expected and p.score == before.score
    assert sum(p.label == "unknown" for p in made.predict(queries, threshold=cut)) == 1
    stored = Bundle.create(
        tmp_path / "t", tiny_st_dir, texts, labels, classifier=Classifier(k=3, unknown_threshold=cut), progress=False
    )
    reopened = Bundle.load(stored.root)
    assert reopened.unknown_threshold == cut
    assert [p.label for p in reopened.predict(queries)] == [p.label for p in made.predict(queries, threshold=cut)]
    assert all(p.label != "unknown" for p in reopened.predict(queries, threshold=0))  # 0: never, per call


def test_an_added_small_class_s_evidence_follows_the_count_curve(tmp_path, tiny_st_dir, intents):
    texts, labels = list(intents["text"]), list(intents["label"])
    made = Bundle.create(
        tmp_path / "s", tiny_st_dir, texts, labels, classifier=Classifier(k=3), progress=False, unknown_rate=0.2
    )
    assert made.classifier.count_curve == ()  # 8 examples a class: none below the median, nothing to scale
    curve = ((2, 0.5), (8, 1.0))
    made.classifier = made.classifier.replace(count_curve=curve)
    made.add(["please reset my password x", "please reset my password y"], ["password", "password"])
    got = made.predict(["please reset my password x", "my card is lost a"], threshold=0)
    assert [p.label for p in got] == ["password", "card"]
    cosines = [p.neighbours[0]["cosine"] for p in got]
    assert got[0].evidence == pytest.approx(got[0].score * cosines[0] / 0.5, abs=2e-6)  # 2 examples: ratio 0.5
    assert got[1].evidence == pytest.approx(got[1].score * cosines[1], abs=2e-6)  # 8 examples: as it was


def test_a_calibrated_threshold_is_stored_and_unknown_is_no_label(tmp_path, tiny_st_dir, intents):
    texts, labels = list(intents["text"]), list(intents["label"])
    made = Bundle.create(
        tmp_path / "c", tiny_st_dir, texts, labels, classifier=Classifier(k=3), progress=False, unknown_rate=0.2
    )
    expected = Classifier(k=3).calibrate(made.embeddings, made.labels, 0.2)
    assert made.manifest["unknown"] == {
        "threshold": pytest.approx(expected.unknown_threshold),
        "rate": 0.2,
        "count_curve": [list(x) for x in expected.count_curve],
    }
    with pytest.raises(CeaError, match="'unknown' is the bundle's answer"):
        made.add(["what is this"], ["unknown"])
    with pytest.raises(CeaError, match="unknown_rate and unknown_threshold both set the threshold"):
        Bundle.create(
            tmp_path / "d", tiny_st_dir, texts, labels, unknown_rate=0.1, classifier=Classifier(unknown_threshold=0.5)
        )
    with pytest.raises(CeaError, match="unknown_rate must lie between 0 and 1"):
        Bundle.create(tmp_path / "e", tiny_st_dir, texts, labels, unknown_rate=1.5)
    assert not (tmp_path / "d").exists() and not (tmp_path / "e").exists()


@pytest.fixture
def topic_sets():
    """Texts of one or two topics (multi-intent texts) with their label lists."""
    parts = {"card": "my card is lost", "transfer": "transfer money to my account", "geo": "what is the capital city"}
    names, texts, labels = list(parts), [], []
    for i in range(30):
        a, b = names[i % 3], names[(i + 1) % 3]
        texts.append(f"{parts[a]} {'a' * (i % 5 + 1)}")
        labels.append([a])
        if i % 2 == 0:
            texts.append(f"{parts[a]} and {parts[b]} {'b' * (i % 5 + 1)}")
            labels.append([a, b])
    return texts, labels


def test_a_multi_label_bundle_answers_label_lists_and_survives_a_restart(tmp_path, tiny_st_dir, topic_sets):
    texts, labels = topic_sets
    made = Bundle.create(tmp_path / "m", tiny_st_dir, texts, labels, classifier=Classifier("knn", k=4), progress=False)
    assert made.multi_label and made.manifest["classifier"]["kind"] == "knn"
    threshold = made.manifest["classifier"]["label_threshold"]
    got = made.predict([texts[1], "my card is lost a"])
    for p in got:  # the labels are those carried by at least `threshold` of the 4 neighbours, shares recomputed here
        shares = {}
        for n in p.neighbours:
            for name in n["label"]:
                shares[name] = shares.get(name, 0) + 1 / len(p.neighbours)
        best = max(shares.values())
        expected = sorted(
            ((name, s) for name, s in shares.items() if s >= threshold - 1e-9 or s == best),
            key=lambda kv: (-kv[1], kv[0]),
        )
        assert [(x["label"], x["score"]) for x in p.labels] == [(n, pytest.approx(s, abs=1e-6)) for n, s in expected]
        assert p.label == p.labels[0]["label"] and p.score == pytest.approx(best, abs=1e-6)
    assert made.label_counts == {"card": 20, "geo": 20, "transfer": 20}  # 10 alone, 5 first and 5 second of a pair
    ids = made.add(["red dog and blue cat"], [["animals", "pets"]])
    assert made.get(ids[0])["label"] == ["animals", "pets"]
    assert {x["label"] for x in made.predict(["red dog and blue cat"], k=1)[0].labels} == {"animals", "pets"}
    with pytest.raises(CeaError, match="empty list of labels"):
        made.add(["nothing"], [[]])
    reopened = Bundle.load(made.root)
    assert reopened.multi_label and reopened.get(ids[0])["label"] == ["animals", "pets"]
    assert [p.labels for p in reopened.predict([texts[1], "my card is lost a"])] == [p.labels for p in got]
    far = reopened.predict([texts[1]], threshold=2.0)[0]  # evidence is at most 1: unknown, no labels
    assert far.label == "unknown" and far.labels == [] and far.closest == got[0].label
    single = Bundle.create(
        tmp_path / "s", tiny_st_dir, texts, [x[0] for x in labels], classifier=Classifier(k=3), progress=False
    )
    with pytest.raises(CeaError, match="this bundle holds one label per example"):
        single.add(["x y"], [["card", "geo"]])


def test_a_multi_label_bundle_by_default_answers_with_a_logistic_regression_per_label(
    tmp_path, tiny_st_dir, topic_sets
):
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    from cea.knn import normalize
    from cea.knn.labelsets import binarize

    texts, labels = topic_sets
    made = Bundle.create(tmp_path / "h", tiny_st_dir, texts, labels, classifier=Classifier(k=3), progress=False)
    assert made.manifest["classifier"]["kind"] == "linear" and made.head().multi_label
    threshold = made.manifest["classifier"]["label_threshold"]
    classes = ["card", "geo", "transfer"]
    reference = OneVsRestClassifier(LogisticRegression(C=10, max_iter=3000)).fit(
        made.embeddings, binarize(labels, classes)
    )
    queries = [texts[1], "my card is lost a", "what is the capital city and my card is lost"]
    expected = reference.predict_proba(normalize(made.encoder.encode(queries)))
    for p, row in zip(made.predict(queries), expected):
        keep = [(c, q) for c, q in zip(classes, row) if q >= threshold] or [(classes[row.argmax()], row.max())]
        keep.sort(key=lambda kv: -kv[1])
        assert [x["label"] for x in p.labels] == [c for c, _ in keep]
        assert [x["score"] for x in p.labels] == pytest.approx([q for _, q in keep], abs=1e-4)
    made.add(["red dog and blue cat"] * 3, [["animals"]] * 3)  # a new label: the head is refitted with it
    assert "animals" in made.head().classes.tolist()
    assert Bundle.load(made.root).predict(["red dog and blue cat"])[0].labels[0]["label"] == "animals"


def test_auto_backend_keeps_int8_only_where_it_is_faster_and_as_accurate(tmp_path, tiny_st_dir, intents, monkeypatch):
    from cea.bundle import create

    texts, labels = list(intents["text"]), list(intents["label"])
    few = Bundle.create(tmp_path / "few", tiny_st_dir, texts, labels, classifier=Classifier(k=1), progress=False)
    assert few.manifest["backend"] == "torch" and "not measured" in few.manifest["backend_choice"]["reason"]
    assert not (few.root / "encoder" / "onnx").exists()
    monkeypatch.setattr(create, "AUTO_MIN", 10)  # the tiny set measured as a real one would be
    for tolerance in (100.0, -100.0):  # any loss allowed; a gain of 100 points demanded (never met)
        monkeypatch.setattr(create, "AUTO_TOLERANCE", tolerance)
        made = Bundle.create(
            tmp_path / f"auto{tolerance}",
            tiny_st_dir,
            texts,
            labels,
            classifier=Classifier(k=1),
            progress=False,
            device="cpu",
        )  # on a GPU the encoder stays PyTorch, unmeasured
        choice = made.manifest["backend_choice"]
        assert choice["held_out"] == 5 and 0 <= choice["onnx-int8"]["held_out_accuracy"] <= 100
        faster = choice["onnx-int8"]["texts_per_second"] > choice["torch"]["texts_per_second"]
        expected = "onnx-int8" if faster and tolerance > 0 else "torch"
        assert choice["chosen"] == made.manifest["backend"] == expected
        assert (made.root / "encoder" / "onnx").exists() == (expected == "onnx-int8")
        reloaded = Bundle.load(made.root)
        assert [p.label for p in reloaded.predict(texts[:3])] == [p.label for p in made.predict(texts[:3])]
