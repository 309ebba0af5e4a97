"""Study 001 (truncated fine-tuning for STS) rerun: every depth of each encoder fine-tuned on STS-B by cosine
regression, its test Spearman beside the depth's parameter count (the study's comparison and Pareto figures).

    python studies/s001_truncated.py                  # the encoders at hand, every depth, seeds 0,1,2
    python studies/s001_truncated.py --models all-MiniLM-L6-v2 --seeds 0
    python studies/s001_truncated.py --models all-MiniLM-L6-v2 --seeds 1,2 --join  # joined to seed 0's records
    python studies/s001_truncated.py --quick          # a tiny random BERT on made-up pairs (the tests)
    python studies/s001_truncated.py --plot           # the curve of the newest records, into docs/figures
    python studies/s001_truncated.py --from-records   # train nothing: the records' runs, each depth before training

Each depth d keeps the word embeddings and the first d blocks, mean-pools block d and trains 1 epoch (batch 16, lr
2e-5, cea sweep-layers' settings) on STS-B's train pairs; the figure is test Spearman x 100, the mean of the seeds,
and the parameters the truncated encoder keeps. The study publishes figures only (its claims are in its words: the
last blocks of a replaced-token-detection model are too specialised; a truncated model fine-tuned beats the full
one): ``published.jsonl`` holds none of its numbers, and the page says so.

What differs: the study's ELECTRA and BERT models load by hub id where the hub is reachable
(``--models google/electra-small-discriminator``); offline, the encoders at hand are sentence-transformers models
already trained for similarity, where truncation has less to repair.
"""

from __future__ import annotations

import dataclasses

import shared
from shared import (
    AHEAD,
    SIMILARITY_MODELS,
    arguments,
    claim,
    difference,
    figure,
    finish,
    model_name,
    quick_pairs,
    run,
    seeded,
    trained,
)

SETTINGS = {"epochs": 1.0, "batch_size": 16, "lr": 2e-5}  # cea sweep-layers' defaults


def options(parser) -> None:
    parser.add_argument("--depths", default="all", help="the depths to train: all, or e.g. 2,4,6")
    parser.add_argument(
        "--plot", action="store_true", help="draw the curve from the newest records (docs/figures), training nothing"
    )


def parameters(model: str) -> dict[int, int]:
    """The parameters an encoder keeps at each depth: all of them, less the blocks cut (and a pooler where the
    model has one: a truncated model pools block d by the mean)."""
    from cea.encoders import load_encoder, num_layers

    encoder = load_encoder(model)
    total = sum(p.numel() for p in encoder.parameters())
    depth = num_layers(encoder)
    transformer = encoder[0].auto_model
    block = sum(p.numel() for p in transformer.encoder.layer[0].parameters())
    pooler = sum(p.numel() for p in transformer.pooler.parameters()) if getattr(transformer, "pooler", None) else 0
    return {d: total - (depth - d) * block - (pooler if d < depth else 0) for d in range(1, depth + 1)}


def curve(args, model: str, data: str, sizes: dict[int, int]) -> dict[int, dict]:
    """Test Spearman of every depth of ``model`` (``sizes``: its parameters by depth), mean of the seeds, each a
    record, and of the depth before training; returns depth -> its record (``value``, the mean; ``runs``, seed ->
    run), the depths with runs only (``--from-records``: those whose records kept them)."""
    from cea import TrainConfig, load_encoder

    scores = {}
    depths = sizes if args.depths == "all" else [int(d) for d in args.depths.split(",")]
    for depth in depths:
        size = sizes[depth]
        runs = {}
        for seed in [] if args.from_records else args.seeds:
            config = TrainConfig(
                dataset=data,
                model=model,
                objective="cosine-regression",
                layers=depth,
                seed=seed,
                output=str(args.output / model_name(model) / f"layer-{depth}" / f"seed-{seed}"),
                **SETTINGS,
            )
            if args.quick:
                config = dataclasses.replace(config, max_steps=3)
            results = trained(config)
            runs[seed] = run(results, results["metrics"]["test"]["spearman"])
        kept = seeded(
            args,
            "truncated fine-tuning",
            f"{depth} of {len(sizes)} blocks",
            "stsb test Spearman",
            runs,
            model=model,
            unit="Spearman x 100",
            also=f"{size / 1e6:.1f}M parameters",
            parameters=size,
        )
        if kept is not None:
            scores[depth] = kept
        figure(
            args,
            "truncated fine-tuning",
            f"{depth} of {len(sizes)} blocks",
            "before training",
            shared.spearman_on_test(load_encoder(model, layers=depth), data),
            model=model,
            unit="Spearman x 100",
            note="the truncated model as it comes, no training",
        )
    return scores


