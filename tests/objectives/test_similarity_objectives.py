"""Similarity objectives (cosine regression, SimCSE, miCSE, MLM, explicit triplets): values worked
out independently here, gradients, a few steps, and bad options."""

import math

import numpy as np
import pytest
import torch

from cea.encoders import load_encoder
from cea.errors import CeaError
from cea.objectives import attention_mutual_information, build_objective

SENTENCES = [
    "my card is lost",
    "transfer money to my account",
    "what is the capital city",
    "the red dog",
    "blue river in the city",
    "pay my card",
]


def _features(model, texts):
    return {k: v for k, v in model[0].preprocess(texts).items() if torch.is_tensor(v)}


def test_cosine_regression_is_the_mean_squared_error_of_cosine(tiny_st_dir):
    objective = build_objective("cosine-regression", load_encoder(tiny_st_dir, device="cpu"), 0)
    u = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    v = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    gold = torch.tensor([0.5, 0.2])
    expected = ((0.0 - 0.5) ** 2 + (1 / math.sqrt(2) - 0.2) ** 2) / 2
    assert objective.compute_loss_from_embeddings(torch.stack([u, v]), gold).item() == pytest.approx(expected, rel=1e-5)


def test_simcse_is_infonce_over_the_batch_at_temperature_005(tiny_st_dir):
    objective = build_objective("simcse", load_encoder(tiny_st_dir, device="cpu"), 0)
    z1 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    z2 = torch.tensor([[1.0, 0.2], [0.3, 1.0], [1.0, 0.0]])
    a = z1.numpy() / np.linalg.norm(z1.numpy(), axis=1, keepdims=True)
    b = z2.numpy() / np.linalg.norm(z2.numpy(), axis=1, keepdims=True)
    logits = (a @ b.T) / 0.05
    expected = np.mean([np.log(np.exp(row).sum()) - row[i] for i, row in enumerate(logits)])
    assert objective.compute_loss_from_embeddings(torch.stack([z1, z2])).item() == pytest.approx(expected, rel=1e-4)


def _reference_mi(x, y, valid):
    """Pearson of log attention over the valid entries of each (block, sentence, head), then the
    Gaussian MI, averaged, times the squared valid fraction."""
    x, y, valid = (np.asarray(t, dtype=np.float64) for t in (x, y, valid))
    valid = np.broadcast_to(valid, x.shape).astype(bool) & (x > 0) & (y > 0)
    values = []
    for index in np.ndindex(*x.shape[:-2]):
        keep = valid[index]
        rho = np.corrcoef(np.log(x[index][keep]), np.log(y[index][keep]))[0, 1]
        values.append(-0.5 * np.log(1 - rho**2))
    return float(np.mean(values)) * (valid.sum() / valid.size) ** 2


def test_attention_mutual_information_matches_an_independent_computation():
    gen = torch.Generator().manual_seed(1)
    x = torch.softmax(torch.randn(2, 2, 3, 4, 4, generator=gen), -1)  # blocks, sentences, heads, T, T
    y = torch.softmax(torch.log(x) + 0.3 * torch.randn(x.shape, generator=gen), -1)
    full = torch.ones(1, 1, 1, 4, 4, dtype=torch.bool)
    assert attention_mutual_information(x, y, full).item() == pytest.approx(_reference_mi(x, y, full), rel=1e-5)
    # both sentences padded to 3 real tokens: 9 of 16 entries valid, all of them drawn
    tokens = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 0]], dtype=torch.bool)
    valid = (tokens[:, :, None] & tokens[:, None, :])[None, :, None]
    got = attention_mutual_information(x, y, valid).item()
    assert got == pytest.approx(_reference_mi(x, y, valid), rel=1e-5)
    assert got < _reference_mi(x, y, full)  # the squared valid fraction (9/16)^2 scales it down
    # identical views: rho -> 1 is clamped, the value stays finite and large
    assert math.isfinite(attention_mutual_information(x, x, full).item())
    assert attention_mutual_information(x, x, full).item() > 3


