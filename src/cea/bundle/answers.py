"""How a bundle's answers become the records ``predict`` returns: the label (``unknown`` below the threshold, the best
class named as ``closest``), its score and evidence, the neighbours found, and a multi-label bundle's ranked labels;
the answers come from the bundle's classifier (:class:`cea.knn.decision.Classifier`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..knn.unknown import UNKNOWN, turned_away


@dataclass
class Prediction:
    label: str  # a class, or "unknown" where the evidence fell below the threshold
    score: float  # the classifier's probability (head) or vote share (kNN) of its best class
    neighbours: list[dict]
    evidence: float = 0.0  # score x the nearest cosine (/ the count curve's ratio, small classes): vs the threshold
    closest: str | None = None  # the best class, when the answer is unknown
    labels: list[dict] | None = None  # a multi-label bundle's answer: [{"label", "score"}], best first ([]: unknown)

    def as_dict(self) -> dict:
        return {
            "label": self.label,
            "score": self.score,
            "evidence": self.evidence,
            **({"labels": self.labels} if self.labels is not None else {}),
            **({"closest": self.closest} if self.closest else {}),
            "neighbours": self.neighbours,
        }


def predictions(
    chosen,
    scores,
    strength,
    threshold: float | None,
    sims: np.ndarray,
    rows: np.ndarray,
    ids,
    texts,
    labels,
    label_sets: list | None = None,
) -> list[Prediction]:
    """One :class:`Prediction` per text: the chosen label (``unknown`` below ``threshold``), its score and evidence, and
    the neighbours found (``rows`` into the references' ``ids``, ``texts`` and ``labels``; -1: none). ``label_sets``: a
    multi-label bundle's ranked (label, share) pairs per text, from :meth:`cea.knn.decision.Classifier.decide`."""
    out = []
    for i, away in enumerate(turned_away(strength, threshold)):
        label, closest = (UNKNOWN, str(chosen[i])) if away else (str(chosen[i]), None)
        keep = [(s_, r) for s_, r in zip(sims[i].tolist(), rows[i].tolist()) if r >= 0]
        ranked = (
            None
            if label_sets is None
            else []
            if closest
            else [{"label": name, "score": round(float(share), 6)} for name, share in label_sets[i]]
        )
        out.append(
            Prediction(
                label,
                round(float(scores[i]), 6),
                [
                    {
                        "id": int(ids[r]),
                        "text": texts[r],
                        "cosine": round(s_, 6),
                        "label": list(labels[r]) if label_sets is not None else labels[r],
                    }
                    for s_, r in keep
                ],
                round(float(strength[i]), 6),
                closest,
                ranked,
            )
        )
    return out
