"""cea.fitting.run: from labelled data to a bundle in one call, on the tiny BERT and a small intent set."""

import json

import numpy as np
import pandas as pd
import pytest

from cea import Bundle, fit
from cea.data import load_dataset
from cea.errors import CeaError
from cea.knn.decision import Classifier


@pytest.fixture
def intent_files(tmp_path, intents):
    """The fixture as three files, the way a user keeps a split data set (12 / 6 / 6 rows)."""
    intents = intents.sort_values("label", kind="stable").reset_index(drop=True)
    part = intents.groupby("label").cumcount() % 4
    files = {}
    for split, rows in (("train", part < 2), ("dev", part == 2), ("test", part == 3)):
        files[split] = str(tmp_path / f"{split}.csv")
        intents[rows].to_csv(files[split], index=False)
    return files


def test_fit_end_to_end(intent_files, tiny_bert_dir, tmp_path):
    out, work = tmp_path / "bundle", tmp_path / "work"
    lines = []
    summary = fit(intent_files, out, models=[tiny_bert_dir], budget="5m", work=work, progress=False, say=lines.append)
    # every labelled example is a reference, with the classifier (linear head or kNN) chosen on dev
    bundle = Bundle.load(out)
    assert len(bundle.ids) == summary["references"] == 24 + 3  # every example and the three labels' names
    assert bundle.manifest["k"] == summary["k"] and bundle.manifest["weights"] == summary["weights"]
    assert bundle.manifest["classifier"] == {
        "kind": summary["classifier"],
        "C": summary["C"],
        "knn_share": summary["knn_share"],
        "class_weight": "median",
    }
    assert summary["chosen"] in ("frozen", "trained") and set(summary["candidates"]) == {"frozen", "trained"}
    chosen = summary["candidates"][summary["chosen"]]
    other = summary["candidates"]["trained" if summary["chosen"] == "frozen" else "frozen"]
    assert chosen["dev"]["accuracy"] >= other["dev"]["accuracy"] and summary["test"] == chosen["test"]
    for c in summary["candidates"].values():  # the mix best on dev, at least as good as the head or kNN alone
        knn, linear = c["dev"]["knn"]["accuracy"], c["dev"]["linear"]["accuracy"]
        assert c["dev"]["accuracy"] >= max(knn, linear)
        if c["dev"]["classifier"] == "knn":  # a share of 1: the vote alone, strictly better than any mix with the head
            assert c["dev"]["accuracy"] == knn > linear and c["dev"]["linear"]["knn_share"] == 0
    assert (work / "train" / "results.json").exists() and summary["skipped"] == []
    training = summary["training"]
    assert training["ran"] and 1 <= training["kept_step"] <= training["steps"] <= training["planned_steps"]
    # each stage's wall time, and the whole against the work no fit avoids (one encode per text, the training run)
    assert list(summary["stage_seconds"]) == ["probe", "frozen", "train", "choose", "bundle"]
    assert 0 < summary["unavoidable_seconds"] <= summary["seconds"] and summary["ratio_to_unavoidable"] >= 1
    # the probe ran on dev (train as references), every layer of the tiny BERT
    probe = json.loads((work / "probe-0" / "results.json").read_text())
    assert probe["meta"]["queries"] == "dev" and probe["meta"]["references"] == "train"
    assert [r["layer"] for r in summary["probe"]] == [0, 1, 2] and summary["layer"] in (1, 2)
    # the shipped bundle predicts the training texts' labels, and says what it did in fit.json and report.html
    texts = ["my card is lost aaa", "transfer money to my account bb"]
    assert [p.label for p in bundle.predict(texts)] == ["card", "transfer"]
    assert json.loads((out / "fit.json").read_text())["chosen"] == summary["chosen"]
    page = (out / "report.html").read_text()
    assert "Skipped or cut" in page and "dev linear head" in page and "probe-0" in page
    assert chosen["described"] in page  # the classifier in words, as fit wrote it into fit.json
    issues = summary["label_issues"]  # cea check on the bundle's 27 examples, in the chosen encoder's space
    assert issues["of"] == 27 and len(issues["rows"]) == min(issues["flagged"], 20) and issues["flagged"] < 27
    assert f"Labels probably wrong: {issues['flagged']} of 27" in page
    # the dev accuracy fit reports for its choice is what a bundle of the train texts with that classifier gets on dev
    source = work / "train" / "model" if summary["chosen"] == "trained" else work / "frozen-model"
    train = Bundle.create(
        tmp_path / "train-only",
        str(source),
        list(pd.read_csv(intent_files["train"])["text"]),
        list(pd.read_csv(intent_files["train"])["label"]),
        label_names="auto",
        progress=False,
        classifier=Classifier.from_manifest(bundle.manifest),
    )
    dev = pd.read_csv(intent_files["dev"])
    answered = [p.label for p in train.predict(list(dev["text"]))]
    assert round(100 * np.mean(np.array(answered) == dev["label"].to_numpy()), 2) == chosen["dev"]["accuracy"]
    assert [line[:5] for line in lines[:5]] == ["[1/5]", "[2/5]", "[3/5]", "[4/5]", "[5/5]"]
    with pytest.raises(CeaError, match="already exists"):
        fit(intent_files, out, models=[tiny_bert_dir], progress=False, say=lines.append)


