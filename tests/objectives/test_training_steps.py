"""A few optimiser steps on a tiny random BERT lower every objective's loss; datapoint memory
re-encodes with gradients."""

import traceback

import pytest
import torch

from cea.encoders import load_encoder
from cea.objectives import build_objective

TEXTS = [
    "my card is lost",
    "my card was lost a",
    "lost card my",
    "card lost",
    "transfer money to my account",
    "transfer money now",
    "money transfer to account",
    "account transfer",
    "capital city of the country",
    "the capital city",
    "what is the capital",
    "country capital city",
]
LABELS = torch.tensor([0] * 4 + [1] * 4 + [2] * 4)


def _steps(objective, model, n=15):
    features = model[0].preprocess(TEXTS)
    features = {k: v for k, v in features.items() if torch.is_tensor(v)}
    optimizer = torch.optim.Adam(list(objective.parameters()), lr=3e-3)
    with torch.no_grad():
        objective([features], LABELS)  # fills memories, so the first loss is a real one
        first = objective([features], LABELS).item()
    for _ in range(n):
        optimizer.zero_grad()
        objective([features], LABELS).backward()
        optimizer.step()
    with torch.no_grad():
        final = objective([features], LABELS).item()
    return first, final


@pytest.mark.parametrize(
    "name, options",
    [
        ("softmax", {}),
        ("cea", {"pairs": "sampled"}),
        ("cea", {"pairs": "all"}),
        ("cea", {"pairs": "all", "memory": "bank", "memory_size": 24}),
        ("cea", {"pairs": "all", "memory": "datapoint"}),
        ("cea", {"pairs": "sampled", "memory": "mixed"}),
        ("cea", {"pairs": "sampled", "memory": "class"}),
        ("cea", {"pairs": "sampled", "memory": "datapoint"}),
        ("triplet", {}),
        ("triplet", {"mining": "hard"}),
        ("supcon", {}),
        ("normalized-softmax", {}),
    ],
)
def test_a_few_steps_lower_the_loss(tiny_bert_dir, name, options):
    torch.manual_seed(0)
    model = load_encoder(tiny_bert_dir, device="cpu")
    for module in model.modules():  # no dropout: compare like with like
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    objective = build_objective(name, model, num_labels=3, seed=0, **options)
    first, final = _steps(objective, model)
    assert final < first, (name, options, first, final)


def test_datapoint_memory_reencodes_with_gradients(tiny_bert_dir):
    model = load_encoder(tiny_bert_dir, device="cpu")
    objective = build_objective("cea", model, num_labels=3, pairs="all", memory="datapoint")
    features = {k: v for k, v in model[0].preprocess(TEXTS).items() if torch.is_tensor(v)}
    objective([features], LABELS)
    partners, labels = objective.memory.partners(model)
    assert labels.tolist() == [0, 1, 2] and partners.requires_grad
    expected = model.encode([TEXTS[3], TEXTS[7], TEXTS[11]], convert_to_tensor=True)  # the latest per label
    model.eval()
    with torch.no_grad():
        again, _ = objective.memory.partners(model)
    torch.testing.assert_close(again, expected, atol=1e-5, rtol=1e-4)


