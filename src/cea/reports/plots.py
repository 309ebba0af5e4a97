"""Plots as PNG files (matplotlib, no display), each written atomically: embedding maps, curves, confusions."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from ..errors import CeaError
from ..paths import atomic_path

MAX_LEGEND = 20


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# maps a row of an attention grid: four of a sentence of up to 14 tokens fill a page's width (about 10 inches)
MAPS_A_ROW = 4


def _save(fig, path, title_inches: float = 0.0) -> Path:
    """``fig`` laid out tight (``title_inches`` kept free at the top for its title) and written to ``path`` (PNG)
    whole or not at all, then closed."""
    fig.tight_layout(rect=(0, 0, 1, 1 - title_inches / fig.get_figheight()))
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    _plt().close(fig)
    return path


def project(embeddings, method: str = "tsne", perplexity: float = 30.0, seed: int = 0) -> np.ndarray:
    """2-d coordinates by t-SNE (scikit-learn, cosine metric) or UMAP (umap-learn)."""
    x = np.asarray(embeddings, dtype=np.float32)
    n = len(x)
    if method == "tsne":
        from sklearn.manifold import TSNE

        if n < 4 or perplexity >= n:
            raise CeaError(
                f"t-SNE needs more points than its perplexity: {n} points, perplexity {perplexity:g}; "
                f"pass --perplexity {max(1, (n - 1) // 3)} (or fewer) or use more points"
            )
        return TSNE(
            n_components=2, perplexity=perplexity, metric="cosine", init="pca", random_state=seed
        ).fit_transform(x)
    if method == "umap":
        import umap

        if n < 4:
            raise CeaError(f"UMAP needs at least 4 points, got {n}")
        return umap.UMAP(n_components=2, n_neighbors=min(15, n - 1), metric="cosine", random_state=seed).fit_transform(
            x
        )
    raise CeaError(f"unknown map method {method!r}; use tsne or umap")


def _scatter(ax, xy, labels, title):
    labels = np.asarray(labels).astype(str)
    names = sorted(set(labels))
    cmap = _plt().get_cmap("tab20" if len(names) > 10 else "tab10")
    for i, name in enumerate(names):
        rows = labels == name
        ax.scatter(
            xy[rows, 0], xy[rows, 1], s=6, color=cmap(i % cmap.N), label=name if len(names) <= MAX_LEGEND else None
        )
    ax.set_title(title, fontsize=10)
    ax.set(xticks=[], yticks=[])
    if len(names) <= MAX_LEGEND:
        ax.legend(fontsize=6, markerscale=2, loc="best", frameon=False)


def embedding_map(
    embeddings,
    gold,
    path,
    predicted=None,
    method: str = "tsne",
    perplexity: float = 30.0,
    title: str = "",
    seed: int = 0,
) -> Path:
    """A 2-d map of the embeddings coloured by gold label (and, beside it, by predicted label)."""
    xy = project(embeddings, method, perplexity, seed)
    panels = 1 if predicted is None else 2
    fig, axes = _plt().subplots(1, panels, figsize=(5.2 * panels, 4.6), squeeze=False)
    _scatter(axes[0, 0], xy, gold, f"{title} gold ({method})".strip())
    if predicted is not None:
        _scatter(axes[0, 1], xy, predicted, f"{title} predicted ({method})".strip())
    return _save(fig, path)


def layer_curve(path, curves: dict[str, dict[int, float]], ylabel: str, title: str = "") -> Path:
    """One line per named curve of score against layer (e.g. probe runs, frozen and fine-tuned)."""
    fig, ax = _plt().subplots(figsize=(6.4, 4))
    for name, curve in curves.items():
        ax.plot(*zip(*sorted(curve.items())), marker="o", label=name)
    ax.set(xlabel="layer (0 = embeddings)", ylabel=ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def frontier_plot(path, points: dict[str, tuple[float, float, bool]], ylabel: str, title: str = "") -> Path:
    """Accuracy against served p99 (ms, log scale) of each named candidate ``(p99, accuracy, on the frontier)``, the
    frontier joined by a line: what a latency buys (``cea fit --latency``)."""
    fig, ax = _plt().subplots(figsize=(6.4, 4))
    if front := sorted((p99, acc) for p99, acc, on in points.values() if on):
        ax.step(*zip(*front), where="post", color="tab:blue", alpha=0.5, label="frontier")
    for name, (p99, acc, on) in points.items():
        ax.scatter([p99], [acc], color="tab:blue" if on else "tab:gray", zorder=3)
        ax.annotate(name, (p99, acc), fontsize=8, xytext=(4, 4), textcoords="offset points")
    ax.set_xscale("log")
    ax.set(xlabel="p99 ms, one-text requests from 16 clients (log)", ylabel=ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    return _save(fig, path)


def training_curve(path, log_history: list[dict], title: str = "") -> Path:
    """Training loss by step and the dev metrics by step, from the trainer's log history."""
    losses = [(h["step"], float(h["loss"])) for h in log_history if "loss" in h and "step" in h]
    evals = {}
    for h in log_history:
        for key, value in h.items():
            if key.startswith("eval_dev_") and not key.endswith(("runtime", "per_second")) and "step" in h:
                evals.setdefault(key.removeprefix("eval_dev_"), []).append((h["step"], float(value)))
    if not losses and not evals:
        raise CeaError("the training log holds no loss or dev values to plot")
    fig, ax = _plt().subplots(figsize=(6.4, 4))
    if losses:
        ax.plot(*zip(*losses), color="tab:blue", label="training loss")
        ax.set_ylabel("loss")
    ax.set_xlabel("step")
    if evals:
        other = ax.twinx()
        for name, points in evals.items():
            other.plot(*zip(*points), marker="o", linestyle="--", label=f"dev {name}")
        other.set_ylabel("dev metric")
        other.legend(fontsize=7, loc="lower right")
    ax.legend(fontsize=7, loc="upper right")
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


