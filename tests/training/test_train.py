"""End-to-end training on a tiny random BERT: determinism, resume, and bad input."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import TrainerCallback

from cea.errors import CeaError
from cea.training import TrainConfig, train
from cea.training.config import configure


def _config(data, model, out, **kw):
    base = dict(
        dataset=data,
        model=model,
        output=str(out),
        objective="cea",
        batch_size=6,
        k_per_class=2,
        max_steps=6,
        save_steps=3,
        lr=1e-3,
        knn_k=3,
    )
    cea = dict(pairs="all", memory="bank", memory_size=16) if kw.get("objective", "cea") == "cea" else {}
    return configure(TrainConfig(), **{**base, **cea, **kw})


class _Kill(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 4:
            raise KeyboardInterrupt


class _KillInThirdEpoch(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.epoch > 2:
            raise KeyboardInterrupt


def test_a_resumed_run_selects_the_best_epoch_among_every_epoch(topics_csv, tiny_bert_dir, tmp_path):
    def config(out, **kw):
        return _config(
            topics_csv, tiny_bert_dir, tmp_path / out, max_steps=-1, epochs=3, save_steps=None, select="best", **kw
        )

    whole = train(config("whole"), progress=False)
    assert len(whole["dev_history"]) == 3
    # only the last checkpoint and the best epoch's are kept
    steps = [h["steps"] for h in whole["dev_history"]]
    best = max(whole["dev_history"], key=lambda h: h["dev_knn_accuracy"])["steps"]
    kept = sorted(int(f.name.split("-")[1]) for f in (tmp_path / "whole" / "checkpoints").glob("checkpoint-*"))
    assert kept == sorted({best, steps[-1]})
    with pytest.raises(KeyboardInterrupt):
        train(config("stopped"), progress=False, callbacks=[_KillInThirdEpoch()])
    resumed = train(config("stopped", resume=True), progress=False)
    assert [h["steps"] for h in resumed["dev_history"]] == [h["steps"] for h in whole["dev_history"]]
    for a, b in zip(resumed["dev_history"], whole["dev_history"]):
        assert a["dev_knn_accuracy"] == pytest.approx(b["dev_knn_accuracy"])
    assert resumed["metrics"] == whole["metrics"]


def test_a_run_resumes_only_under_the_config_it_started_with(topics_csv, tiny_bert_dir, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        train(_config(topics_csv, tiny_bert_dir, tmp_path / "c"), progress=False, callbacks=[_Kill()])
    record = json.loads((tmp_path / "c" / "checkpoints" / "checkpoint-3" / "run_config.json").read_text())
    assert record["lr"] == 1e-3 and record["options"]["memory_size"] == 16 and "resume" not in record
    for changed, message in [
        ({"lr": 2e-3}, "resume: lr is 0.002 but the run in .* started with 0.001"),
        ({"memory_size": 8}, "resume: memory_size is 8 but .* started with 16"),
        ({"label_names": "off"}, "resume: label_names is 'off' but .* started with 'auto'"),
    ]:
        with pytest.raises(CeaError, match=message):
            train(_config(topics_csv, tiny_bert_dir, tmp_path / "c", resume=True, **changed), progress=False)
    assert not (tmp_path / "c" / "model").exists()
    # where the work runs may change; a default named is the default left out
    resumed = train(
        _config(
            topics_csv, tiny_bert_dir, tmp_path / "c", resume=True, device="cpu", chunk_size=None, reduction="mean"
        ),
        progress=False,
    )
    assert resumed["steps"] == 6


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model" / "model.safetensors"))


def test_same_seed_same_metrics_and_a_resumed_run_ends_the_same(topics_csv, tiny_bert_dir, tmp_path):
    first = train(_config(topics_csv, tiny_bert_dir, tmp_path / "a"), progress=False)
    second = train(_config(topics_csv, tiny_bert_dir, tmp_path / "b"), progress=False)
    assert first["metrics"] == second["metrics"] and first["steps"] == 6
    with pytest.raises(KeyboardInterrupt):
        train(_config(topics_csv, tiny_bert_dir, tmp_path / "c"), progress=False, callbacks=[_Kill()])
    assert (tmp_path / "c" / "checkpoints" / "checkpoint-3" / "cea_memory.safetensors").exists()
    assert not (tmp_path / "c" / "model").exists()
    resumed = train(_config(topics_csv, tiny_bert_dir, tmp_path / "c", resume=True), progress=False)
    assert resumed["metrics"] == first["metrics"]
    kept = [f.name for f in (tmp_path / "a" / "checkpoints").glob("checkpoint-*")]
    assert kept == ["checkpoint-6"] == [f"checkpoint-{first['kept_step']}"]  # the best judged is the last here
    for name, tensor in _weights(tmp_path / "a").items():
        torch.testing.assert_close(_weights(tmp_path / "c")[name], tensor)
    saved = json.loads((tmp_path / "a" / "results.json").read_text())
    assert saved["metrics"] == first["metrics"] and saved["config"]["objective"] == "cea"
    # three topics that share no words: anything below 100 means labels or neighbours got mixed up
    assert first["metrics"]["test"]["knn_accuracy"] == first["metrics"]["test"]["knn_macro_f1"] == 100.0


def test_softmax_reports_head_and_knn(topics_csv, tiny_bert_dir, tmp_path):
    result = train(_config(topics_csv, tiny_bert_dir, tmp_path / "s", objective="softmax"), progress=False)
    assert {"knn_accuracy", "knn_macro_f1", "head_accuracy"} <= set(result["metrics"]["test"])
    from sentence_transformers import SentenceTransformer

    loaded = SentenceTransformer(str(tmp_path / "s" / "model"), device="cpu")
    assert loaded.encode(["my card"]).shape == (1, 32)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"objective": "softmaxx"}, "did you mean softmax"),
        ({"objective": "softmax", "memory": "bank"}, "option memory does not apply to objective softmax"),
        ({"memory_size": 0}, "memory_size must be at least 1, got 0"),
        ({"k_per_class": 30}, "k_per_class 30 must divide the batch size 6"),
    ],
)
def test_bad_options(topics_csv, tiny_bert_dir, tmp_path, options, message):
    with pytest.raises(CeaError, match=message):
        train(_config(topics_csv, tiny_bert_dir, tmp_path / "x", **options), progress=False)


def test_single_class(tmp_path, tiny_bert_dir):
    path = tmp_path / "one.csv"
    pd.DataFrame({"text": [f"my card {i}" for i in range(20)], "label": ["card"] * 20}).to_csv(path, index=False)
    with pytest.raises(CeaError, match="single class"):
        train(_config(str(path), tiny_bert_dir, tmp_path / "o"), progress=False)


def test_nan_loss_stops_with_the_step_and_keeps_the_checkpoint(topics_csv, tiny_bert_dir, tmp_path, monkeypatch):
    import cea.objectives.cea as cea_mod

    real = cea_mod.cea_pair_loss
    calls = {"n": 0}

    def poisoned(*args, **kwargs):
        calls["n"] += 1
        value = real(*args, **kwargs)
        return value * float("nan") if calls["n"] == 5 else value

    monkeypatch.setattr(cea_mod, "cea_pair_loss", poisoned)
    with pytest.raises(CeaError, match=r"NaN or infinite at step 5; lower --lr .*checkpoint-3"):
        train(_config(topics_csv, tiny_bert_dir, tmp_path / "n"), progress=False)


def test_a_failed_save_leaves_no_model_folder(topics_csv, tiny_bert_dir, tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer

    real = SentenceTransformer.save

    def failing(self, path, *args, **kwargs):
        if "/model" in str(path) or str(path).endswith("part"):
            real(self, path, *args, **kwargs)
            raise OSError("No space left on device")
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(SentenceTransformer, "save", failing)
    with pytest.raises(CeaError, match="nothing was written there"):
        train(_config(topics_csv, tiny_bert_dir, tmp_path / "f"), progress=False)
    assert not (tmp_path / "f" / "model").exists()
    assert not (tmp_path / "f" / "results.json").exists()


def test_multitask_with_an_aux_column(tmp_path, tiny_bert_dir):
    rows = [(f"my card is lost {i}", "card", f"pub{i % 2}") for i in range(20)]
    rows += [(f"transfer money to my account {i}", "transfer", f"pub{i % 2}") for i in range(20)]
    path = tmp_path / "news.csv"
    pd.DataFrame(rows, columns=["text", "label", "publisher"]).to_csv(path, index=False)
    result = train(
        _config(str(path), tiny_bert_dir, tmp_path / "m", aux_label_column="publisher", max_steps=2), progress=False
    )
    assert result["config"]["aux_label_column"] == "publisher" and result["steps"] == 2
    train(_config(str(path), tiny_bert_dir, tmp_path / "plain", max_steps=2), progress=False)

    def first_loss(folder):
        return next(
            r["loss"] for r in map(json.loads, (folder / "training_log.jsonl").read_text().splitlines()) if "loss" in r
        )

    # same seed, same first batch: the flipped publisher term (cos^2 of same-publisher pairs) adds to the loss
    assert first_loss(tmp_path / "m") > first_loss(tmp_path / "plain") + 0.05
    with pytest.raises(CeaError, match="no column 'outlet'"):
        train(_config(str(path), tiny_bert_dir, tmp_path / "m2", aux_label_column="outlet"), progress=False)


def test_truncation_and_select_best(topics_csv, tiny_bert_dir, tmp_path):
    result = train(
        _config(
            topics_csv, tiny_bert_dir, tmp_path / "t", layers=1, max_steps=-1, epochs=2, save_steps=None, select="best"
        ),
        progress=False,
    )
    config = json.loads((tmp_path / "t" / "model" / "config.json").read_text())
    assert config["num_hidden_layers"] == 1
    assert len(result["dev_history"]) == 2  # dev kNN after each epoch
    best = max(h["dev_knn_accuracy"] for h in result["dev_history"])
    assert result["metrics"]["dev"]["knn_accuracy"] == pytest.approx(100 * best, abs=0.01)


def test_a_run_cut_at_max_seq_length_trains_and_saves_the_cut(topics_csv, tiny_bert_dir, tmp_path):
    from cea.encoders import load_encoder

    own = load_encoder(tiny_bert_dir).max_seq_length
    long_text = " ".join(["words"] * 200)  # longer than the model reads
    for tokens, kept in ((4, 4), (own + 100, own)):  # never above the model's own
        out = tmp_path / f"cut{tokens}"
        result = train(_config(topics_csv, tiny_bert_dir, out, max_steps=2, max_seq_length=tokens), progress=False)
        model = load_encoder(str(out / "model"))
        assert result["config"]["max_seq_length"] == tokens and model.max_seq_length == kept
        assert model.tokenize([long_text])["input_ids"].shape[1] == kept


def test_compare_summarises_mean_and_std(topics_csv, tiny_bert_dir, tmp_path):
    import numpy as np

    from cea.training.compare import compare, parse_settings

    base = _config(
        topics_csv, tiny_bert_dir, tmp_path, max_steps=2, save_steps=None, memory="none", pairs="sampled", lr=None
    )
    settings = parse_settings("softmax,cea[pairs=all,memory=bank,memory_size=8]")
    summary = compare(base, settings, [0, 1], tmp_path / "grid", progress=False)
    assert [r["setting"] for r in summary["rows"]] == ["frozen", "softmax", "cea[pairs=all,memory=bank,memory_size=8]"]
    accs = [
        json.loads((tmp_path / "grid" / "softmax" / f"seed-{s}" / "results.json").read_text())["metrics"]["test"][
            "knn_accuracy"
        ]
        for s in (0, 1)
    ]
    row = summary["rows"][1]
    assert row["runs"] == 2 and row["accuracy_mean"] == pytest.approx(np.mean(accs), abs=0.01)
    assert row["accuracy_std"] == pytest.approx(np.std(accs), abs=0.01)
    assert (tmp_path / "grid" / "compare.json").exists()
    # no lr in the base or the setting: each objective's own (registry), recorded per row
    assert base.lr is None and (row["lr"], summary["rows"][2]["lr"]) == (5e-5, 2e-5)
    assert "lr" not in summary["rows"][0]  # the frozen row trained nothing


def test_the_trainer_is_asked_for_the_device_and_precision_the_run_resolved(
    topics_csv, tiny_bert_dir, tmp_path, monkeypatch
):
    """No hard-coded CPU: the trainer is asked for the CPU only where the run resolved it; bf16 and fp16
    go through the trainer's own flags; a CUDA device never forces the CPU."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    from cea.training.arguments import trainer_device_args

    flags = ("use_cpu", "bf16", "fp16")
    assert [trainer_device_args("cuda", "bf16")[f] for f in flags] == [False, True, False]
    assert [trainer_device_args("cuda:1", "fp16")[f] for f in flags] == [False, False, True]
    assert [trainer_device_args("cpu", "fp32")[f] for f in flags] == [True, False, False]
    # on a GPU: batches tokenised by loader processes and copied without waiting, no per-step NaN filter
    gpu, cpu = trainer_device_args("cuda", "fp32"), trainer_device_args("cpu", "fp32")
    assert gpu["accelerator_config"] == {"non_blocking": True} and gpu["dataloader_num_workers"] > 0
    assert not gpu["logging_nan_inf_filter"] and "accelerator_config" not in cpu and cpu["dataloader_num_workers"] == 0
    assert trainer_device_args("mps", "fp32")["use_cpu"] is False
    asked = []
    original = SentenceTransformerTrainingArguments.__init__

    def spy(self, *args, **kwargs):
        if "use_cpu" in kwargs:  # cea's own arguments (the library builds defaults of its own too)
            asked.append((kwargs["use_cpu"], kwargs["bf16"]))
        original(self, *args, **kwargs)

    monkeypatch.setattr(SentenceTransformerTrainingArguments, "__init__", spy)
    result = train(
        _config(
            topics_csv, tiny_bert_dir, tmp_path / "bf16", max_steps=1, save_steps=None, device="cpu", precision="bf16"
        ),
        progress=False,
    )
    assert asked == [(True, True)]
    assert (result["config"]["device"], result["config"]["precision"]) == ("cpu", "bf16")
    parts = list((tmp_path / "bf16" / "embeddings").glob("*/part-*.npz"))  # the kept weights' embeddings
    assert len(parts) == 1 and np.load(parts[0])["vectors"].dtype == np.float32  # stay fp32


