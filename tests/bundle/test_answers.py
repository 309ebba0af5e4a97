"""A bundle's answers as records: unknown below the threshold with the best class as ``closest``."""

import numpy as np

from cea.bundle.answers import predictions


def test_unknown_below_the_threshold_names_the_closest_class():
    chosen, scores, strength = np.array(["b", "a"], dtype=object), np.array([2 / 3, 1.0]), np.array([0.6, 0.6])
    sims, rows = np.array([[0.9, 0.8], [0.6, 0.5]]), np.array([[0, 1], [1, -1]])

    def answers(threshold):
        return [
            (p.label, p.closest)
            for p in predictions(chosen, scores, strength, threshold, sims, rows, [10, 11], ["t0", "t1"], ["a", "b"])
        ]

    assert answers(0.61) == [("unknown", "b"), ("unknown", "a")]
    assert answers(0.59) == answers(None) == [("b", None), ("a", None)]
    first = predictions(chosen, scores, strength, None, sims, rows, [10, 11], ["t0", "t1"], ["a", "b"])
    assert first[1].neighbours == [{"id": 11, "text": "t1", "cosine": 0.6, "label": "b"}]  # -1: no neighbour
