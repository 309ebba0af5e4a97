"""Fixtures of the training tests: a small labelled set of three topics."""

import pandas as pd
import pytest


@pytest.fixture
def topics_csv(tmp_path):
    rows = []
    for i in range(20):
        rows.append((f"my card is lost {'a' * (i % 5 + 1)} {i}", "card"))
        rows.append((f"transfer money to my account {'b' * (i % 5 + 1)}", "transfer"))
        rows.append((f"what is the capital city of the country {'c' * (i % 5 + 1)}", "geo"))
    path = tmp_path / "topics.csv"
    pd.DataFrame(rows, columns=["text", "label"]).to_csv(path, index=False)
    return str(path)