def test_a_budget_too_small_to_train_ships_the_frozen_encoder(intents_csv, tiny_bert_dir, tmp_path):
    summary = fit(
        intents_csv,
        tmp_path / "b",
        models=[tiny_bert_dir, tiny_bert_dir + "/"],
        budget=0.01,
        work=tmp_path / "w",
        progress=False,
        say=lambda line: None,
    )
    assert summary["chosen"] == "frozen" and set(summary["candidates"]) == {"frozen"}
    assert any(s.startswith("probe of") for s in summary["skipped"])  # the second candidate did not fit
    assert any(s.startswith("training (") for s in summary["skipped"]) and not summary["training"]["ran"]
    assert not (tmp_path / "w" / "train").exists() and len(Bundle.load(tmp_path / "b").ids) == 24 + 3


def test_fit_chooses_the_max_sequence_length_on_dev_where_texts_run_past_a_shorter_one(
    intent_files, tiny_bert_dir, tmp_path, monkeypatch
):
    from cea.encoders import load_encoder
    from cea.fitting import probing

    full = load_encoder(tiny_bert_dir).max_seq_length
    monkeypatch.setattr(probing, "LENGTHS", (4, full + 1))  # the fixture's texts run past 4 tokens; none past full+1
    summary = fit(
        intent_files,
        tmp_path / "b",
        models=[tiny_bert_dir],
        budget="5m",
        work=tmp_path / "w",
        progress=False,
        say=lambda line: None,
    )
    # probed shortest first, every layer at each length; a length above the encoder's own is never tried
    assert [(r["max_seq_length"], r["layer"]) for r in summary["probe"]] == [
        (4, 0),
        (4, 1),
        (4, 2),
        (full, 0),
        (full, 1),
        (full, 2),
    ]
    best = max(
        (r for r in summary["probe"] if r["layer"]), key=lambda r: (r["accuracy"], r["max_seq_length"], r["layer"])
    )
    assert (summary["max_seq_length"], summary["layer"]) == (best["max_seq_length"], best["layer"])
    config = json.loads((tmp_path / "w" / "train" / "results.json").read_text())["config"]
    assert config["max_seq_length"] == (None if best["max_seq_length"] == full else 4)  # training keeps the length
    assert Bundle.load(tmp_path / "b").encoder.max_seq_length == best["max_seq_length"]  # and so does the bundle
    probe = json.loads((tmp_path / "w" / "probe-0" / "results.json").read_text())
    assert probe["meta"]["max_seq_length"] == {tiny_bert_dir: 4}
    # no time for a second probe: the shortest length alone, the encoder's own skipped
    again = fit(
        intent_files,
        tmp_path / "c",
        models=[tiny_bert_dir],
        budget=0.01,
        work=tmp_path / "x",
        progress=False,
        say=lambda line: None,
    )
    assert again["max_seq_length"] == 4 and {r["max_seq_length"] for r in again["probe"]} == {4}
    assert any(s.startswith(f"probe of {tiny_bert_dir} (about") for s in again["skipped"])
    encoder = load_encoder(tiny_bert_dir)
    texts = ["a b c d e f g h"] * 3 + ["a b"] * 7  # 3 of 10 run past 4 tokens
    assert probing.shorter_lengths(encoder, texts) == [4]
    monkeypatch.setattr(probing, "LONG_SHARE", 0.31)
    assert probing.shorter_lengths(encoder, texts) == []