def test_open_intent_hides_a_class_from_training_and_reports_open_set_scores(topics_csv, tiny_bert_dir, tmp_path):
    result = train(_config(topics_csv, tiny_bert_dir, tmp_path / "o", unknown_classes=0.34), progress=False)
    hidden = result["unknown_classes"]
    assert len(hidden) == 1 and hidden[0] not in result["labels"] and len(result["labels"]) == 2
    from cea.data import load_dataset

    ds = load_dataset(topics_csv)
    # the known labels' texts and their names as one example each (card, geo, transfer are words); the hidden
    # label's name stays out with it
    assert result["n_train"] == int((ds["train"]["label"] != hidden[0]).sum()) + 2
    test = result["metrics"]["test"]
    assert {
        "open_accuracy",
        "open_macro_f1",
        "known_accuracy",
        "unknown_recall",
        "unknown_precision",
        "unknown_threshold",
    } <= set(test)
    # three topics that share no words: the hidden one's texts are far from both known ones
    assert test["unknown_recall"] == 100.0
    n_unknown = int((ds["test"]["label"] == hidden[0]).sum())
    n_known = len(ds["test"]) - n_unknown
    assert test["open_accuracy"] * len(ds["test"]) == pytest.approx(
        test["known_accuracy"] * n_known + test["unknown_recall"] * n_unknown, abs=1
    )
    assert result["metrics"]["dev"]["unknown_threshold"] == test["unknown_threshold"]


