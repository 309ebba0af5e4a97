"""Entity-swap triplets from relation-annotated sentences in the FewRel layout (after
github.com/JaeL17/high-level-semantics-embedding-model, whose encoder trained on them retrieved intents better than
encoders ten times its size). For an anchor sentence A and another sentence B of the same relation:

* positive = A's wording with A's head and tail entities replaced by B's (same wording, other entities);
* negative = B's wording carrying A's head and tail entities (other wording, same entities).

Training with ``--objective triplet`` on these rows teaches an encoder the relation (the intent), not the keywords.
No library builds these, hence this module. Input, one sentence per record, FewRel's JSON (``{"P931": [{"tokens":
[...], "h": [name, id, [[i, ...], ...]], "t": [...]}, ...], ...}``) or JSONL (``{"relation": "P931", "tokens": [...],
"head": {"indices": [[i, ...]]}, "tail": {"indices": [[j, ...]]}}``, the Hugging Face ``few_rel`` rows, or with
``h`` and ``t``). Every occurrence of an entity (token positions) is replaced as a whole token span.
Where no relation annotation is at hand, :func:`tagged_mentions` makes these sentences of a tagger's entities (the
relation: the pair of the entities' types). A row whose positive or negative reads as its anchor is dropped.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..errors import CeaError


@dataclass
class Mention:
    """One relation-annotated sentence: tokens and the token spans of its head and tail entities."""

    relation: str
    tokens: list[str]
    head: list[tuple[int, int]]  # [start, end) spans, one per occurrence
    tail: list[tuple[int, int]]
    where: str

    def entity(self, which: str) -> list[str]:
        """The surface tokens of the entity's first occurrence."""
        start, end = (self.head if which == "head" else self.tail)[0]
        return self.tokens[start:end]


def _spans(value, where: str, name: str, n_tokens: int) -> list[tuple[int, int]]:
    if isinstance(value, dict):
        value = value.get("indices")
    elif isinstance(value, list) and len(value) == 3 and isinstance(value[0], str):
        value = value[2]  # FewRel's [name, id, [[positions]]]
    if not isinstance(value, list) or not value:
        raise CeaError(
            f'{where}: the {name} entity has no token positions; expected e.g. "{name}": {{"indices": [[3, 4]]}}'
        )
    spans = []
    for occurrence in value:
        if (
            not isinstance(occurrence, list)
            or not occurrence
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in occurrence)
        ):
            raise CeaError(f"{where}: the {name} entity's positions must be lists of token numbers, got {occurrence!r}")
        start, end = min(occurrence), max(occurrence) + 1
        if start < 0 or end > n_tokens:
            raise CeaError(
                f"{where}: the {name} entity's positions {occurrence} lie outside the sentence's {n_tokens} tokens"
            )
        if sorted(occurrence) != list(range(start, end)):
            raise CeaError(f"{where}: the {name} entity's positions {occurrence} are not one contiguous span")
        spans.append((start, end))
    return sorted(set(spans))


def _mention(record, relation, where: str) -> Mention:
    if not isinstance(record, dict):
        raise CeaError(f"{where}: expected an object with tokens, head and tail, got {type(record).__name__}")
    relation = record.get("relation", relation)
    tokens = record.get("tokens")
    if relation is None or relation == "":
        raise CeaError(f'{where}: no relation; add a "relation" field')
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise CeaError(f'{where}: "tokens" must be a non-empty list of strings')
    head = _spans(record.get("head", record.get("h")), where, "head", len(tokens))
    tail = _spans(record.get("tail", record.get("t")), where, "tail", len(tokens))
    spans = sorted(head + tail)
    for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
        if s2 < e1:
            raise CeaError(f"{where}: the head and tail entities overlap (tokens {s1}-{e1 - 1} and {s2}-{e2 - 1})")
    return Mention(str(relation), tokens, head, tail, where)


def read_fewrel(path: str | Path) -> list[Mention]:
    """Read FewRel JSON (relation -> sentences) or JSONL (one sentence per line); errors name the line."""
    path = Path(path)
    if not path.exists():
        raise CeaError(f"file not found: {path}")
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None  # several JSON values: JSONL, read line by line below
    mentions = []
    if isinstance(data, dict) and "tokens" not in data:  # FewRel's relation -> sentences layout
        for relation, records in data.items():
            if not isinstance(records, list):
                raise CeaError(f"{path.name}: relation {relation!r} must map to a list of sentences")
            mentions += [
                _mention(r, relation, f"{path.name}, relation {relation}, sentence {i}") for i, r in enumerate(records)
            ]
        return mentions
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CeaError(f"{path.name} line {number}: not valid JSON ({exc.msg})") from None
        mentions.append(_mention(record, None, f"{path.name} line {number}"))
    return mentions


