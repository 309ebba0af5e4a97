"""cea.batch.parts: a corpus cut into parts, each read on its own, gives the rows one stream reads, numbered alike."""

import pandas as pd
import pytest

from cea.batch.parts import Part, plan_parts, read_part
from cea.batch.streams import read_batches
from cea.errors import CeaError


@pytest.fixture
def corpus(tmp_path):
    (tmp_path / "a.txt").write_text("one\n\ntwo\nthree\r\nfour\nfive\n")
    (tmp_path / "b.jsonl").write_text("".join(f'{{"text": "t{i}", "k": {i}}}\n' for i in range(7)))
    (tmp_path / "c.csv").write_text('text,id\n"multi\nline, x",1\n\nplain,2\n"q ""x"" y",3\nz,4\n')
    pd.DataFrame({"text": [f"p{i}" for i in range(23)]}).to_parquet(tmp_path / "d.parquet", row_group_size=5)
    return tmp_path


@pytest.mark.parametrize(
    "name,sizes", [("a.txt", [2, 2, 1]), ("b.jsonl", [2, 2, 2, 1]), ("c.csv", [2, 2]), ("d.parquet", [2] * 11 + [1])]
)
def test_parts_read_alone_equal_one_stream(corpus, name, sizes):
    whole = pd.concat(read_batches(str(corpus / name), rows=1000)).reset_index(drop=True)
    parts = plan_parts(str(corpus / name), rows=2)
    assert [p.rows for p in parts] == sizes and [p.index for p in parts] == list(range(len(sizes)))
    got = pd.concat([read_part(p) for p in parts]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, whole)


def test_a_folder_numbers_rows_across_its_files_and_no_part_spans_two(corpus):
    (corpus / "c.csv").unlink()
    parts = plan_parts(str(corpus), rows=4)
    assert [(p.file.rsplit("/", 1)[1], p.rows, p.first) for p in parts] == [
        ("a.txt", 4, 0),
        ("a.txt", 1, 4),
        ("b.jsonl", 4, 5),
        ("b.jsonl", 3, 9),
    ] + [("d.parquet", 4, 12 + 4 * i) for i in range(5)] + [("d.parquet", 3, 32)]
    rows = pd.concat([read_part(p) for p in parts])["row"].tolist()
    assert rows == list(range(35))


def test_texts_in_memory_and_bad_input(corpus):
    parts = plan_parts(["x", "y", "z"], rows=2)
    assert read_part(parts[1]).to_dict("records") == [{"row": 2, "text": "z"}]
    (corpus / "empty.jsonl").write_text("\n\n")
    with pytest.raises(CeaError, match="empty.jsonl holds no rows"):
        plan_parts(str(corpus / "empty.jsonl"))
    with pytest.raises(CeaError, match="no column 'body' \\(it has text, k\\)"):
        read_part(plan_parts(str(corpus / "b.jsonl"))[0], "body")
    (corpus / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(CeaError, match="cannot read bad.parquet"):
        plan_parts(str(corpus / "bad.parquet"))
    with pytest.raises(CeaError, match="changed since its parts were planned"):
        read_part(Part(0, str(corpus / "a.txt"), 0, 9, 0))
    with pytest.raises(CeaError, match="the corpus has no texts"):
        plan_parts([])