@pytest.mark.parametrize("objective", ["cea", "supcon"])
def test_texts_with_several_labels_train_and_are_judged_per_label(topic_sets_jsonl, tiny_bert_dir, tmp_path, objective):
    from cea.evaluation.multilabel import multilabel_scores

    extra = {"memory": "none"} if objective == "cea" else {}
    result = train(
        _config(topic_sets_jsonl, tiny_bert_dir, tmp_path / objective, objective=objective, **extra), progress=False
    )
    assert result["kind"] == "labelsets" and result["labels"] == ["card", "geo", "transfer"]
    test = result["metrics"]["test"]
    assert set(test) == {f"{c}_{m}" for c in ("knn", "linear") for m in ("micro_f1", "macro_f1", "subset_accuracy")} | {
        "threshold",
        "linear_threshold",
    }
    saved = json.loads((tmp_path / objective / "label_sets.json").read_text())  # the linear head's answers
    assert saved["classifier"] == "linear"
    assert saved["threshold"] == test["linear_threshold"] == result["metrics"]["dev"]["linear_threshold"]
    again = multilabel_scores([tuple(p) for p in saved["predicted"]], [tuple(g) for g in saved["gold"]])
    assert again["micro_f1"] == test["linear_micro_f1"] and again["per_label_f1"] == saved["per_label_f1"]
    assert any(len(g) == 2 for g in saved["gold"])


