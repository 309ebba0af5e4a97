"""Entity-swap triplets from a hand-written FewRel-shaped file."""

import json

import pytest

from cea.data.entity_swap import entity_swap_triplets, read_fewrel
from cea.errors import CeaError

# "Paris" occurs twice in the first sentence; "Par" (an entity of the second) is a substring of
# "Paris" and of "Parade": only whole token spans may be replaced.
FEWREL = {
    "P36": [
        {"tokens": "Paris is the capital of France and Paris hosts the Parade".split(),
         "h": ["Paris", "Q90", [[0], [7]]], "t": ["France", "Q142", [[5]]]},
        {"tokens": "Par is the seat of Upper Land".split(),
         "h": ["Par", "Q1", [[0]]], "t": ["Upper Land", "Q2", [[5, 6]]]},
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
    lines = [{"relation": "P36", "tokens": s["tokens"], "head": {"indices": s["h"][2]}, "tail": {"indices": s["t"][2]}}
             for s in FEWREL["P36"]]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    rows = entity_swap_triplets(read_fewrel(path))
    assert rows["positive"].tolist()[0] == "Par is the capital of Upper Land and Par hosts the Parade"


@pytest.mark.parametrize("line, message", [
    ('{"relation": "P1", "tokens": ["a", "b"], "head": {"indices": [[5]]}, "tail": {"indices": [[0]]}}',
     "line 2: the head entity's positions \\[5\\] lie outside"),
    ('{"relation": "P1", "tokens": ["a", "b"], "tail": {"indices": [[0]]}}', "line 2: the head entity has no token"),
    ('{"relation": "P1", "tokens": "a b", "head": {"indices": [[0]]}, "tail": {"indices": [[1]]}}',
     "line 2: \"tokens\" must be a non-empty list"),
    ('{"relation": "P1", "tokens": ["a", "b", "c"], "head": {"indices": [[0, 2]]}, "tail": {"indices": [[1]]}}',
     "line 2: the head entity's positions \\[0, 2\\] are not one contiguous span"),
    ('{"relation": "P1", "tokens": ["a", "b"], "head": {"indices": [[0, 1]]}, "tail": {"indices": [[1]]}}',
     "line 2: the head and tail entities overlap"),
    ('{"relation": "P1", "tokens": ["a", "b"]', "line 2: not valid JSON"),
])
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