def test_data_errors(intents_csv, tiny_bert_dir, tmp_path):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("text1,text2,score\n" + "".join(f"a b {i},c d,{i % 5}\n" for i in range(20)))
    with pytest.raises(CeaError, match="fit needs labelled texts"):
        fit(str(pairs), tmp_path / "b", models=[tiny_bert_dir], progress=False)
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    "splits, more, work, message",
    [
        (
            {"train": ["card", "geo"], "dev": ["transfer"]},
            [],
            "new",
            r"no dev text has a label of the train split \(dev: transfer\); give dev texts",
        ),
        ({"train": ["card"], "dev": ["card"], "test": ["geo"]}, [], "new", r"train split has a single label \(card\)"),
        ({"train": ["card", "geo"]}, ["./no-such-model"], "new", "model folder not found: ./no-such-model"),
        ({"train": ["card", "geo"]}, [], "w", "already holds a fit's training run; name a new folder"),
    ],
)
def test_what_would_stop_a_fit_after_its_probe_fails_before_it(
    splits, more, work, message, intents, tiny_bert_dir, tmp_path, monkeypatch
):
    from cea.fitting import probing

    files = {}
    for split, labels in {"test": ["card", "geo"], **splits}.items():
        files[split] = str(tmp_path / f"{split}.csv")
        intents[intents["label"].isin(labels)].to_csv(files[split], index=False)
    (tmp_path / "w" / "train").mkdir(parents=True)  # a fit's work folder from before
    monkeypatch.setattr(probing, "probe", lambda *a, **k: pytest.fail("probed before the check"))
    with pytest.raises(CeaError, match=message):  # before the probe (it fails the test) or anything written
        fit(
            files,
            tmp_path / "b",
            models=[tiny_bert_dir, *more],
            work=tmp_path / work,
            progress=False,
            say=lambda line: None,
        )
    assert not (tmp_path / "b").exists() and not (tmp_path / "new").exists()


def test_fit_encodes_each_text_once_per_encoder_state(intent_files, tiny_bert_dir, tmp_path, monkeypatch):
    """Every inference forward pass of the BERT is counted per text and per state of its weights (training steps run
    with gradients and are not counted): the probe, the frozen choice, training's final judgement, the trained
    candidate's choice, the test figures and the bundle never encode a text twice with the same weights."""
    import collections
    import functools

    import torch
    from transformers.models.bert import modeling_bert

    from cea import training

    seen, forward = collections.Counter(), modeling_bert.BertModel.forward

    def counting(self, input_ids=None, attention_mask=None, *args, **kwargs):
        if not torch.is_grad_enabled():
            state = (len(self.encoder.layer), round(sum(float(p.double().sum()) for p in self.parameters()), 6))
            for row, mask in zip(input_ids.tolist(), attention_mask.tolist()):
                seen[state, tuple(t for t, m in zip(row, mask) if m)] += 1
        return forward(self, input_ids, attention_mask, *args, **kwargs)

    monkeypatch.setattr(modeling_bert.BertModel, "forward", counting)
    # one step an epoch here: without warm-up its first step already moves the weights (else epoch 1 is the frozen
    # state)
    monkeypatch.setattr(training, "TrainConfig", functools.partial(training.TrainConfig, warmup_ratio=0.0))
    monkeypatch.setenv("CEA_CACHE", str(tmp_path / "cache"))  # nothing read from an earlier run's embeddings
    summary = fit(
        intent_files,
        tmp_path / "b",
        models=[tiny_bert_dir],
        budget="5m",
        work=tmp_path / "w",
        progress=False,
        say=lambda line: None,
    )
    assert set(summary["candidates"]) == {"frozen", "trained"}
    twice = {key: n for key, n in seen.items() if n > 1}
    assert seen and not twice, twice
    states = {state for state, _ in seen}
    assert len(states) >= 3  # the frozen encoder, each judged epoch and the final weights: each encoded once