def test_several_labels_refuse_what_needs_one(topic_sets_jsonl, tiny_bert_dir, tmp_path):
    with pytest.raises(CeaError, match="memory bank holds one label per text"):
        train(_config(topic_sets_jsonl, tiny_bert_dir, tmp_path / "a"), progress=False)
    with pytest.raises(CeaError, match="--shots, --imbalance, --unknown-classes and --aux-label-column take one"):
        train(_config(topic_sets_jsonl, tiny_bert_dir, tmp_path / "b", memory="none", shots=2), progress=False)
    with pytest.raises(CeaError, match="--objective .*needs labelled texts"):
        train(_config(topic_sets_jsonl, tiny_bert_dir, tmp_path / "c", objective="softmax"), progress=False)


def test_compare_and_layer_sweeps_refuse_texts_with_several_labels(topic_sets_jsonl, tiny_bert_dir, tmp_path):
    from cea.training.compare import compare
    from cea.training.sweep import sweep_layers

    base = TrainConfig(dataset=topic_sets_jsonl, model=tiny_bert_dir)
    with pytest.raises(CeaError, match="cea compare takes texts with one label each"):
        compare(base, [("cea", {})], [0], tmp_path / "c")
    with pytest.raises(CeaError, match="sweep-layers takes scored pairs or texts with one label each"):
        sweep_layers(base, [1], [0], tmp_path / "s")
    assert not (tmp_path / "c").exists() and not (tmp_path / "s").exists()


