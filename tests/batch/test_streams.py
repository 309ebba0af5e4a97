"""cea.batch.streams: a corpus read in batches from any of the four formats, a folder or a glob; results written
batch by batch and put in place only when complete."""

import pandas as pd
import pytest

from cea.batch.streams import BatchWriter, read_batches
from cea.errors import CeaError


@pytest.fixture
def corpus(tmp_path):
    frame = pd.DataFrame(
        {"id": [f"t{i}" for i in range(7)], "body": [f"text number {i}" for i in range(7)], "lang": ["en"] * 7}
    )
    folder = tmp_path / "corpus"
    folder.mkdir()
    frame.iloc[:3].to_csv(folder / "a.csv", index=False)
    frame.iloc[3:5].to_json(folder / "b.jsonl", orient="records", lines=True)
    frame.iloc[5:].to_parquet(folder / "c.parquet")
    return folder, frame


def test_a_folder_of_three_formats_is_read_in_batches_with_every_column(corpus):
    folder, frame = corpus
    batches = list(read_batches(str(folder), "body", rows=2))
    assert [len(b) for b in batches] == [2, 1, 2, 2]  # a batch never spans two files
    whole = pd.concat(batches, ignore_index=True)
    assert whole["text"].tolist() == frame["body"].tolist() and whole["id"].tolist() == frame["id"].tolist()
    assert whole["lang"].tolist() == ["en"] * 7 and "row" not in whole  # the input's id kept, no row number
    assert pd.concat(read_batches(str(folder / "*.csv"), "body"))["text"].tolist() == frame["body"][:3].tolist()


def test_lines_of_text_get_row_numbers_across_files(tmp_path):
    (tmp_path / "x1.txt").write_text("one\n\ntwo\nthree\n")
    (tmp_path / "x2.txt").write_text("four\n")
    got = pd.concat(read_batches(str(tmp_path / "x*.txt"), rows=2), ignore_index=True)
    assert got["row"].tolist() == [0, 1, 2, 3] and got["text"].tolist() == ["one", "two", "three", "four"]


def test_bad_inputs_are_named(corpus, tmp_path):
    folder, _ = corpus
    with pytest.raises(CeaError, match=r"no column 'text' \(it has id, body, lang\)"):
        list(read_batches(str(folder / "a.csv")))
    (tmp_path / "empty.csv").write_text("text\n")
    with pytest.raises(CeaError, match="empty.csv holds no rows"):
        list(read_batches(str(tmp_path / "empty.csv")))
    with pytest.raises(CeaError, match="does not exist"):
        list(read_batches(str(tmp_path / "missing.csv")))
    (tmp_path / "torn.parquet").write_bytes(b"not parquet")
    with pytest.raises(CeaError, match="cannot read torn.parquet"):
        list(read_batches(str(tmp_path / "torn.parquet")))


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_the_output_appears_only_when_complete(tmp_path, suffix):
    path = tmp_path / f"out{suffix}"
    with pytest.raises(RuntimeError):
        with BatchWriter(path) as writer:
            writer.write(pd.DataFrame({"row": [0, 1], "label": ["a", "b"]}))
            raise RuntimeError("the run fails midway")
    assert not path.exists() and not list(tmp_path.iterdir())
    with BatchWriter(path) as writer:
        for start in (0, 2):
            writer.write(pd.DataFrame({"row": [start, start + 1], "label": ["a", "b"]}))
    back = (
        pd.read_json(path, lines=True)
        if suffix == ".jsonl"
        else pd.read_csv(path)
        if suffix == ".csv"
        else pd.read_parquet(path)
    )
    assert back["row"].tolist() == [0, 1, 2, 3] and back["label"].tolist() == ["a", "b", "a", "b"]
    with pytest.raises(CeaError, match="exists; pass --overwrite"):
        BatchWriter(path)
    BatchWriter(path, overwrite=True).abort()
    assert path.exists()  # an aborted overwrite leaves the old output
    with pytest.raises(CeaError, match=".jsonl, .csv or .parquet"):
        BatchWriter(tmp_path / "out.xlsx")