def test_datapoint_memory_in_length_chunks_equals_one_padded_block(tiny_bert_dir):
    """Encoding the examples in length-sorted chunks changes only the padding, not the embeddings,
    and every row stays with its own label."""
    model = load_encoder(tiny_bert_dir, device="cpu")
    model.eval()
    texts = [
        "card",
        "my card was lost somewhere in the city last night",
        "money now",
        "transfer money to my account please",
        "capital",
        "what is the capital city of that country",
    ]
    labels = torch.tensor([0, 1, 2, 3, 4, 5])
    features = {k: v for k, v in model[0].preprocess(texts).items() if torch.is_tensor(v)}
    objective = build_objective("cea", model, num_labels=8, pairs="all", memory="datapoint")
    objective.memory.update(None, labels, features)
    with torch.no_grad():
        objective.memory.chunk = 2
        chunked, chunked_labels = objective.memory.partners(model)
        objective.memory.chunk = 100
        whole, whole_labels = objective.memory.partners(model)
    assert chunked_labels.tolist() == whole_labels.tolist() == [0, 1, 2, 3, 4, 5]
    torch.testing.assert_close(chunked, whole, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(chunked, model.encode(texts, convert_to_tensor=True), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(
    "name, options",
    [
        ("softmax", {}),
        ("cea", {"pairs": "all"}),
        ("triplet", {}),
        ("supcon", {}),
        ("normalized-softmax", {}),
    ],
)
def test_length_sorted_chunks_give_the_whole_batch_loss_and_gradients(tiny_bert_dir, name, options):
    """Issue 15: an objective encoding its batch in chunks of 3 scores the same loss with the same
    gradients as one padded pass (eval mode: no dropout, so both compute one function)."""
    texts = TEXTS + ["a"] * 2 + ["a much longer text than every other text of this small batch, by far"] * 2
    labels = torch.cat([LABELS, torch.tensor([0, 1, 2, 0])])
    results = []
    for chunk in (None, 3):
        torch.manual_seed(0)
        model = load_encoder(tiny_bert_dir, device="cpu").eval()
        objective = build_objective(name, model, num_labels=3, seed=0, **options)
        objective.chunk_size = chunk
        features = {k: v for k, v in model[0].preprocess(texts).items() if torch.is_tensor(v)}
        loss = objective([features], labels)
        loss.backward()
        results.append(
            (loss.item(), torch.cat([p.grad.flatten() for p in objective.parameters() if p.grad is not None]))
        )
    (whole, g_whole), (chunked, g_chunked) = results
    assert chunked == pytest.approx(whole, rel=1e-5)
    assert (g_chunked - g_whole).norm() <= 1e-5 * g_whole.norm()


# aten ops that make the host wait for the device: a value read back (item, a truth value) or a shape known only
# after the data are read (a boolean mask's nonzero)
SYNCS = {"_local_scalar_dense", "nonzero", "masked_select", "is_nonzero", "equal", "unique", "_unique2"}


class _Ops(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        # transformers' attention mask reads ``padding_mask.all()`` in every forward: the model's, not cea's
        if not any("/transformers/" in frame.filename for frame in traceback.extract_stack()):
            self.names.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(
    "name, options",
    [("softmax", {}), ("cea", {}), ("cea", {"reduction": "balanced"}), ("cea", {"memory": "bank", "memory_size": 24})],
)
def test_a_training_step_never_waits_for_the_device(tiny_bert_dir, name, options, tmp_path):
    """The defaults' objective and cea's: forward, loss and backward use no op that reads a value back, so on a GPU
    the host queues the next step while this one runs; the NaN guard reads the loss only every ``every`` steps."""
    from cea.training.train import _NaNGuard

    model = load_encoder(tiny_bert_dir, device="cpu")
    objective = build_objective(name, model, num_labels=3, seed=0, **options)
    guard = _NaNGuard(objective, tmp_path, lr=1e-3, every=3)
    features = {k: v for k, v in model[0].preprocess(TEXTS).items() if torch.is_tensor(v)}
    counted = []
    for _ in range(3):
        with _Ops() as ops:
            guard([features], LABELS).backward()
        counted.append(sorted(set(ops.names) & SYNCS))
    assert counted[:2] == [[], []] and counted[2] == ["_local_scalar_dense"], counted


def test_the_nan_guard_names_the_steps_it_read(tiny_bert_dir, tmp_path):
    from cea.errors import CeaError
    from cea.training.train import _NaNGuard

    model = load_encoder(tiny_bert_dir, device="cpu")
    objective = build_objective("softmax", model, num_labels=3)
    with torch.no_grad():
        objective.head.weight.fill_(float("nan"))
    guard = _NaNGuard(objective, tmp_path, lr=1e-3, every=2)
    features = {k: v for k, v in model[0].preprocess(TEXTS).items() if torch.is_tensor(v)}
    guard([features], LABELS)  # step 1: not read
    with pytest.raises(CeaError, match="NaN or infinite at steps 1-2"):
        guard([features], LABELS)
