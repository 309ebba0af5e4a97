"""Each objective's loss on hand-made embeddings against a value worked out here independently."""

import itertools
import math

import numpy as np
import pytest
import torch

from cea.objectives import (
    CEALoss,
    MultitaskObjective,
    NormalizedSoftmaxObjective,
    SoftmaxObjective,
    SupConObjective,
    TripletObjective,
    cea_pair_loss,
    flipped_aux_loss,
)

R = 1 / math.sqrt(2)


class _Stub(torch.nn.Module):
    """Just enough of a SentenceTransformer for objectives that never call it."""

    def __init__(self, dim=2):
        super().__init__()
        self.dim = dim
        self.max_seq_length = 16
        self.p = torch.nn.Parameter(torch.zeros(1))

    def get_embedding_dimension(self):
        return self.dim


def _emb(*rows):
    return torch.tensor(rows, dtype=torch.float32)


def _cos(a, b):
    a, b = (v.numpy() if torch.is_tensor(v) else np.asarray(v, float) for v in (a, b))
    return float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b))


E3 = _emb([1, 0], [0, 1], [1, 1])  # labels 0, 0, 1
L3 = torch.tensor([0, 0, 1])


def test_cea_all_pairs_mean_and_sum():
    # pairs once each: (0,1) same, cos 0 -> 1; (0,2), (1,2) different, cos 1/sqrt2 -> 0.5 each
    assert cea_pair_loss(E3, L3, E3, L3, pairs="all", self_block=True).item() == pytest.approx(2 / 3)
    assert cea_pair_loss(E3, L3, E3, L3, pairs="all", self_block=True, reduction="sum").item() == pytest.approx(2)
    got = cea_pair_loss(E3, L3, E3, L3, pairs="all", self_block=True, negative_target=0.2).item()
    assert got == pytest.approx((1 + 2 * (R - 0.2) ** 2) / 3, rel=1e-6)
    # balanced: the positive pairs' mean (1) and the negative pairs' mean (0.5) weigh the same
    got = cea_pair_loss(E3, L3, E3, L3, pairs="all", self_block=True, reduction="balanced").item()
    assert got == pytest.approx((1 + 0.5) / 2)


def test_cea_multi_label_targets_follow_the_jaccard_overlap_of_the_label_sets():
    # label sets {x}, {x, y}, {y} as multi-hot rows: Jaccard (0,1) 1/2, (0,2) 0, (1,2) 1/2
    multi = torch.tensor([[1, 0], [1, 1], [0, 1]])
    # cosines (0,1) 0, (0,2) R, (1,2) R: ((0 - 1/2)^2 + R^2 + (R - 1/2)^2) / 3
    got = cea_pair_loss(E3, multi, E3, multi, pairs="all", self_block=True).item()
    assert got == pytest.approx((0.25 + R**2 + (R - 0.5) ** 2) / 3, rel=1e-6)
    # negative target 0.2: targets 0.2 + 0.8 x Jaccard = 0.6, 0.2, 0.6
    got = cea_pair_loss(E3, multi, E3, multi, pairs="all", self_block=True, negative_target=0.2).item()
    assert got == pytest.approx((0.36 + (R - 0.2) ** 2 + (R - 0.6) ** 2) / 3, rel=1e-6)
    # one label each, as multi-hot rows: the single-label loss
    one_hot = torch.nn.functional.one_hot(L3, 2)
    assert cea_pair_loss(E3, one_hot, E3, one_hot, pairs="all", self_block=True).item() == pytest.approx(2 / 3)


def test_cea_sampled_pairs():
    # anchors 0 and 1: their one positive (error 1) and the one negative (0.5); anchor 2: a negative (0.5)
    loss = CEALoss(_Stub(), num_labels=2, pairs="sampled")
    assert loss.compute_loss_from_embeddings(E3, L3).item() == pytest.approx((1 + 0.5 + 1 + 0.5 + 0.5) / 5)


def test_cea_class_memory_uses_latest_embeddings_and_detaches():
    loss = CEALoss(_Stub(), num_labels=2, pairs="all", memory="class")
    first = loss.compute_loss_from_embeddings(E3, L3)
    assert first.item() == 0  # empty memory
    batch = _emb([1, 0], [0, 1]).requires_grad_()
    value = loss.compute_loss_from_embeddings(batch, torch.tensor([1, 0]))
    # memory: label 0 -> [0, 1] (last of the first batch), label 1 -> [1, 1]
    # anchor [1,0] (label 1): vs m0 cos 0, target 0 -> 0; vs m1 cos R, target 1 -> (R-1)^2
    # anchor [0,1] (label 0): vs m0 cos 1 -> 0; vs m1 cos R, target 0 -> R^2
    assert value.item() == pytest.approx(((R - 1) ** 2 + R**2) / 4, rel=1e-6)
    value.backward()
    assert batch.grad is not None and not loss.memory.embeddings.requires_grad


