"""cea.training.config: the run's defaults from its data and objective."""

import pandas as pd
import pytest

from cea.errors import CeaError
from cea.training import TrainConfig
from cea.training.config import configure


def test_the_objective_lr_and_epochs_follow_the_data_unless_given(topics_csv, topic_sets_jsonl, tmp_path):
    from cea.data import load_dataset
    from cea.training.config import with_defaults

    one, several = load_dataset(topics_csv), load_dataset(topic_sets_jsonl)
    picked = with_defaults(TrainConfig(), one)
    assert (picked.objective, picked.lr, picked.epochs) == ("softmax", 5e-5, None)  # epochs: once the size is known
    # softmax: 3 epochs, more (at most 10) where 3 give fewer than 800 steps: 9,080 texts in batches of 32 are 283
    # steps an epoch (3 epochs: 849), 4,953 are 154 (800 steps: 5.2 epochs, so 6), 693 are 21 (38 epochs: 10)
    sizes = (30_000, 9_080, 4_953, 693, 40)
    assert [with_defaults(TrainConfig(), one, n).epochs for n in sizes] == [3, 3, 6, 10, 10]
    assert with_defaults(TrainConfig(batch_size=16), one, 4_953).epochs == 6  # as many texts: 1,600 steps of 16
    assert with_defaults(TrainConfig(epochs=2), one, 693).epochs == 2  # given: kept
    picked = with_defaults(TrainConfig(), several, 693)
    assert (picked.objective, picked.lr, picked.epochs) == ("cea", 2e-5, 1)  # cea: one epoch whatever the size
    picked = with_defaults(TrainConfig(objective="cea", epochs=2), one)
    assert (picked.objective, picked.lr, picked.epochs) == ("cea", 2e-5, 2)
    assert with_defaults(TrainConfig(lr=1e-5), one).lr == 1e-5
    # frozen layers: softmax keeps the word embeddings (0), cea trains every weight (None), given: kept
    assert [with_defaults(TrainConfig(objective=o), one).frozen_layers for o in ("auto", "cea")] == [0, None]
    assert [with_defaults(TrainConfig(frozen_layers=f), one).frozen_layers for f in (None, 2)] == [None, 2]
    with pytest.raises(CeaError, match="pairs does not apply to objective softmax"):
        with_defaults(configure(TrainConfig(), pairs="all"), one)
    pairs = tmp_path / "pairs.csv"
    pd.DataFrame(
        {"text1": ["a cat", "a dog"] * 5, "text2": ["a cat sits", "a car"] * 5, "score": [4.5, 1.0] * 5}
    ).to_csv(pairs, index=False)
    with pytest.raises(CeaError, match="name what to train with, --objective cosine-regression"):
        with_defaults(TrainConfig(), load_dataset(str(pairs)))


def test_a_gpu_trains_larger_batches_at_a_scaled_lr_on_as_many_texts(topics_csv, monkeypatch):
    from cea.data import load_dataset
    from cea.defaults import LR_SCALE_POWER
    from cea.encoders import device
    from cea.training import config

    one = load_dataset(topics_csv)
    monkeypatch.setattr(
        config, "resolve_device", lambda requested: "cuda" if requested in (None, "auto") else requested
    )
    gpu = device.TRAIN_BATCH["cuda"]
    picked = config.with_defaults(TrainConfig(), one, 4_953)
    assert picked.batch_size == gpu and picked.lr == pytest.approx(5e-5 * (gpu / 32) ** LR_SCALE_POWER)
    # softmax's 800 steps are of 32 texts: 25,600 texts, 5.2 epochs of 4,953 (6) whatever the batch
    assert picked.epochs == 6 == config.with_defaults(TrainConfig(device="cpu"), one, 4_953).epochs
    cpu = config.with_defaults(TrainConfig(device="cpu"), one)
    assert (cpu.batch_size, cpu.lr) == (32, 5e-5)
    given = config.with_defaults(TrainConfig(batch_size=64, lr=1e-5), one)
    assert (given.batch_size, given.lr) == (64, 1e-5)  # given: kept