def test_the_default_run_trains_softmax_from_the_probe(topics_csv, tiny_bert_dir, tmp_path):
    config = TrainConfig(
        dataset=topics_csv, model=tiny_bert_dir, output=str(tmp_path / "d"), batch_size=6, k_per_class=2, max_steps=2
    )
    result = train(config, progress=False)
    assert result["config"]["objective"] == "softmax" and result["config"]["lr"] == 5e-5
    assert result["config"]["options"] == {"head_init": "probe"}
    # the probe's head classifies the three topics before any step; two small steps keep it there
    assert result["metrics"]["test"]["head_accuracy"] == 100.0


def test_a_small_set_trains_more_epochs_unless_told(topics_csv, tiny_bert_dir, tmp_path):
    config = TrainConfig(dataset=topics_csv, model=tiny_bert_dir, batch_size=6, k_per_class=2)
    result = train(dataclasses.replace(config, output=str(tmp_path / "d"), patience=0, select="last"), progress=False)
    # softmax's floor of 800 steps: a few steps an epoch on this tiny set, so its cap of 10 epochs
    assert result["n_train"] // 6 < 80 and result["config"]["epochs"] == 10 and result["epochs"] == 10
    assert [h["epoch"] for h in result["dev_history"]] == [4, 8, 10]  # nothing chooses: about three judgements
    told = train(
        dataclasses.replace(config, output=str(tmp_path / "e"), epochs=2, patience=0, select="last"), progress=False
    )
    assert told["config"]["epochs"] == told["epochs"] == 2 and [h["epoch"] for h in told["dev_history"]] == [1, 2]
    # by default the 10 epochs are the cap: the probe's head is right on dev from the start, so it stops at the third
    stopped = train(dataclasses.replace(config, output=str(tmp_path / "f")), progress=False)
    assert stopped["config"]["epochs"] == 10 and stopped["stopped_early"] and len(stopped["dev_history"]) == 3
    assert stopped["epochs"] < 5 and stopped["kept_step"] == stopped["dev_history"][0]["steps"]