def test_cea_bank_adds_the_queue_to_the_batch():
    loss = CEALoss(_Stub(), num_labels=2, pairs="all", memory="bank", memory_size=2)
    loss.compute_loss_from_embeddings(E3, L3)  # bank keeps the last two: [0,1] (0), [1,1] (1)
    batch = _emb([1, 0], [1, 1])
    value = loss.compute_loss_from_embeddings(batch, torch.tensor([0, 1]))
    # in-batch (0,1): different, cos R -> R^2
    # [1,0] (0) vs bank: [0,1] (0) cos 0 -> 1; [1,1] (1) cos R -> R^2
    # [1,1] (1) vs bank: [0,1] (0) cos R -> R^2; [1,1] (1) cos 1 -> 0
    assert value.item() == pytest.approx((R**2 + 1 + R**2 + R**2) / 5, rel=1e-6)
    assert loss.memory.labels.tolist() == [0, 1] and loss.memory.count == 2


def test_cea_mixed_memory_fills_only_missing_partners():
    loss = CEALoss(_Stub(), num_labels=2, pairs="all", memory="mixed")
    loss.compute_loss_from_embeddings(E3, L3)  # class memory: 0 -> [0,1], 1 -> [1,1]
    batch = _emb([1, 0], [2, 0])
    value = loss.compute_loss_from_embeddings(batch, torch.tensor([0, 0]))
    # in-batch: (0,1) same, cos 1 -> 0. Neither anchor has a negative in the batch:
    # memory label 1 [1,1]: cos R for both, target 0 -> R^2 each
    assert value.item() == pytest.approx((0 + 2 * R**2) / 3, rel=1e-6)


def test_cea_memory_state_round_trip():
    loss = CEALoss(_Stub(), num_labels=2, pairs="sampled", memory="bank", memory_size=4)
    loss.compute_loss_from_embeddings(E3, L3)
    state = loss.memory_state()
    other = CEALoss(_Stub(), num_labels=2, pairs="sampled", memory="bank", memory_size=4)
    other.load_memory_state(state)
    batch = _emb([1, 0], [0, 1], [3, 1], [1, 4])
    labels = torch.tensor([0, 1, 0, 1])
    assert (
        loss.compute_loss_from_embeddings(batch, labels).item()
        == other.compute_loss_from_embeddings(batch, labels).item()
    )


def _triplets(labels):
    n = len(labels)
    return [
        (a, p, q)
        for a, p, q in itertools.permutations(range(n), 3)
        if labels[a] == labels[p] and labels[a] != labels[q]
    ]


EMB4 = _emb([1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8], [1, 1])
LAB4 = [0, 0, 1, 1, 0]


def test_triplet_batch_all():
    sims = {(i, j): _cos(EMB4[i], EMB4[j]) for i in range(5) for j in range(5)}
    losses = [max(0.0, sims[a, q] - sims[a, p] + 0.2) for a, p, q in _triplets(LAB4)]
    expected = sum(losses) / sum(v > 0 for v in losses)
    got = TripletObjective(_Stub(), margin=0.2).compute_loss_from_embeddings(EMB4, torch.tensor(LAB4))
    assert got.item() == pytest.approx(expected, rel=1e-5)


def test_triplet_batch_hard():
    sims = np.array([[_cos(EMB4[i], EMB4[j]) for j in range(5)] for i in range(5)])
    losses = []
    for a in range(5):
        pos = [p for p in range(5) if p != a and LAB4[p] == LAB4[a]]
        neg = [q for q in range(5) if LAB4[q] != LAB4[a]]
        losses.append(max(0.0, max(sims[a, neg]) - min(sims[a, pos]) + 0.2))
    expected = sum(losses) / sum(v > 0 for v in losses)
    got = TripletObjective(_Stub(), margin=0.2, mining="hard").compute_loss_from_embeddings(EMB4, torch.tensor(LAB4))
    assert got.item() == pytest.approx(expected, rel=1e-5)