@pytest.fixture
def topic_sets_folder(tmp_path, topic_sets_jsonl):
    """The multi-intent set as a folder of train / dev / test CSV files, labels joined by "|"."""
    frame = pd.read_json(topic_sets_jsonl, lines=True)
    folder = tmp_path / "topics"
    folder.mkdir()
    for split, rows in frame.groupby("split"):
        rows.assign(label=rows["label"].map("|".join))[["text", "label"]].to_csv(folder / f"{split}.csv", index=False)
    return folder


def test_fit_takes_texts_with_several_labels(topic_sets_folder, tiny_bert_dir, tmp_path):
    summary = fit(
        str(topic_sets_folder),
        tmp_path / "b",
        models=[tiny_bert_dir],
        budget="5m",
        work=tmp_path / "w",
        label_separator="|",
        progress=False,
        say=lambda line: None,
    )
    assert summary["metric"] == "micro_f1" and set(summary["test"]) == {"micro_f1", "macro_f1", "subset_accuracy"}
    assert summary["label_issues"] is None  # label sets are not checked
    chosen = summary["candidates"][summary["chosen"]]
    assert chosen["dev"]["micro_f1"] >= max(chosen["dev"]["knn"]["micro_f1"], chosen["dev"]["linear"]["micro_f1"])
    assert 0 < chosen["dev"]["label_threshold"] < 1 and "labels from" in chosen["described"]
    bundle = Bundle.load(tmp_path / "b")
    assert bundle.multi_label and len(bundle.ids) == summary["references"] == 68  # no label names among label sets
    assert bundle.classifier.label_threshold == chosen["dev"]["label_threshold"]
    got = bundle.predict(["my card is lost and transfer money to my account bb"])[0]
    assert {"card", "transfer"} <= {label["label"] for label in got.labels}


@pytest.mark.parametrize(
    "rows, message",
    [
        ([("my card is lost", "card"), ("my card is gone", "card|")], "fit needs texts of at least two labels"),
        ([("my card is lost", "card"), ("send money", "|")], "rows have no labels"),
    ],
)
def test_bad_label_sets_fail_at_once_with_nothing_written(rows, message, tmp_path, tiny_bert_dir):
    data = tmp_path / "sets.csv"
    pd.DataFrame(rows * 6, columns=["text", "label"]).to_csv(data, index=False)
    with pytest.raises(CeaError, match=message):
        fit(
            str(data),
            tmp_path / "b",
            models=[tiny_bert_dir],
            work=tmp_path / "w",
            label_separator="|",
            progress=False,
            say=lambda line: None,
        )
    assert not (tmp_path / "b").exists() and not (tmp_path / "w").exists()


def test_fit_loads_each_encoder_state_once(intent_files, tiny_bert_dir, tmp_path, monkeypatch):
    """Every load of weights from disk is counted by its folder: the candidate (the frozen state) once, for the probe,
    the frozen choice, training's start and the bundle; the trained state stays in memory from training to the
    bundle (a reload only where the run reloaded its kept checkpoint). fit.json says where each split's embeddings
    of each state came from."""
    import collections

    from transformers import modeling_utils

    loads, original = collections.Counter(), modeling_utils.PreTrainedModel.from_pretrained.__func__

    def counting(cls, path, *args, **kwargs):
        loads[str(path).rstrip("/")] += 1
        return original(cls, path, *args, **kwargs)

    monkeypatch.setattr(modeling_utils.PreTrainedModel, "from_pretrained", classmethod(counting))
    summary = fit(
        intent_files,
        tmp_path / "b",
        models=[tiny_bert_dir],
        budget="5m",
        work=tmp_path / "w",
        progress=False,
        say=lambda line: None,
    )
    assert set(summary["candidates"]) == {"frozen", "trained"}
    assert loads == {tiny_bert_dir.rstrip("/"): 1}, loads
    states, ds = summary["states"], load_dataset(intent_files)
    assert states["frozen"] == {
        "model": tiny_bert_dir,
        "loads": 1,
        "train": "probe",
        "dev": "probe",
        "test": "encoded",
        "encoded": ds["test"]["text"].nunique(),
        "repeated": 0,
    }
    assert states["trained"]["loads"] == 0 and {states["trained"][s] for s in ("train", "dev", "test")} == {
        "training's judgements"
    }
    # the final judgement encoded every text of the three splits (and the label names) once with the kept weights
    texts = {*ds["train"]["text"], *ds["dev"]["text"], *ds["test"]["text"]}
    assert states["trained"]["repeated"] == 0 and states["trained"]["encoded"] >= len(texts)