def test_a_run_cut_by_max_steps_is_judged_on_dev_at_the_epochs_it_runs(topics_csv, tiny_bert_dir, tmp_path):
    config = TrainConfig(
        dataset=topics_csv,
        model=tiny_bert_dir,
        batch_size=6,
        k_per_class=2,
        output=str(tmp_path),
        patience=0,
        select="last",
    )
    per_epoch = train(dataclasses.replace(config, output=str(tmp_path / "one"), epochs=1), progress=False)["steps"]
    result = train(dataclasses.replace(config, max_steps=2 * per_epoch + 1), progress=False)
    # ten epochs by the rule, cut to a little over two: judged after the first, the second and the third (cut) one
    assert result["config"]["epochs"] == 10 and result["steps"] == 2 * per_epoch + 1
    assert [h["steps"] for h in result["dev_history"]] == [per_epoch, 2 * per_epoch, 2 * per_epoch + 1]


def test_training_stops_on_a_flat_dev_curve_and_keeps_the_best_weights(
    topics_csv, tiny_bert_dir, tmp_path, monkeypatch
):
    from safetensors.torch import load_file

    from cea.training import tasks

    curve, seen = [50.0, 60.0, 70.0, 65.0, 70.0, 90.0, 95.0], []
    query = "layer.0.attention.self.query.weight"  # a weight softmax trains (not the frozen word embeddings)

    def weights(model):
        return next(p for n, p in model.named_parameters() if n.endswith(query)).detach().clone()

    def scripted(fn):  # the dev judge answers from the curve, noting the weights it judged
        def judge(model):
            seen.append(weights(model))
            return {"head_accuracy": curve[len(seen) - 1]}

        return judge

    real = tasks.DevEvaluator.__init__
    monkeypatch.setattr(tasks.DevEvaluator, "__init__", lambda self, fn, *a, **k: real(self, scripted(fn), *a, **k))
    config = _config(
        topics_csv,
        tiny_bert_dir,
        tmp_path / "e",
        objective="softmax",
        max_steps=-1,
        epochs=10,
        save_steps=None,
        patience=2,
    )
    result = train(config, progress=False)
    per_epoch = result["n_train"] // 6
    half = -(-per_epoch // 2)
    # judged every half epoch from softmax's own 3 epochs on; 70 at the third judgement, then two without better
    judged = [s for s in range(half, 100 * half, half) if s >= 3 * per_epoch][:5]
    assert [h["steps"] for h in result["dev_history"]] == judged
    assert result["stopped_early"] and result["steps"] == judged[4] and result["kept_step"] == judged[2]
    assert result["config"]["select"] == "best" and len(seen) == 5
    kept = load_file(str(tmp_path / "e" / "model" / "model.safetensors"))
    first = next(v for k, v in kept.items() if k.endswith(query))
    torch.testing.assert_close(first, seen[2].cpu())  # the third judgement's weights, not the last
    assert not torch.equal(seen[2], seen[4])
    # --select last keeps the weights where it stopped; patience 0 runs every epoch
    seen.clear()
    last = train(dataclasses.replace(config, output=str(tmp_path / "l"), select="last"), progress=False)
    assert last["kept_step"] == last["steps"] == judged[4]
    seen.clear()
    curve[:] = [50.0 + i for i in range(30)]
    whole = train(dataclasses.replace(config, output=str(tmp_path / "w"), patience=0, epochs=2), progress=False)
    assert not whole["stopped_early"] and whole["steps"] == 2 * per_epoch


def test_frozen_embeddings_and_blocks_stay_and_the_others_train(topics_csv, tiny_bert_dir, tmp_path):
    from safetensors.torch import load_file

    base = load_file(f"{tiny_bert_dir}/model.safetensors")
    train(_config(topics_csv, tiny_bert_dir, tmp_path / "f", save_steps=None, frozen_layers=1), progress=False)
    tuned = load_file(str(next((tmp_path / "f" / "model").glob("**/model.safetensors"))))
    same = {
        name: torch.equal(tuned[key], base[next(k for k in base if k.endswith(name))])
        for name in (
            "word_embeddings.weight",
            "layer.0.attention.self.query.weight",
            "layer.1.attention.self.query.weight",
        )
        for key in [next(k for k in tuned if k.endswith(name))]
    }
    assert same == {
        "word_embeddings.weight": True,
        "layer.0.attention.self.query.weight": True,
        "layer.1.attention.self.query.weight": False,
    }


def test_the_dev_figure_that_kept_the_weights_is_the_shipped_bundles(tiny_bert_dir, tmp_path):
    """A softmax run keeps the weights whose dev accuracy by the classifier that ships from it (the bundle's linear
    head, the run's own trained head: Classifier(head="trained")) is best; a bundle of that encoder and head answers
    dev with that same accuracy."""
    from cea.bundle import Bundle
    from cea.data import load_dataset
    from cea.knn.decision import Classifier

    rng = np.random.default_rng(0)  # words shared by every label, a label's own word in 60% of its texts
    words, rows = [f"w{i}" for i in range(30)], []
    for i in range(150):
        label = ["card", "cash", "trip"][i % 3]
        cue = label if rng.random() < 0.6 else ["card", "cash", "trip"][rng.integers(3)]
        rows.append((" ".join([*rng.choice(words, 5), cue, *rng.choice(words, 3)]), label))
    noisy_csv = str(tmp_path / "noisy.csv")
    pd.DataFrame(rows, columns=["text", "label"]).to_csv(noisy_csv, index=False)
    result = train(
        _config(
            noisy_csv,
            tiny_bert_dir,
            tmp_path / "r",
            objective="softmax",
            max_steps=-1,
            epochs=8,
            save_steps=None,
            select="best",
            lr=2e-3,
            patience=0,
            head_init="random",
        ),
        progress=False,
    )
    judged = {h["steps"]: h["dev_head_accuracy"] for h in result["dev_history"]}
    assert len(set(judged.values())) >= 2 and judged[result["kept_step"]] == max(judged.values())
    ds = load_dataset(noisy_csv)
    with pytest.raises(CeaError, match="head='trained' needs one label per text and the head"):
        Bundle.create(
            tmp_path / "x",
            tiny_bert_dir,
            list(ds["train"]["text"]),
            list(ds["train"]["label"]),
            classifier=Classifier(head="trained"),
            progress=False,
        )
    bundle = Bundle.create(
        tmp_path / "b",
        str(tmp_path / "r" / "model"),
        list(ds["train"]["text"]),
        list(ds["train"]["label"]),
        classifier=Classifier(head="trained"),
        progress=False,
        backend="torch",
    )
    answers = [p.label for p in bundle.predict(list(ds["dev"]["text"]))]
    shipped = float(np.mean(np.array(answers) == ds["dev"]["label"].to_numpy()))
    assert shipped == pytest.approx(judged[result["kept_step"]], abs=1e-4)
    assert Classifier.from_manifest(json.loads((tmp_path / "b" / "manifest.json").read_text())).head == "trained"