def test_supcon():
    t = 0.1
    sims = np.array([[_cos(EMB4[i], EMB4[j]) for j in range(5)] for i in range(5)])
    per_anchor = []
    for i in range(5):
        others = [k for k in range(5) if k != i]
        denom = sum(math.exp(sims[i, k] / t) for k in others)
        pos = [p for p in others if LAB4[p] == LAB4[i]]
        per_anchor.append(-np.mean([sims[i, p] / t - math.log(denom) for p in pos]))
    got = SupConObjective(_Stub(), temperature=t).compute_loss_from_embeddings(EMB4, torch.tensor(LAB4))
    assert got.item() == pytest.approx(np.mean(per_anchor), rel=1e-5)


def test_supcon_multi_label_positives_share_a_label():
    t = 0.1
    sets = [{0}, {0, 1}, {1}, {2}, {1, 2}]  # label sets of the five texts, as multi-hot rows
    multi_hot = torch.tensor([[int(c in s) for c in range(3)] for s in sets])
    sims = np.array([[_cos(EMB4[i], EMB4[j]) for j in range(5)] for i in range(5)])
    per_anchor = []
    for i in range(5):
        others = [k for k in range(5) if k != i]
        pos = [p for p in others if sets[p] & sets[i]]
        # pytorch-metric-learning's denominator: the positives and the negatives (texts sharing no label)
        denom = sum(math.exp(sims[i, k] / t) for k in others if k in pos or not sets[k] & sets[i])
        per_anchor.append(-np.mean([sims[i, p] / t - math.log(denom) for p in pos]))
    objective = SupConObjective(_Stub(), temperature=t, multi_label=True)
    assert objective.compute_loss_from_embeddings(EMB4, multi_hot).item() == pytest.approx(
        np.mean(per_anchor), rel=1e-5
    )
    one_hot = torch.nn.functional.one_hot(torch.tensor(LAB4))  # one label each: the single-label loss
    single = SupConObjective(_Stub(), temperature=t).compute_loss_from_embeddings(EMB4, torch.tensor(LAB4))
    assert objective.compute_loss_from_embeddings(EMB4, one_hot).item() == pytest.approx(single.item(), rel=1e-6)


def test_cea_multi_label_refuses_memories():
    from cea.errors import CeaError

    with pytest.raises(CeaError, match="memory class holds one label per text"):
        CEALoss(_Stub(), num_labels=3, memory="class", multi_label=True)
    got = CEALoss(_Stub(), num_labels=2, multi_label=True).compute_loss_from_embeddings(
        E3, torch.tensor([[1, 0], [1, 1], [0, 1]])
    )
    assert got.item() == pytest.approx((0.25 + R**2 + (R - 0.5) ** 2) / 3, rel=1e-6)


def test_normalized_softmax():
    obj = NormalizedSoftmaxObjective(_Stub(dim=3), num_labels=2, temperature=0.05)
    weights = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0]])  # one row per class
    with torch.no_grad():
        obj.loss_fn.W.copy_(torch.tensor(weights.T, dtype=torch.float32))
    x = np.array([[1.0, 2.0, 4.0], [3.0, -1.0, 0.5]])
    labels = [1, 0]
    ln = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    unit = ln / np.linalg.norm(ln, axis=1, keepdims=True)
    w = weights / np.linalg.norm(weights, axis=1, keepdims=True)
    logits = unit @ w.T / 0.05
    expected = np.mean([-(logits[i, labels[i]] - np.log(np.exp(logits[i]).sum())) for i in range(2)])
    got = obj.compute_loss_from_embeddings(torch.tensor(x, dtype=torch.float32), torch.tensor(labels))
    assert got.item() == pytest.approx(expected, rel=1e-4)


def test_softmax_head():
    obj = SoftmaxObjective(_Stub(dim=2), num_labels=3)
    with torch.no_grad():
        obj.head.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
        obj.head.bias.copy_(torch.tensor([0.0, 0.5, -0.5]))
    x = np.array([[1.0, 2.0], [0.5, -1.0]])
    labels = [2, 0]
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)  # the head sees unit vectors
    logits = unit @ np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]).T + [0.0, 0.5, -0.5]
    expected = np.mean([np.log(np.exp(logits[i]).sum()) - logits[i, labels[i]] for i in range(2)])
    got = obj.compute_loss_from_embeddings(torch.tensor(x, dtype=torch.float32), torch.tensor(labels))
    assert got.item() == pytest.approx(expected, rel=1e-5)
    head = obj.linear_head(["a", "b", "c"])  # the bundle's linear head: the same logits, rows named
    np.testing.assert_allclose(head.decision(x), logits, rtol=1e-6)
    assert head.predict(x).tolist() == ["b", "a"] and logits.argmax(1).tolist() == [1, 0]