def test_micse_gradient_reaches_the_attention_of_the_chosen_block_only(tiny_st_dir):
    torch.manual_seed(0)
    model = load_encoder(tiny_st_dir, device="cpu")  # two blocks
    objective = build_objective("micse", model, 0, micse_layers=[1], micse_lambda=1.0)
    model.train()
    features = _features(model, SENTENCES)
    _, att1 = objective._encode(dict(features))
    _, att2 = objective._encode(dict(features))
    mask = features["attention_mask"].bool()
    valid = (mask[:, :, None] & mask[:, None, :])[None, :, None]
    mi = attention_mutual_information(att1[0][None], att2[0][None], valid)
    assert mi.item() > 0
    mi.backward()
    blocks = model[0].auto_model.encoder.layer
    query = [block.attention.self.query.weight.grad for block in blocks]
    assert query[0] is not None and query[0].abs().sum() > 0  # the compared block's attention learns
    assert query[1] is None or query[1].abs().sum() == 0  # the block above does not feed block 1's attention


def test_micse_loss_is_simcse_minus_lambda_mi(tiny_st_dir):
    torch.manual_seed(0)
    model = load_encoder(tiny_st_dir, device="cpu")
    objective = build_objective("micse", model, 0, micse_layers=[1, 2], micse_lambda=0.5)
    z1, z2 = torch.randn(4, 32), torch.randn(4, 32)
    x = torch.softmax(torch.randn(2, 4, 2, 5, 5), -1)
    y = torch.softmax(torch.randn(2, 4, 2, 5, 5), -1)
    valid = torch.ones(1, 1, 1, 5, 5, dtype=torch.bool)
    simcse = build_objective("simcse", model, 0).compute_loss_from_embeddings(torch.stack([z1, z2])).item()
    loss = objective.compute_loss(z1, z2, x, y, valid).item()
    assert loss == pytest.approx(simcse - 0.5 * _reference_mi(x, y, valid), rel=1e-4)


@pytest.mark.parametrize("layers", [[0], [3], [1, 7]])
def test_micse_layers_outside_the_model_are_refused(tiny_st_dir, layers):
    with pytest.raises(CeaError, match="outside the model's 2 blocks"):
        build_objective("micse", load_encoder(tiny_st_dir, device="cpu"), 0, micse_layers=layers)


@pytest.mark.parametrize("name", ["simcse", "micse", "mlm", "cosine-regression", "triplet-rows"])
def test_a_few_steps_lower_the_loss(tiny_st_dir, name):
    torch.manual_seed(0)
    model = load_encoder(tiny_st_dir, device="cpu")
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) and name not in ("simcse", "micse"):
            module.p = 0.0  # SimCSE needs dropout: its two views differ only by it
    if name == "triplet-rows":
        objective = build_objective("triplet", model, 0, data="triplets", margin=0.5)
        batch = [
            _features(model, SENTENCES[:3]),
            _features(model, SENTENCES[3:]),
            _features(model, SENTENCES[::-1][:3]),
        ]
        labels = None
    elif name == "cosine-regression":
        objective = build_objective(name, model, 0)
        batch = [_features(model, SENTENCES[:3]), _features(model, SENTENCES[3:])]
        labels = torch.tensor([0.9, 0.1, 0.5])
    else:
        objective = build_objective(name, model, 0, **({"micse_layers": [1]} if name == "micse" else {}))
        batch = [_features(model, SENTENCES)] * (1 if name == "mlm" else 2)
        labels = None
    optimizer = torch.optim.Adam(list(objective.parameters()), lr=3e-3)

    def loss_now():
        torch.manual_seed(123)  # the same dropout masks and MLM masks before and after
        with torch.no_grad():
            return objective(batch, labels).item()

    first = loss_now()
    for step in range(15):
        torch.manual_seed(step)
        optimizer.zero_grad()
        objective(batch, labels).backward()
        optimizer.step()
    assert loss_now() < first