def swap(mention: Mention, head: list[str], tail: list[str]) -> list[str]:
    """``mention``'s tokens with every occurrence of its head and tail replaced by the given tokens."""
    out, position = [], 0
    for start, end, tokens in sorted([(s, e, head) for s, e in mention.head] + [(s, e, tail) for s, e in mention.tail]):
        out += mention.tokens[position:start] + tokens
        position = end
    return out + mention.tokens[position:]


def tagged_mentions(sentences, where: str = "tagged") -> list[Mention]:
    """Mentions from a tagger's entities (e.g. spaCy's ``doc.ents``) where no relation annotation is at hand: each of
    ``sentences`` is ``(tokens, entities)``, an entity ``(start, end, label)`` a [start, end) token span. The first two
    entities of different wording are the head and the tail (every entity of the same wording is an occurrence of
    it), their labels' pair the relation (``"PERSON-GPE"``), so that only entities of the same kinds are swapped. A
    sentence with fewer than two entities of different wording gives none."""
    mentions = []
    for number, (tokens, entities) in enumerate(sentences):
        tokens = [str(t) for t in tokens]
        spans = sorted((int(s), int(e), str(label)) for s, e, label in entities)
        words = [tuple(tokens[s:e]) for s, e, _ in spans]
        if len(set(words)) < 2:
            continue
        head = words[0]
        tail = next(w for w in words if w != head)
        labels = (spans[0][2], spans[words.index(tail)][2])
        record = {
            "relation": "-".join(labels),
            "tokens": tokens,
            "head": [list(range(s, e)) for (s, e, _), w in zip(spans, words) if w == head],
            "tail": [list(range(s, e)) for (s, e, _), w in zip(spans, words) if w == tail],
        }
        mentions.append(_mention(record, None, f"{where}, sentence {number}"))
    return mentions


def _triplet(anchor: Mention, other: Mention, relation: str) -> dict | None:
    """The row of ``anchor`` and its partner ``other``, or None where the positive or the negative reads as the anchor
    (e.g. two sentences of one wording: the negative is the anchor itself), which would teach nothing."""
    text = " ".join(anchor.tokens)
    positive = " ".join(swap(anchor, other.entity("head"), other.entity("tail")))
    negative = " ".join(swap(other, anchor.entity("head"), anchor.entity("tail")))
    if text in (positive, negative):
        return None
    return {"anchor": text, "positive": positive, "negative": negative, "relation": relation}


def _partners(rng: random.Random, anchor: Mention, others: list[Mention], per_anchor: int, relation: str) -> list:
    """Up to ``per_anchor`` rows of ``anchor``, its partners taken from ``others`` in a random order; a partner whose
    row would be dropped (:func:`_triplet`) gives way to the next."""
    rows = []
    for other in rng.sample(others, len(others)):
        row = _triplet(anchor, other, relation)
        if row is not None:
            rows.append(row)
        if len(rows) == per_anchor:
            break
    return rows


def entity_swap_triplets(mentions: list[Mention], per_anchor: int = 1, seed: int = 0) -> pd.DataFrame:
    """Rows of (anchor, positive, negative, relation): ``per_anchor`` partners per sentence, other sentences of the same
    relation whose entities differ from the anchor's (a relation with a single sentence gives no rows). A row whose
    positive or negative equals its anchor is dropped (another partner drawn in its place where there is one)."""
    if per_anchor < 1:
        raise CeaError(f"--per-anchor must be at least 1, got {per_anchor}")
    rng, rows = random.Random(seed), []
    for relation, group in itertools.groupby(sorted(mentions, key=lambda m: m.relation), key=lambda m: m.relation):
        group = list(group)
        keys = [(tuple(m.entity("head")), tuple(m.entity("tail"))) for m in group]
        for a, anchor in enumerate(group):
            others = [m for o, m in enumerate(group) if o != a and keys[o] != keys[a]]
            rows += _partners(rng, anchor, others, per_anchor, relation)
    if not rows:
        raise CeaError(
            "no triplets: every relation needs at least two sentences with different entities (and different wordings)"
        )
    return pd.DataFrame(rows, columns=["anchor", "positive", "negative", "relation"])