def recorded_curves(
    args, column: str = "stsb test Spearman"
) -> tuple[dict[str, dict[int, float]], dict[str, dict[int, int]]]:
    """The curves of the newest records of ``column`` (after training, or ``before training``): model -> depth ->
    test Spearman, and the parameters of each depth (where the records name them)."""
    curves: dict[str, dict[int, float]] = {}
    sizes: dict[str, dict[int, int]] = {}
    for r in shared.recorded(args):
        if r.get("table") == "truncated fine-tuning" and r.get("column") == column:
            depth = int(r["row"].split(" of ")[0])
            curves.setdefault(r["model"], {})[depth] = r["value"]
            if "parameters" in r:
                sizes.setdefault(r["model"], {})[depth] = r["parameters"]
    return {m: dict(sorted(c.items())) for m, c in curves.items()}, sizes


def pareto(args, curves: dict[str, dict[int, float]], sizes: dict[str, dict[int, int]]) -> None:
    """The study's Pareto figure: test Spearman against parameters, a line per encoder (:func:`shared.picture`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    before = recorded_curves(args, "before training")[0]
    fig, ax = plt.subplots(figsize=(6, 4))
    for model, scores in curves.items():
        (line,) = ax.plot(
            [sizes[model][d] / 1e6 for d in scores], list(scores.values()), marker="o", label=model_name(model)
        )
        untrained = {d: v for d, v in before.get(model, {}).items() if d in sizes[model]}
        if untrained:
            ax.plot(
                [sizes[model][d] / 1e6 for d in untrained],
                list(untrained.values()),
                ls="--",
                marker=".",
                color=line.get_color(),
                label=f"{model_name(model)}, before training",
            )
        for d, score in scores.items():
            ax.annotate(str(d), (sizes[model][d] / 1e6, score), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set(
        xlabel="parameters (millions)",
        ylabel="STS-B test Spearman x 100",
        title="truncated fine-tuning: depth (labels) against size",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    path = shared.picture(args, "curve")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    print(f"written {path}")


def main() -> None:
    args = arguments("001", __doc__, extra=options, joins=True)
    if args.plot:
        pareto(args, *recorded_curves(args))
        return
    data = quick_pairs(args.output / "data-pairs") if args.quick else "stsb"
    for model in args.models:
        sizes = parameters(model)
        kept = curve(args, model, data, sizes)
        scores = {**recorded_curves(args)[0].get(model_name(model), {}), **{d: r["value"] for d, r in kept.items()}}
        scores = {d: scores[d] for d in sorted(scores)}  # the newest means: the records', those just made first
        full = max(sizes)
        if full not in scores or len(scores) < 2:
            print(f"the full model ({full} blocks) and a truncated one are not both among --depths: no verdict")
            continue
        best = max((d for d in scores if d < full), key=scores.get)  # the truncated depth nearest to beating it
        print(f"\n{model_name(model)}: " + ", ".join(f"{d} blocks {v:.2f}" for d, v in scores.items()))
        untested = (
            "a similarity model; the claim is ELECTRA's and BERT's" if model_name(model) in SIMILARITY_MODELS else None
        )
        compared = [difference(kept[best]["runs"], kept[full]["runs"])] if best in kept and full in kept else []
        claim(
            args,
            f"a truncated model beats the full one after fine-tuning ({model_name(model)})",
            compared,
            f"depth {best} of {full}: {scores[best]:.2f} ({sizes[best] / 1e6:.1f}M), the full model "
            f"{scores[full]:.2f} ({sizes[full] / 1e6:.1f}M)",
            kind=AHEAD,
            untested=untested,
        )
    pareto(args, *recorded_curves(args))
    finish(args)


if __name__ == "__main__":
    main()