def largest_confusions(gold, predicted, top: int = 15) -> list[tuple[str, str, int]]:
    """The ``top`` most frequent (gold, predicted) pairs with gold != predicted."""
    gold, predicted = np.asarray(gold).astype(str), np.asarray(predicted).astype(str)
    wrong = gold != predicted
    counts = Counter(zip(gold[wrong].tolist(), predicted[wrong].tolist()))
    return [(g, p, n) for (g, p), n in sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))[:top]]


def confusion_view(path, gold, predicted, top: int = 15, title: str = "") -> Path:
    """A horizontal bar chart of the largest confusions, "gold -> predicted"."""
    rows = largest_confusions(gold, predicted, top)
    fig, ax = _plt().subplots(figsize=(6.4, 0.8 + 0.28 * max(len(rows), 1)))
    if rows:
        ax.barh([f"{g} -> {p}" for g, p, _ in rows][::-1], [c for *_, c in rows][::-1], color="tab:red")
        ax.set_xlabel("test examples")
    else:
        ax.text(0.5, 0.5, "no confusions", ha="center", va="center")
        ax.set_axis_off()
    ax.tick_params(axis="y", labelsize=7)
    fig.suptitle(title or "largest confusions (gold -> predicted)", fontsize=10)  # over the labels too
    return _save(fig, path)


def attention_weights(model, sentence: str) -> tuple[list[str], np.ndarray]:
    """Tokens and attention probabilities (layers, heads, tokens, tokens) of one sentence, by eager attention."""
    import torch

    body = getattr(model[0], "auto_model", None)
    if body is None:
        raise CeaError(f"{type(model[0]).__name__} has no attention to show; attention maps need a transformer")
    if not sentence.strip():
        raise CeaError('the sentence is empty; pass --sentence "a sentence to look at"')
    inputs = {
        k: v.to(body.device)
        for k, v in model[0].preprocess([sentence]).items()
        if k in ("input_ids", "attention_mask", "token_type_ids")
    }
    before, was_training = body.config._attn_implementation, body.training
    body.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = body.eval()(**inputs, output_attentions=True, return_dict=True)
        body.train(was_training)
    finally:
        body.set_attn_implementation(before)
    tokens = model[0].tokenizer.convert_ids_to_tokens(inputs["input_ids"][0].tolist())
    return tokens, torch.stack(out.attentions)[:, 0].float().cpu().numpy()


def attention_maps(path, models: dict, sentence: str, layer: int) -> Path:
    """Block ``layer``'s (1-based) heads as a grid a page wide: each head's map of every model side by side (e.g. base
    beside fine-tuned), :data:`MAPS_A_ROW` maps a row, every map with its tokens on both axes. One row of all heads
    (BERT-base's 12 heads of a 14-token sentence: 3907 x 369 pixels) showed no token a reader could make out."""
    maps = {}
    for name, model in models.items():
        tokens, att = attention_weights(model, sentence)
        if not 1 <= layer <= len(att):
            raise CeaError(f"layer {layer} lies outside {name}'s {len(att)} blocks; choose 1..{len(att)}")
        maps[name] = (tokens, att[layer - 1])
    heads = max(a.shape[0] for _, a in maps.values())
    per_row = min(heads, max(1, MAPS_A_ROW // len(maps)))  # heads a row, each with every model's map
    rows, columns = -(-heads // per_row), per_row * len(maps)
    size = max(2.2, 0.6 + 0.14 * max(len(t) for t, _ in maps.values()))  # inches a map: its tokens at 6.5 pt
    fig, axes = _plt().subplots(rows, columns, figsize=(size * columns, size * rows + 0.5), squeeze=False)
    for head in range(rows * per_row):
        for m, (name, (tokens, att)) in enumerate(maps.items()):
            ax = axes[head // per_row, head % per_row * len(maps) + m]
            if head >= att.shape[0]:
                ax.set_axis_off()
                continue
            ax.imshow(att[head], cmap="viridis", vmin=0, vmax=1)
            ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=6.5)
            ax.set_yticks(range(len(tokens)), tokens, fontsize=6.5)
            ax.set_title(f"head {head + 1}: {name}", fontsize=8)
    fig.suptitle(f'attention, block {layer}: "{sentence}"', fontsize=10)
    return _save(fig, path, title_inches=0.4)  # the title above the first row's, not across it