class _Encoding(_Stub):
    """A stub whose ``encode`` returns fixed vectors (the frozen model's embeddings of the texts)."""

    def __init__(self, vectors):
        super().__init__(dim=vectors.shape[1])
        self.vectors = vectors

    def encode(self, texts, **kwargs):
        return self.vectors[[int(t) for t in texts]]


@pytest.mark.parametrize("n_labels", [12, 2])
def test_softmax_head_starts_from_the_probe(n_labels):
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(n_labels), 4)
    vectors = rng.normal(size=(len(ids), 5)) + 2 * np.eye(5)[ids % 5] + (ids[:, None] >= 5)
    obj = SoftmaxObjective(_Encoding(vectors.astype(np.float32)), num_labels=n_labels + 1)  # the last label: no texts
    obj.prepare([str(i) for i in range(len(ids))], ids)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    probe = LogisticRegression(C=10.0, max_iter=3000).fit(unit, ids)  # integer classes, in their own order
    w, b = obj.head.weight.detach().numpy(), obj.head.bias.detach().numpy()
    if n_labels == 2:  # one logit; the softmax over (0, logit) is the same classifier
        np.testing.assert_allclose(w[1] - w[0], probe.coef_[0], rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(b[1] - b[0], probe.intercept_[0], rtol=1e-3, atol=1e-3)
    else:
        np.testing.assert_allclose(w[:n_labels], probe.coef_, rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(b[:n_labels], probe.intercept_, rtol=1e-3, atol=1e-3)
    assert not w[n_labels].any() and b[n_labels] == 0
    head = obj.linear_head([str(i) for i in range(n_labels + 1)]).predict(vectors).astype(int)
    np.testing.assert_array_equal(head, probe.predict(unit))
    random = SoftmaxObjective(_Encoding(vectors.astype(np.float32)), num_labels=n_labels + 1, head_init="random")
    before = random.head.weight.detach().clone()
    random.prepare([str(i) for i in range(len(ids))], ids)
    assert torch.equal(random.head.weight, before)


def test_flipped_aux_pushes_same_publisher_pairs_apart():
    emb = _emb([1, 0], [1, 1], [0, 1], [1, 0.5])
    labels, aux = torch.tensor([0, 1, 0, 1]), torch.tensor([7, 7, 8, 8])
    # same aux, different label: (0,1) cos R; (2,3) cos(0,1 ; 1,0.5)
    expected = (R**2 + _cos([0, 1], [1, 0.5]) ** 2) / 2
    assert flipped_aux_loss(emb, labels, aux).item() == pytest.approx(expected, rel=1e-6)


def _same_aux_other_class_cosine(emb, labels, aux):
    cos = torch.nn.functional.normalize(emb, dim=-1) @ torch.nn.functional.normalize(emb, dim=-1).T
    i, j = torch.triu_indices(len(emb), len(emb), 1)
    chosen = (aux[i] == aux[j]) & (labels[i] != labels[j])
    return cos[i[chosen], j[chosen]].mean().item()


def test_multitask_aux_term_changes_the_loss_and_pushes_same_aux_pairs_apart():
    labels, aux = torch.tensor([0, 0, 1, 1, 0, 0, 1, 1]), torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    both = torch.stack([labels, aux], 1)
    start = torch.ones(8, 4) + 0.3 * torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
    main = CEALoss(_Stub(dim=4), num_labels=2, pairs="all")
    with_aux, without = MultitaskObjective(main, weight=1.0), MultitaskObjective(main, weight=0.0)
    aux_term = flipped_aux_loss(start, labels, aux).item()
    assert aux_term > 0.5  # all cosines start high
    assert with_aux.compute_loss_from_embeddings(start, both).item() == pytest.approx(
        without.compute_loss_from_embeddings(start, both).item() + aux_term, rel=1e-5
    )

    def optimised(objective):
        emb = torch.nn.Parameter(start.clone())
        opt = torch.optim.SGD([emb], lr=0.5)
        for _ in range(10):
            opt.zero_grad()
            objective.compute_loss_from_embeddings(emb, both).backward()
            opt.step()
        return _same_aux_other_class_cosine(emb.detach(), labels, aux)

    before = _same_aux_other_class_cosine(start, labels, aux)
    pushed, plain = optimised(with_aux), optimised(without)
    assert pushed < plain < before
    assert plain - pushed > 0.05
