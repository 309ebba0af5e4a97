"""Every plot from small fixtures, with no display; bad input for t-SNE."""

import numpy as np
import pytest

from cea.errors import CeaError
from cea.reports.plots import (
    confusion_view,
    embedding_map,
    frontier_plot,
    largest_confusions,
    layer_curve,
    project,
    training_curve,
)

PNG = b"\x89PNG\r\n\x1a\n"


def _picture(path, width, height, ink=0.01, colours=100):
    """The PNG's RGB pixels, after checking its size and that enough of it is drawn on."""
    from matplotlib.image import imread

    assert path.read_bytes()[:8] == PNG
    rgb = imread(path)[..., :3]
    assert rgb.shape[:2] == (height, width)
    assert (rgb < 0.95).any(-1).mean() > ink  # share of pixels that are not (near) white
    assert len(np.unique((rgb * 255).round().astype(np.uint8).reshape(-1, 3), axis=0)) > colours
    return rgb


def _share(rgb, colour):
    from matplotlib.colors import to_rgb

    return (np.abs(rgb - np.array(to_rgb(colour))).max(-1) < 0.02).mean()


@pytest.fixture
def points():
    rng = np.random.default_rng(0)
    centres = np.eye(8)[:3] * 5
    x = np.concatenate([c + rng.normal(size=(15, 8)) for c in centres])
    return x, np.repeat(["a", "b", "c"], 15)


@pytest.mark.parametrize("method", ["tsne", "umap"])
def test_embedding_maps(tmp_path, points, method):
    x, y = points
    path = embedding_map(x, y, tmp_path / f"{method}.png", predicted=y[::-1], method=method, perplexity=10)
    rgb = _picture(path, 1144, 506, ink=0.015)  # two panels of 5.2 x 4.6 inches at 110 dpi
    assert all(_share(rgb, c) > 0.0004 for c in ("tab:blue", "tab:orange", "tab:green"))  # one per label
    xy = project(x, method, perplexity=10)
    assert xy.shape == (45, 2) and np.isfinite(xy).all()


def test_tsne_with_too_few_points_suggests_a_perplexity(points):
    x, _ = points
    with pytest.raises(CeaError, match="12 points, perplexity 30; pass --perplexity 3"):
        project(x[:12], "tsne", perplexity=30)
    with pytest.raises(CeaError, match="unknown map method"):
        project(x, "pca")


def test_the_frontier_is_drawn_blue_the_rest_grey(tmp_path):
    points = {"frozen": (90.0, 88.0, False), "trained": (100.0, 92.0, True), "static": (2.0, 85.0, True)}
    drawn = _picture(frontier_plot(tmp_path / "f.png", points, "dev accuracy", "what 20 ms buys"), 704, 440, ink=0.02)
    assert _share(drawn, "tab:blue") > 0.0003 and _share(drawn, "tab:gray") > 0.0005  # two markers, one
    grey = _picture(frontier_plot(tmp_path / "g.png", {k: (*v[:2], False) for k, v in points.items()}, "dev"), 704, 440)
    assert _share(grey, "tab:blue") == 0 and _share(grey, "tab:gray") > _share(drawn, "tab:gray")  # none marked


def test_curves_and_confusions(tmp_path):
    curve = _picture(
        layer_curve(tmp_path / "l.png", {"frozen": {0: 80.0, 1: 85.0, 2: 83.0}}, "accuracy"), 704, 440, ink=0.03
    )
    assert _share(curve, "tab:blue") > 0.002  # the line and its markers
    history = [
        {"loss": 1.0, "step": 1},
        {"loss": 0.5, "step": 2},
        {"eval_dev_knn_accuracy": 0.8, "eval_dev_runtime": 3.0, "step": 2},
    ]
    _picture(training_curve(tmp_path / "t.png", history), 704, 440, ink=0.02)
    with pytest.raises(CeaError, match="no loss or dev values"):
        training_curve(tmp_path / "none.png", [{"epoch": 1}])
    gold = ["a", "a", "a", "b", "b", "c", "c"]
    pred = ["b", "b", "a", "a", "c", "a", "c"]
    assert largest_confusions(gold, pred) == [("a", "b", 2), ("b", "a", 1), ("b", "c", 1), ("c", "a", 1)]
    assert largest_confusions(gold, pred, top=1) == [("a", "b", 2)]
    bars = _picture(confusion_view(tmp_path / "c.png", gold, pred), 704, 211, ink=0.1)  # 4 rows
    assert _share(bars, "tab:red") > 0.1
    empty = _picture(confusion_view(tmp_path / "none.png", gold, gold), 704, 118)
    assert _share(empty, "tab:red") == 0


def test_attention_maps_base_beside_another(tmp_path, tiny_st_dir, tiny_bert_dir):
    from cea.encoders import load_encoder
    from cea.encoders.bag import build_bag_encoder
    from cea.reports.plots import attention_maps, attention_weights

    base = load_encoder(tiny_st_dir)
    implementation = base[0].auto_model.config._attn_implementation
    tokens, att = attention_weights(base, "my card is lost")
    assert base[0].auto_model.config._attn_implementation == implementation  # put back as it was
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and att.shape == (2, 2, len(tokens), len(tokens))
    np.testing.assert_allclose(att.sum(-1), 1.0, rtol=1e-5)  # probabilities over keys
    other = load_encoder(tiny_bert_dir)
    path = attention_maps(tmp_path / "a.png", {"base": base, "other": other}, "my card is lost", layer=2)
    size = 2.2  # inches a map (a short sentence): each head's two maps side by side, both heads in one row
    _picture(path, int(size * 4 * 110), int((size + 0.5) * 110), ink=0.2)  # the heat maps fill most of it
    long = "I still have not received my new card and the app says it was delivered last week already"
    tokens = attention_weights(base, long)[0]
    path = attention_maps(tmp_path / "l.png", {"base": base}, long, layer=1)
    size = 0.6 + 0.14 * len(tokens)  # grows with the tokens so that they stay legible; its two heads in one row
    _picture(path, int(size * 2 * 110), int((size + 0.5) * 110), ink=0.1)
    with pytest.raises(CeaError, match="layer 3 lies outside base's 2 blocks"):
        attention_maps(tmp_path / "b.png", {"base": base}, "my card", layer=3)
    with pytest.raises(CeaError, match="has no attention to show"):
        attention_weights(build_bag_encoder(["a b"], dim=2), "a b")
    with pytest.raises(CeaError, match="the sentence is empty"):
        attention_weights(base, "  ")
