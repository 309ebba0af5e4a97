"""Entity-swap triplets from a hand-written FewRel-shaped file."""

import json

import pytest

from cea.data.entity_swap import entity_swap_triplets, read_fewrel
from cea.errors import CeaError

# "Paris" occurs twice in the first sentence; "Par" (an entity of the second) is a substring of
# "Paris" and of "Parade": only whole token spans may be replaced.
FEWREL = {
    "P36": [
        {
            "tokens": "Paris is the capital of France and Paris hosts the Parade".split(),
            "h": ["Paris", "Q90", [[0], [7]]],
            "t": ["France", "Q142", [[5]]],
        },
        {
            "tokens": "Par is the seat of Upper Land".split(),
            "h": ["Par", "Q1", [[0]]],
            "t": ["Upper Land", "Q2", [[5, 6]]],
        },
    ],
    "P19": [
        {"tokens": "Ada was born in London".split(), "h": ["Ada", "Q7", [[0]]], "t": ["London", "Q84", [[4]]]},
    ],
}


def test_swaps_whole_spans_every_occurrence_and_never_substrings(tmp_path):
    path = tmp_path / "fewrel.json"
    path.write_text(json.dumps(FEWREL))
    rows = entity_swap_triplets(read_fewrel(path)).to_dict("records")
    assert len(rows) == 2  # P19 has one sentence: no partner
    first = next(r for r in rows if r["anchor"].startswith("Paris"))
    assert first["positive"] == "Par is the capital of Upper Land and Par hosts the Parade"
    assert first["negative"] == "Paris is the seat of France"
    second = next(r for r in rows if r["anchor"].startswith("Par "))
    assert second["positive"] == "Paris is the seat of France"
    assert second["negative"] == "Par is the capital of Upper Land and Par hosts the Parade"
    assert {r["relation"] for r in rows} == {"P36"}


def test_jsonl_in_the_hub_layout(tmp_path):
    path = tmp_path / "fewrel.jsonl"
    lines = [
        {"relation": "P36", "tokens": s["tokens"], "head": {"indices": s["h"][2]}, "tail": {"indices": s["t"][2]}}
        for s in FEWREL["P36"]
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    rows = entity_swap_triplets(read_fewrel(path))
    assert rows["positive"].tolist()[0] == "Par is the capital of Upper Land and Par hosts the Parade"


@pytest.mark.parametrize(
    "line, message",
    [
        (
            '{"relation": "P1", "tokens": ["a", "b"], "head": {"indices": [[5]]}, "tail": {"indices": [[0]]}}',
            "line 2: the head entity's positions \\[5\\] lie outside",
        ),
        (
            '{"relation": "P1", "tokens": ["a", "b"], "tail": {"indices": [[0]]}}',
            "line 2: the head entity has no token",
        ),
        (
            '{"relation": "P1", "tokens": "a b", "head": {"indices": [[0]]}, "tail": {"indices": [[1]]}}',
            'line 2: "tokens" must be a non-empty list',
        ),
        (
            '{"relation": "P1", "tokens": ["a", "b", "c"], "head": {"indices": [[0, 2]]}, "tail": {"indices": [[1]]}}',
            "line 2: the head entity's positions \\[0, 2\\] are not one contiguous span",
        ),
        (
            '{"relation": "P1", "tokens": ["a", "b"], "head": {"indices": [[0, 1]]}, "tail": {"indices": [[1]]}}',
            "line 2: the head and tail entities overlap",
        ),
        ('{"relation": "P1", "tokens": ["a", "b"]', "line 2: not valid JSON"),
    ],
)
def test_malformed_rows_name_the_line(tmp_path, line, message):
    good = '{"relation": "P1", "tokens": ["x", "y"], "head": {"indices": [[0]]}, "tail": {"indices": [[1]]}}'
    path = tmp_path / "bad.jsonl"
    path.write_text(good + "\n" + line + "\n")
    with pytest.raises(CeaError, match=message):
        read_fewrel(path)


def test_no_partners_is_a_clear_error(tmp_path):
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"P19": FEWREL["P19"]}))
    with pytest.raises(CeaError, match="at least two sentences"):
        entity_swap_triplets(read_fewrel(path))


def _mention(relation, text, head, tail):
    from cea.data.entity_swap import Mention

    return Mention(relation, text.split(), head, tail, "test")


def test_a_row_whose_negative_or_positive_is_its_anchor_is_dropped():
    # one wording, other entities: the negative (B's wording, A's entities) is A itself
    same = [
        _mention("R", "Ada was born in London", [(0, 1)], [(4, 5)]),
        _mention("R", "Bob was born in Paris", [(0, 1)], [(4, 5)]),
    ]
    with pytest.raises(CeaError, match="different wordings"):
        entity_swap_triplets(same)
    other = _mention("R", "Cy moved to Rome", [(0, 1)], [(3, 4)])
    rows = entity_swap_triplets(same + [other], per_anchor=2).to_dict("records")
    assert rows and all(r["anchor"] not in (r["positive"], r["negative"]) for r in rows)
    ada = [r for r in rows if r["anchor"] == "Ada was born in London"]
    assert ada == [
        {
            "anchor": "Ada was born in London",
            "positive": "Cy was born in Rome",
            "negative": "Ada moved to London",
            "relation": "R",
        }
    ]  # Bob's row dropped, Cy's drawn in its place
    assert len(rows) == 4  # Ada-Cy, Bob-Cy, Cy-Ada, Cy-Bob


def test_tagged_mentions_pair_the_first_two_entities_and_name_the_relation_by_their_types():
    from cea.data.entity_swap import tagged_mentions

    tagged = [
        (
            "Paris is the capital of France and Paris hosts the Parade".split(),
            [(0, 1, "GPE"), (5, 6, "GPE"), (7, 8, "GPE")],
        ),
        ("Upper Land is ruled from Par".split(), [(0, 2, "GPE"), (5, 6, "GPE")]),
        ("Ada met Ada".split(), [(0, 1, "PERSON"), (2, 3, "PERSON")]),  # one wording: no pair
        ("Ada lives in London".split(), [(0, 1, "PERSON")]),
    ]  # one entity
    mentions = tagged_mentions(tagged)
    assert [(m.relation, m.head, m.tail, m.where) for m in mentions] == [
        ("GPE-GPE", [(0, 1), (7, 8)], [(5, 6)], "tagged, sentence 0"),
        ("GPE-GPE", [(0, 2)], [(5, 6)], "tagged, sentence 1"),
    ]
    rows = entity_swap_triplets(mentions).to_dict("records")
    assert rows[0]["positive"] == "Upper Land is the capital of Par and Upper Land hosts the Parade"
    assert rows[0]["negative"] == "Paris is ruled from France"
