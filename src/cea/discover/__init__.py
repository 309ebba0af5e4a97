"""``cea discover``: new classes among unlabelled texts, guided by the labelled ones (:func:`discover`).

run (the run: encode, whiten, contrast, count, anchored k-means, the groups named and described; the benchmark's
protocol, a table of texts, the files), groups (how the groups are found), space (the texts encoded, fine-tuned
where asked, cached), tuning (the encoder fine-tuned on the labelled texts), neighbours (the neighbour-contrastive
space), unknowns (a bundle's texts answered unknown, grouped and accepted as classes).
"""

from .groups import (
    ESTIMATES,
    LABELLED_WEIGHT,
    N_INIT,
    OVER,
    WORDS,
    anchored_kmeans,
    distinctive_words,
    estimate_clusters,
    known_centroids,
    plus_plus,
    within_class_whitening,
)
from .neighbours import contrast_neighbours
from .run import (
    AUTO,
    CENTRAL,
    GIVEN,
    Discovery,
    check_output,
    discover,
    discover_protocol,
    discover_texts,
    name_clusters,
    parse_clusters,
    save,
)
from .space import discovery_space, encode_texts
from .tuning import worth_it

__all__ = [
    "AUTO",
    "CENTRAL",
    "ESTIMATES",
    "GIVEN",
    "LABELLED_WEIGHT",
    "N_INIT",
    "OVER",
    "WORDS",
    "Discovery",
    "anchored_kmeans",
    "check_output",
    "contrast_neighbours",
    "discover",
    "discover_protocol",
    "discover_texts",
    "discovery_space",
    "distinctive_words",
    "encode_texts",
    "estimate_clusters",
    "known_centroids",
    "name_clusters",
    "parse_clusters",
    "plus_plus",
    "save",
    "within_class_whitening",
    "worth_it",
]
