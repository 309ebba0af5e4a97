"""Label names as examples: where a label's name is words (``lost_or_stolen_card``, ``AdultActor``, ``Business &
Finance``), its words ("lost or stolen card") are one more example of the label, for training and as a reference;
where names are codes (``ABBR``, ``LABEL_3``, ``0``) they are not (docs/decisions.md#label-names).

No library has the rule, hence this module: a name is words when, split at every character that is neither a letter
nor a digit and at camel-case humps, every piece is letters, one has two or more, and the name is not all capitals
(``&`` reads "and"). ``auto`` uses a data set's names only when at least :data:`AUTO_SHARE` of them are words.
"""

from __future__ import annotations

import re

import pandas as pd

from ..errors import OptionError

MODES = ("auto", "on", "off")
AUTO_SHARE = 0.8
_PIECES = re.compile(r"[\W_]+")
_HUMPS = re.compile(r"(?<=[a-z])(?=[A-Z])")


def name_text(name: str) -> str | None:
    """A label name's words (``lost_or_stolen_card`` -> ``lost or stolen card``, ``AdultActor`` -> ``adult actor``);
    None for a code."""
    name = str(name).strip()
    if not name or (name.isupper() and len(name) > 1) or not any(c.isalpha() for c in name):
        return None
    pieces = [p for part in _PIECES.split(name.replace("&", " and ")) for p in _HUMPS.split(part) if p]
    if not pieces or not all(p.isalpha() for p in pieces) or max(len(p) for p in pieces) < 2:
        return None
    return " ".join(p.lower() if not p.isupper() or len(p) == 1 else p for p in pieces)


def name_examples(labels, mode: str = "auto") -> pd.DataFrame:
    """One ``text``, ``label`` row per label whose name is words (``mode``: on, off, or auto: where most names are)."""
    if mode not in MODES:
        raise OptionError("label_names", f"must be one of {', '.join(MODES)}, got {mode!r}")
    labels = sorted(set(labels), key=str)
    words = {label: text for label in labels if (text := name_text(label))}
    if mode == "off" or not labels or (mode == "auto" and len(words) < AUTO_SHARE * len(labels)):
        words = {}
    return pd.DataFrame({"text": list(words.values()), "label": list(words)})


def with_label_names(frame: pd.DataFrame, mode: str = "auto") -> pd.DataFrame:
    """``frame`` (``text``, ``label``) with the label-name examples of its labels appended (none already there)."""
    extra = name_examples(frame["label"], mode)
    have = set(zip(frame["text"], frame["label"]))
    extra = extra[[(t, label) not in have for t, label in zip(extra["text"], extra["label"])]]
    return pd.concat([frame, extra], ignore_index=True) if len(extra) else frame


def new_label_names(texts, labels, known) -> list[tuple[str, str]]:
    """(name text, label) for each label of ``labels`` not in ``known`` whose name is words, unless ``texts`` already
    give it that example: what a grown bundle adds so it holds what a bundle built with those labels would."""
    given = set(zip(texts, labels))
    named = ((name_text(label), label) for label in dict.fromkeys(labels) if label not in known)
    return [(text, label) for text, label in named if text and (text, label) not in given]