def test_fit_reports_its_training_and_its_choice_to_one_mlflow_run_and_cards_the_bundle(
    intent_files, tiny_bert_dir, tmp_path, monkeypatch
):
    import mlflow
    import yaml

    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    summary = fit(
        intent_files,
        tmp_path / "b",
        models=[tiny_bert_dir],
        budget="5m",
        work=tmp_path / "w",
        progress=False,
        say=lambda line: None,
        report_to="mlflow",
    )
    runs = mlflow.search_runs(experiment_names=["Default"], output_format="list")
    assert len(runs) == 1  # the training's losses, judgements and figures, and the fit's choice, in one run
    data = runs[0].data
    assert data.metrics["fit_test_accuracy"] == pytest.approx(summary["test"]["accuracy"]) and "loss" in data.metrics
    assert data.params["fit_chosen"] == summary["chosen"] and data.params["cea.objective"] == summary["objective"]
    card = (tmp_path / "b" / "README.md").read_text()
    metrics = yaml.safe_load(card.split("---\n")[1])["model-index"][0]["results"][0]["metrics"]
    assert {m["type"]: m["value"] for m in metrics}["accuracy"] == pytest.approx(summary["test"]["accuracy"])


def test_fit_with_a_latency_ships_the_most_accurate_candidate_fast_enough(
    intent_files, tiny_bert_dir, tmp_path, monkeypatch
):
    from cea.bundle.speed import served_speed
    from cea.data.label_names import with_label_names
    from cea.encoders import load_encoder, num_layers
    from cea.encoders.build import is_static
    from cea.encoders.embeddings import token_lengths
    from cea.encoders.static import is_static_folder
    from cea.fitting import candidates as static_candidates

    def slow_transformers(folder, texts, device):  # the real timing, a transformer's 1 s slower
        served = served_speed(folder, texts, device, seconds=0.1, rounds=3)
        return {**served, "p99_ms": served["p99_ms"] + 1000 * (not is_static_folder(str(folder / "encoder")))}

    monkeypatch.setattr(static_candidates, "served_speed", slow_transformers)
    from cea.fitting.candidates import frontier
    from cea.reports import html as report_html

    drawn, draw = [], report_html.frontier_plot
    monkeypatch.setattr(
        report_html, "frontier_plot", lambda path, points, *a: drawn.append(points) or draw(path, points, *a)
    )
    out, work, asked = tmp_path / "bundle", tmp_path / "work", 900  # ms: the option, echoed in fit.json
    summary = fit(
        intent_files,
        out,
        models=[tiny_bert_dir],
        budget="5m",
        work=work,
        progress=False,
        say=lambda line: None,
        latency=asked,
    )
    candidates = summary["candidates"]
    statics = {"static-of-frozen", "static-of-trained", "static-aligned"}
    transformers = {"frozen", "trained", "truncated-1"}  # the tiny BERT's 2 blocks: 1 is the only shallower depth
    # in int8: the trained encoder and its cut, the frozen one only where it is better on dev than the trained one
    frozen_better = (
        summary["candidates"]["frozen"]["dev"]["accuracy"] > summary["candidates"]["trained"]["dev"]["accuracy"]
    )
    int8s = {f"{name}-int8" for name in transformers if name != "frozen" or frozen_better}
    assert ("frozen-int8 (the trained encoder's is as fast and no worse on dev)" in summary["skipped"]) != frozen_better
    dropped = {name for name in int8s if f"{name} (dev " in " ".join(summary["skipped"])}
    assert set(candidates) == transformers | statics | (int8s - dropped) and summary["latency_ms"] == asked
    for name, c in candidates.items():  # each candidate's bundle timed: 16 one-text requests, 64-text requests
        assert c["served"]["texts_per_second"] > 0 and 0 < c["served"]["p50_ms"] <= c["served"]["p99_ms"]
        assert (c["served"]["p99_ms"] > 1000) == (name not in statics)
    # truncated: the trained encoder cut to 1 block and trained again with the labels; int8: its ONNX export serves,
    # kept within 0.3 dev points of the encoder it came from
    assert num_layers(load_encoder(summary["states"]["truncated-1"]["model"])) == 1
    assert (work / "truncated-1" / "results.json").exists()
    for name in int8s - dropped:
        assert candidates[name]["dev"]["accuracy"] >= candidates[name[:-5]]["dev"]["accuracy"] - 0.3
        assert Bundle.load(work / "bundles" / name).manifest["backend"] == "onnx-int8"
    cut = summary["length_cut"]  # the 99th percentile of the train texts' tokens, kept where dev loses nothing
    train_texts = list(with_label_names(load_dataset(intent_files)["train"], "auto")["text"])  # as the fit reads it
    assert cut["tokens"] == int(np.percentile(token_lengths(load_encoder(tiny_bert_dir), train_texts), 99))
    assert cut["kept"] == (cut["dev_after"] >= cut["dev_before"])
    # the most accurate on dev of those whose p99 fits (ties: the faster): a static one, shipped as it was timed
    fitting = [name for name, c in candidates.items() if c["served"]["p99_ms"] <= asked]
    assert summary["chosen"] in statics and summary["chosen"] == max(
        fitting, key=lambda c: (candidates[c]["dev"]["accuracy"], -candidates[c]["served"]["p99_ms"])
    )
    assert summary["test"] == candidates[summary["chosen"]]["test"]
    assert summary["states"]["static-aligned"]["model"] == str(work / "static-train" / "model")
    bundle = Bundle.load(out)
    assert is_static(bundle.encoder) and len(bundle.ids) == 27
    assert [p.label for p in bundle.predict(["my card is lost aaa"])] == [
        p.label for p in Bundle.load(work / "bundles" / summary["chosen"]).predict(["my card is lost aaa"])
    ]
    assert (
        json.loads((out / "fit.json").read_text())["candidates"]["frozen"]["served"] == candidates["frozen"]["served"]
    )
    # the frontier: marked in fit.json, drawn in the report (accuracy against p99)
    assert {n for n, c in candidates.items() if c["served"].get("frontier")} == set(frontier(candidates, "accuracy"))
    assert summary["chosen"] in frontier(candidates, "accuracy")
    assert drawn and drawn[0] == {
        n: (c["served"]["p99_ms"], c["dev"]["accuracy"], bool(c["served"].get("frontier")))
        for n, c in candidates.items()
    }
    # a latency no candidate meets: the closest named, nothing written
    with pytest.raises(
        CeaError,
        match=r"latency 0\.001 ms is met by no candidate: the fastest, static-\S+ \(a static "
        r"encoder: no faster kind is built\), answers .* in [0-9.]+ ms \(p99\)",
    ):
        fit(
            intent_files,
            tmp_path / "none",
            models=[tiny_bert_dir],
            budget=0.01,
            work=tmp_path / "w2",
            progress=False,
            say=lambda line: None,
            latency=0.001,
        )
    assert not (tmp_path / "none").exists()
    with pytest.raises(CeaError, match="latency must be a positive number"):
        fit(intent_files, tmp_path / "none", models=[tiny_bert_dir], latency=0, progress=False)


@pytest.mark.parametrize(
    "points, expected",
    [
        ({"a": (90.0, 100.0), "b": (85.0, 10.0), "c": (80.0, 2.0)}, ["c", "b", "a"]),  # each buys accuracy with time
        ({"a": (90.0, 100.0), "b": (92.0, 10.0), "c": (80.0, 20.0)}, ["b"]),  # faster and better beats both
        ({"a": (90.0, 10.0), "b": (90.0, 10.0)}, ["a", "b"]),  # equal points beat neither
        ({"a": (90.0, 10.0), "b": (90.0, 5.0)}, ["b"]),  # as accurate and faster
    ],
)
def test_the_frontier_is_the_candidates_none_beats_on_both(points, expected):
    from cea.fitting.candidates import frontier

    candidates = {n: {"dev": {"accuracy": acc}, "served": {"p99_ms": p99}} for n, (acc, p99) in points.items()}
    assert frontier(candidates, "accuracy") == expected
