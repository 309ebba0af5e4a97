import pandas as pd
import pytest

from cea.data.label_names import name_examples, name_text, with_label_names
from cea.errors import CeaError


@pytest.mark.parametrize(
    "name, words",
    [
        ("lost_or_stolen_card", "lost or stolen card"),
        ("Refund_not_showing_up", "refund not showing up"),
        ("reverted_card_payment?", "reverted card payment"),
        ("AmericanFootballPlayer", "american football player"),
        ("Business & Finance", "business and finance"),
        ("comp.sys.mac.hardware", "comp sys mac hardware"),
        ("Überweisung_fehlt", "überweisung fehlt"),
        ("no", "no"),
    ],
)
def test_names_made_of_words_read_as_words(name, words):
    assert name_text(name) == words


@pytest.mark.parametrize("name", ["ABBR", "HUM", "LABEL_3", "0", "12", "w2", "rollover_401k", "x", "c#", "", "__"])
def test_codes_are_not_words(name):
    assert name_text(name) is None


def test_auto_takes_the_names_only_where_most_are_words():
    words = ["card_lost", "transfer", "top_up", "balance", "refund"]
    assert list(name_examples(words, "auto")["text"]) == ["balance", "card lost", "refund", "top up", "transfer"]
    assert list(name_examples(words, "auto")["label"]) == ["balance", "card_lost", "refund", "top_up", "transfer"]
    codes = ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]
    assert name_examples(codes, "auto").empty and name_examples(codes, "on").empty
    mixed = ["card_lost", "transfer", "LOC", "NUM", "x1"]  # 2 of 5 are words: auto leaves them all out, on takes 2
    assert name_examples(mixed, "auto").empty
    assert list(name_examples(mixed, "on")["label"]) == ["card_lost", "transfer"]
    assert name_examples(words, "off").empty


def test_with_label_names_appends_one_example_per_label_and_never_twice():
    frame = pd.DataFrame(
        {"text": ["where is my card", "send money", "top up"], "label": ["card_lost", "transfer", "top_up"]}
    )
    named = with_label_names(frame)
    assert len(named) == 5  # "top up" is already an example of top_up
    assert list(named["text"][3:]) == ["card lost", "transfer"]
    assert list(named["label"][3:]) == ["card_lost", "transfer"]
    assert with_label_names(named).equals(named)
    assert with_label_names(frame, "off").equals(frame)


def test_a_bad_mode_names_the_parameter():
    with pytest.raises(CeaError, match="label_names must be one of auto, on, off"):
        name_examples(["a_b"], "maybe")
