"""Neighbour-contrastive refinement of the space ``cea discover`` clusters in.

What it expects, returns, when to use it, why it is written here and the citation: :func:`contrast_neighbours`.
"""

from __future__ import annotations

import numpy as np

from ..errors import OptionError

# chosen on the protocol's settings (docs/discover.md): positives per text, the loss's temperature, epochs
NEIGHBOURS = 20
TEMPERATURE = 0.2
EPOCHS = 15
BATCH = 512  # anchors per step (each with one of its neighbours: 1,024 rows)
DIMENSION = 128  # the contrastive head's output; the clustered space is the layer below it


def nearest_neighbours(x: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` nearest rows of each row of ``x`` by cosine, itself left out (scikit-learn's ``NearestNeighbors``)."""
    from sklearn.neighbors import NearestNeighbors

    k = min(k, len(x) - 1)
    index = NearestNeighbors(n_neighbors=k + 1, metric="cosine", algorithm="brute").fit(x).kneighbors(x, None, False)
    # a row is usually first in its own list, but duplicates of it may tie
    return np.stack([row[row != i][:k] for i, row in enumerate(index)]).astype(np.int64)


def positive_pairs(rows: np.ndarray, neighbours: np.ndarray, classes: np.ndarray, m: int):
    """The positive pairs of a step's ``rows`` (``m`` anchors, then one neighbour of each): an anchor and its drawn
    neighbour, two rows one of which is among the other's nearest, two labelled rows of one class (``classes`` -1:
    unlabelled). Returns pytorch-metric-learning's ``(a1, p, a2, n)``: every other pair is a negative."""
    import torch

    near = torch.as_tensor(neighbours[rows])  # (n, k)
    positive = (near[:, :, None] == torch.as_tensor(rows)[None, None, :]).any(1)
    positive |= positive.T.clone()
    lab = torch.as_tensor(classes[rows])
    positive |= (lab[:, None] == lab[None, :]) & (lab[:, None] >= 0)
    pairs = torch.arange(m)
    positive[pairs, pairs + m] = positive[pairs + m, pairs] = True
    self_pair = torch.eye(len(rows), dtype=torch.bool)
    positive &= ~self_pair
    return (*torch.nonzero(positive, as_tuple=True), *torch.nonzero(~positive & ~self_pair, as_tuple=True))


def contrast_neighbours(
    x: np.ndarray,
    labels: list,
    neighbours: int = NEIGHBOURS,
    temperature: float = TEMPERATURE,
    epochs: int = EPOCHS,
    batch_size: int = BATCH,
    seed: int = 0,
    say=None,
) -> np.ndarray:
    """A space in which each text lies nearer its nearest neighbours and the labelled texts of its known class.

    What it expects
        ``x``: the texts' embeddings (rows), ``labels``: a class name for each labelled text, None for the others.

    What it returns
        Unit-length rows of the same count and width, to cluster instead of ``x``: the hidden layer of a two-layer
        perceptron (with a head to 128) trained over ``x`` with pytorch-metric-learning's ``SupConLoss``; each step
        draws ``batch_size`` texts and one of each one's ``neighbours`` nearest, the pairs :func:`positive_pairs`
        names are positives, every other pair a negative. The encoder is not touched: it runs on cached embeddings.

    When to use it
        Before clustering unlabelled texts into classes: neighbours are mostly of one class, so pulling them together
        tightens the classes k-means has to find (its gain: docs/discover.md).

    Why written here
        pytorch-metric-learning's miners pair texts by label, and here most texts have none: the pairs come from the
        neighbour graph.

    Citation
        Zhang et al., "New Intent Discovery with Pre-training and Contrastive Learning" (MTP-CLNN), ACL 2022 (there
        over a fine-tuned BERT).
    """
    import torch

    for name, value in (("neighbours", neighbours), ("epochs", epochs), ("batch_size", batch_size)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise OptionError(name, f"must be a whole number of at least 1; got {value!r}")
    if not float(temperature) > 0:
        raise OptionError("temperature", f"must be above 0; got {temperature!r}")
    say = say or (lambda line: None)
    x = np.asarray(x, dtype=np.float32)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    if len(x) < 3:
        return x
    index = {name: i for i, name in enumerate(sorted({lab for lab in labels if lab is not None}))}
    classes = np.array([index[lab] if lab is not None else -1 for lab in labels], dtype=np.int64)
    near = nearest_neighbours(x, neighbours)
    rng = np.random.default_rng(seed)
    with torch.random.fork_rng(devices=[]):  # the initial weights and the dropout from the seed; torch's own untouched
        torch.manual_seed(seed)
        return _train(torch.from_numpy(x), near, classes, temperature, epochs, batch_size, rng, say)


def _train(
    data,
    near: np.ndarray,
    classes: np.ndarray,
    temperature: float,
    epochs: int,
    batch_size: int,
    rng: np.random.Generator,
    say,
) -> np.ndarray:
    """The perceptron and its head trained as :func:`contrast_neighbours` says; the perceptron's rows of ``data``."""
    import torch
    from pytorch_metric_learning.losses import SupConLoss

    n, width = data.shape
    body = torch.nn.Sequential(
        torch.nn.Dropout(0.1), torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width)
    )
    head = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(width, DIMENSION))
    optimizer = torch.optim.AdamW([*body.parameters(), *head.parameters()], lr=1e-3, weight_decay=1e-4)
    loss_fn = SupConLoss(temperature=float(temperature))
    body.train()
    for epoch in range(epochs):
        order, total = rng.permutation(n), 0.0
        for start in range(0, n, batch_size):
            anchors = order[start : start + batch_size]
            drawn = near[anchors, rng.integers(0, near.shape[1], len(anchors))]
            rows = np.concatenate([anchors, drawn])
            out = head(body(data[rows]))
            loss = loss_fn(out, indices_tuple=positive_pairs(rows, near, classes, len(anchors)))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        if (epoch + 1) % 5 == 0 or epoch + 1 == epochs:
            say(f"neighbour contrast: epoch {epoch + 1} of {epochs}, loss {total / -(-n // batch_size):.3f}")
    body.eval()
    with torch.no_grad():
        return torch.nn.functional.normalize(body(data), dim=1).numpy()
