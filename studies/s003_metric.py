"""Study 003, "classification vs metric learning": the same 32-d bag of word embeddings (``nn.EmbeddingBag``, cea's
``bag:32``) trained from scratch for 10 epochs in batches of 64 by cross-entropy on a linear head (cea ``softmax``,
the head started at random) or by a triplet loss of margin 0.2 (cea ``triplet``), then compared on the test split:

1. cohesion (mean cosine between two test embeddings of a label): per label on a set of few classes (the study's
   table 7-1) and its distribution over the labels of a set of many (table 7-2);
2. imbalance (section 8): the few-class set with one label kept at 10 % of its training texts (the label turns with
   the seed), and the many-class set's 30 smallest labels as they are; the study's three indicators
   (:func:`cea.evaluation.geometry.imbalance_indicators`);
3. transfer (section 9): the encoders trained on the many-class set fine-tuned on the few-class one under the study's
   MLP head; test accuracy, beside a logistic regression on the frozen embeddings (C chosen on dev);
4. t-SNE maps of the test embeddings (:func:`cea.reports.plots.embedding_map`) in the output folder, ``maps/``.

    python studies/s003_metric.py [--seeds 0,1,2] [--data dbpedia219,yahoo] [--quick]

What differs from the study: the data are cea's ``dbpedia219`` (7,000 training texts, 219 long-tailed labels, for
the study's DBpedia of 240,942) and ``yahoo`` (7,000, 10 topics) standing in for AG_NEWS, which only the hub has; the
tokenisation is cea's bag's (lower-cased words and punctuation); the study names no learning rate, so both objectives
take cea's for a bag of embeddings (0.01, AdamW, linear decay after 10 % warm-up); cea's softmax head reads the
unit-length embedding; the study's classification batches are shuffled, the triplet's are P x K (4 texts of a label:
mining needs positives in the batch); every epoch runs (no early stop) and the last weights are kept. The study's
fine-tuning names no epochs nor optimiser: 10 epochs of Adam at 0.01, words unknown to the pre-trained vocabulary
read as one unknown word.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

import shared
from shared import claim, difference, figure, finish, mean, side_by_side

MODEL = "bag:32"
OBJECTIVES = {"softmax": "classification", "triplet": "metric learning"}  # cea's objective -> the study's column
OPTIONS = {"softmax": {"head_init": "random"}, "triplet": {"margin": 0.2}}
SAMPLER = {"softmax": "shuffle", "triplet": "pk"}
STATS = ("mean", "std", "min", "25%", "50%", "75%", "max")  # pandas' describe, as the study's table 7-2
INDICATORS = ("small_cohesion", "small_to_large", "small_to_small")
SMALLEST, KEPT = 30, 0.1


def flags(parser) -> None:
    parser.add_argument(
        "--data",
        default="dbpedia219,yahoo",
        help="MANY,FEW: the set of many classes (DBpedia's place) and of few (AG_NEWS's)",
    )


def data_sets(args) -> tuple[str, str]:
    """The many-class and the few-class set: cea's catalog names, or in ``--quick`` two made-up folders."""
    if args.quick:
        many = shared.quick_labelled(args.output / "data-many", classes=12, sizes=[24] * 6 + [8] * 6)
        return many, shared.quick_labelled(args.output / "data-few", classes=4)
    many, few = (d.strip() for d in args.data.split(","))
    print(f"data: {many} for DBpedia, {few} standing in for AG_NEWS (on the hub only, out of reach here)", flush=True)
    return many, few


def name(dataset: str) -> str:
    return Path(dataset).name


def run(args, dataset: str, objective: str, seed: int, imbalance: str | None = None) -> Path:
    """A finished ``bag:32`` run of ``objective`` on ``dataset`` (reused where it finished before)."""
    from cea.training import TrainConfig

    tag = f"-{imbalance.replace(' ', '_').replace('&', 'and')}" if imbalance else ""
    folder = args.output / "runs" / f"{name(dataset)}-{objective}{tag}-seed{seed}"
    results = shared.trained(
        TrainConfig(
            dataset=dataset,
            model=MODEL,
            objective=objective,
            options=OPTIONS[objective],
            epochs=args.epochs,
            batch_size=64,
            seed=seed,
            sampler=SAMPLER[objective],
            imbalance=imbalance,
            label_names="off",
            patience=None,
            select="last",
            output=str(folder),
        )
    )
    args.lr = results["config"]["lr"]
    return folder


def test_embeddings(folder: Path, ds) -> np.ndarray:
    """A run's test embeddings (read from the run's store: its final judgement encoded them)."""
    from cea.encoders import load_encoder
    from cea.encoders.store import run_store

    model = str(folder / "model")
    return run_store(model).encode(load_encoder(model, device="cpu"), list(ds["test"]["text"]))


def normal_case(args, dataset: str, shown: dict) -> dict[str, list[dict]]:
    """Each objective's cohesion per label of each seed (``{objective: [{label: cohesion}, ...]}``); the first
    seed's test embeddings and gold labels into ``shown`` (``(dataset, objective)``: :func:`maps` draws them)."""
    from cea.data import load_dataset
    from cea.evaluation.geometry import cohesion

    ds, out = load_dataset(dataset), {}
    for objective in OBJECTIVES:
        out[objective] = []
        for seed in args.seeds:
            emb = test_embeddings(run(args, dataset, objective, seed), ds)
            out[objective].append(cohesion(emb, ds["test"]["label"].to_numpy())["per_label"])
            if seed == args.seeds[0]:
                shown[dataset, objective] = (emb, ds["test"]["label"].to_numpy())
    return out


def maps(args, shown: dict) -> None:
    """The study's maps in one picture (:func:`shared.picture`): a row a data set, classification beside metric
    learning, each test text a dot coloured by its gold label (t-SNE of the first seed's test embeddings)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from cea.reports.plots import project

    sets = list(dict.fromkeys(dataset for dataset, _ in shown))
    fig, axes = plt.subplots(
        len(sets), len(OBJECTIVES), figsize=(4.8 * len(OBJECTIVES), 3.8 * len(sets)), squeeze=False
    )
    for i, dataset in enumerate(sets):
        for j, (objective, column) in enumerate(OBJECTIVES.items()):
            emb, gold = shown[dataset, objective]
            xy = project(emb, "tsne", min(30.0, (len(emb) - 1) // 3), 0)
            axes[i, j].scatter(xy[:, 0], xy[:, 1], c=pd.factorize(gold)[0], cmap="tab20", s=3, linewidths=0)
            axes[i, j].set(title=f"{name(dataset)} ({len(set(gold))} labels), {column}", xticks=[], yticks=[])
    fig.suptitle("test embeddings by gold label (t-SNE)")
    path = shared.picture(args, "maps")
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    print(f"written {path}", flush=True)


def draw(embedding_map, emb, labels, path: Path, title: str) -> None:
    embedding_map(emb, labels, path, perplexity=min(30.0, (len(emb) - 1) // 3), title=title)
    print(f"written {path}", flush=True)


def note(args) -> str:
    return f"{args.epochs:g} epochs, batch 64, lr {args.lr:g}; seeds {','.join(map(str, args.seeds))}"


def per_label_table(args, dataset: str, found: dict[str, list[dict]]) -> dict[str, dict[int, float]]:
    """Table 7-1 on ``dataset``: each label's cohesion and their average, means over seeds; returns each objective's
    average of each seed."""
    ours, averages = {}, {}
    for objective, column in OBJECTIVES.items():
        labels = sorted(found[objective][0], key=str)
        for label in labels:
            ours[(str(label), column)] = mean(seed[label] for seed in found[objective])
        averages[objective] = each_seeds_mean(args, found[objective])
        ours[("average", column)] = mean(averages[objective].values())
    for (row, column), value in ours.items():
        figure(
            args,
            "cohesion per label",
            row,
            column,
            value,
            model=MODEL,
            unit="mean cosine",
            note=note(args),
            data=name(dataset),
        )
    side_by_side(args.study, "cohesion per label", ours, f"bag:32 on {name(dataset)}")
    return averages


def distribution_table(args, dataset: str, found: dict[str, list[dict]]) -> dict[str, dict[int, float]]:
    """Table 7-2 on ``dataset``: the distribution of the labels' cohesion, each statistic a mean over seeds; returns
    each objective's mean cohesion of each seed."""
    import pandas as pd

    ours = {}
    for objective, column in OBJECTIVES.items():
        described = [pd.Series(list(seed.values())).describe() for seed in found[objective]]
        for stat in STATS:
            ours[(stat, column)] = mean(float(d[stat]) for d in described)
    for (row, column), value in ours.items():
        figure(
            args,
            "cohesion distribution",
            row,
            column,
            value,
            model=MODEL,
            unit="cosine: a label's cohesion, over the labels",
            note=note(args) + "; over the labels",
            data=name(dataset),
        )
    side_by_side(args.study, "cohesion distribution", ours, f"bag:32 on {name(dataset)}")
    return {objective: each_seeds_mean(args, found[objective]) for objective in OBJECTIVES}


def each_seeds_mean(args, per_seed: list[dict]) -> dict[int, float]:
    """Seed -> the mean over the labels of that seed's cohesion (``per_seed``: one ``{label: cohesion}`` a seed)."""
    return {seed: float(np.mean(list(per_label.values()))) for seed, per_label in zip(args.seeds, per_seed)}


def indicators(args, dataset: str, small_of, imbalanced: bool) -> dict[str, dict[str, dict[int, float]]]:
    """The three indicators of each objective on ``dataset``, each seed's: ``small_of(seed, labels)`` names the
    small labels; ``imbalanced``: they were kept at 10 % in training (else the data's own tail, the normal runs)."""
    from cea.data import load_dataset
    from cea.evaluation.geometry import imbalance_indicators
    from cea.reports.plots import embedding_map

    ds = load_dataset(dataset)
    labels = sorted(set(ds["train"]["label"]), key=str)
    out = {}
    for objective, column in OBJECTIVES.items():
        found = []
        for seed in args.seeds:
            small = small_of(seed, labels, ds)
            spec = ",".join(f"{s}:{KEPT}" for s in small) if imbalanced else None
            emb = test_embeddings(run(args, dataset, objective, seed, spec), ds)
            found.append(imbalance_indicators(emb, ds["test"]["label"].to_numpy(), small))
            if imbalanced and seed == args.seeds[0]:
                gold = ds["test"]["label"].where(ds["test"]["label"].isin(small), "the others")
                draw(
                    embedding_map,
                    emb,
                    gold,
                    args.output / "maps" / f"{name(dataset)}-imbalanced-{objective}.png",
                    f"{name(dataset)}, {small[0]} at 10 %, {column}",
                )
        out[objective] = {
            k: {seed: f[k] for seed, f in zip(args.seeds, found)} for k in INDICATORS if not np.isnan(found[0][k])
        }
    return out


def imbalance_table(args, many: str, few: str) -> dict[str, dict]:
    """Section 8: one label of ``few`` kept at 10 % (``labels[seed % n]``), and ``many``'s smallest labels."""
    from cea.evaluation.geometry import smallest_labels

    n_small = SMALLEST if not args.quick else 4
    found = {
        few: indicators(args, few, lambda seed, labels, ds: [labels[seed % len(labels)]], True),
        many: indicators(args, many, lambda seed, labels, ds: smallest_labels(ds["train"]["label"], n_small), False),
    }
    ours = {}
    for dataset, by_objective in found.items():
        what = f"a label at {KEPT:.0%} (by seed)" if dataset == few else f"its {n_small} smallest labels"
        for objective, column in OBJECTIVES.items():
            for key, seeds in by_objective[objective].items():
                ours[(f"{key}, {name(dataset)}", column)] = value = mean(seeds.values())
                figure(
                    args,
                    "imbalance",
                    f"{key}, {name(dataset)}",
                    column,
                    value,
                    model=MODEL,
                    unit="mean cosine",
                    note=f"{note(args)}; {what}",
                    data=name(dataset),
                )
    side_by_side(args.study, "imbalance", ours, "bag:32; cohesion higher is better, the others lower")
    return found


class FineTuning(nn.Module):
    """The study's fine-tuning model (section 9) around a trained bag encoder: dropout 0.2, batch norm, 32 -> 64,
    dropout, batch norm, 64 -> classes, tanh. Written here in torch: no library carries this exact head (cea's
    heads are linear), and the study's transfer is this head, trained with the encoder."""

    def __init__(self, encoder, n_classes: int, hidden: int = 64, dropout: float = 0.2):
        super().__init__()
        d = encoder.get_embedding_dimension()
        self.encoder = encoder
        self.head = nn.Sequential(
            nn.Dropout(dropout),
            nn.BatchNorm1d(d),
            nn.Linear(d, hidden),
            nn.Dropout(dropout),
            nn.BatchNorm1d(hidden),
            nn.Linear(hidden, n_classes),
        )

    def forward(self, texts: list[str]) -> torch.Tensor:
        return torch.tanh(self.head(self.encoder(self.encoder.tokenize(texts))["sentence_embedding"]))


def fine_tune(encoder, ds, epochs: int, seed: int, lr: float = 0.01, batch: int = 64) -> float:
    """Test accuracy (%) of :class:`FineTuning` on ``encoder`` trained on ``ds``'s train split (cross-entropy)."""
    torch.manual_seed(seed)
    names = sorted(set(ds["train"]["label"]), key=str)
    ids = {label: i for i, label in enumerate(names)}
    texts, y = list(ds["train"]["text"]), torch.tensor([ids[x] for x in ds["train"]["label"]])
    model = FineTuning(encoder, len(names))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        model.train()
        order = torch.randperm(len(texts))
        for start in range(0, len(texts) - 1, batch):
            rows = order[start : start + batch]
            if len(rows) < 2:  # batch norm needs two
                continue
            loss = torch.nn.functional.cross_entropy(model([texts[i] for i in rows]), y[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()
    test = list(ds["test"]["text"])
    with torch.no_grad():
        predicted = torch.cat([model(test[i : i + 256]).argmax(1) for i in range(0, len(test), 256)])
    gold = np.array([ids.get(x, -1) for x in ds["test"]["label"]])
    return round(100 * float(np.mean(predicted.numpy() == gold)), 2)


def transfer(args, many: str, few: str) -> dict[str, dict[int, float]]:
    """Section 9: each objective's encoder of ``many`` fine-tuned on ``few`` with the study's MLP, and frozen under a
    logistic regression; test accuracy, means over seeds. Returns each seed's fine-tuned accuracy."""
    from cea.data import load_dataset
    from cea.encoders import load_encoder
    from common import encoded, logreg_on_dev

    ds = load_dataset(few)
    rows, tuned_of = {"MLP fine-tuned": {}, "frozen, logistic regression": {}}, {}
    for objective in OBJECTIVES:
        tuned, frozen = [], []
        for seed in args.seeds:
            model = str(run(args, many, objective, seed) / "model")
            x, y = encoded(load_encoder(model, device="cpu"), {s: ds[s] for s in ("train", "dev", "test")})
            head, _, _ = logreg_on_dev(x, y)
            frozen.append(100 * float(np.mean(head.predict(x["test"]) == y["test"])))
            tuned.append(fine_tune(load_encoder(model, device="cpu"), ds, args.epochs, seed))
        rows["MLP fine-tuned"][objective], rows["frozen, logistic regression"][objective] = mean(tuned), mean(frozen)
        tuned_of[objective] = dict(zip(args.seeds, tuned))
    ours = {}
    for row, by_objective in rows.items():
        for objective, column in OBJECTIVES.items():
            ours[(row, column)] = by_objective[objective]
            figure(
                args,
                "transfer",
                row,
                column,
                by_objective[objective],
                model=MODEL,
                unit="% accuracy",
                note=f"encoder of {name(many)}; {note(args)}",
                data=name(few),
                pretrained_on=name(many),
            )
    side_by_side(args.study, "transfer", ours, f"bag:32 of {name(many)} on {name(few)}, % test accuracy")
    return tuned_of


def verdicts(args, few_avg, many_mean, imbalance, tuned, many: str, few: str) -> None:
    """The study's four claims, each decided on the seeds' figures measured above (:func:`shared.verdict`)."""
    t, s = "triplet", "softmax"
    claim(
        args,
        "metric learning more cohesive with few classes",
        [difference(few_avg[t], few_avg[s])],
        f"{name(few)} average cohesion, metric learning against classification: {mean(few_avg[t].values())} vs "
        f"{mean(few_avg[s].values())}",
    )
    claim(
        args,
        "classification more cohesive with many classes",
        [difference(many_mean[s], many_mean[t])],
        f"{name(many)} mean cohesion, classification against metric learning: {mean(many_mean[s].values())} vs "
        f"{mean(many_mean[t].values())}",
    )
    small, tail = imbalance[few], imbalance[many]
    claim(
        args,
        "metric learning more cohesive with imbalance",
        [difference(small[t]["small_cohesion"], small[s]["small_cohesion"])],
        f"metric vs classification: {name(few)} 10 % label {mean(small[t]['small_cohesion'].values())} vs "
        f"{mean(small[s]['small_cohesion'].values())}; {name(many)} tail "
        f"{mean(tail[t]['small_cohesion'].values())} vs {mean(tail[s]['small_cohesion'].values())}",
    )
    tail_claims(args, tail, many)
    claim(
        args,
        "metric learning transfers better",
        [difference(tuned[t], tuned[s])],
        f"{name(many)} -> {name(few)}, the study's MLP, % test: metric learning {mean(tuned[t].values())}, "
        f"classification {mean(tuned[s].values())}",
    )


def tail_claims(args, tail: dict, many: str) -> None:
    """Section 8-2's reading of the many-class set's smallest labels (``tail``: objective -> indicator -> seed ->
    figure): classification draws a small label's texts closer together, metric learning keeps the small labels
    further from the others (lower cosine to the large labels and to each other)."""
    t, s = "triplet", "softmax"
    if "small_cohesion" in tail[s] and "small_cohesion" in tail[t]:
        claim(
            args,
            "classification more cohesive in a long tail's small labels",
            [difference(tail[s]["small_cohesion"], tail[t]["small_cohesion"])],
            f"{name(many)} tail cohesion, classification against metric learning: "
            f"{mean(tail[s]['small_cohesion'].values())} vs {mean(tail[t]['small_cohesion'].values())}",
        )
    apart = [k for k in ("small_to_large", "small_to_small") if k in tail[s] and k in tail[t]]
    if apart:
        claim(
            args,
            "metric learning keeps a long tail's small labels apart",
            [difference(tail[s][k], tail[t][k]) for k in apart],
            f"{name(many)} tail, mean cosine, classification vs metric learning: "
            + "; ".join(
                f"{k.replace('small_', '')} {mean(tail[s][k].values())} vs {mean(tail[t][k].values())}" for k in apart
            ),
        )


def main() -> None:
    args = shared.arguments("003", __doc__, models=(MODEL,), extra=flags)
    args.models = [MODEL]  # this study's model whatever --quick sets
    args.epochs, args.lr = (1, None) if args.quick else (10, None)
    many, few = data_sets(args)
    shown: dict = {}
    few_cohesion = normal_case(args, few, shown)
    many_cohesion = normal_case(args, many, shown)
    maps(args, shown)
    print(
        f"lr: the study names none; cea's default for a bag of embeddings, {args.lr:g}, for both objectives", flush=True
    )
    few_avg = per_label_table(args, few, few_cohesion)
    many_mean = distribution_table(args, many, many_cohesion)
    imbalance = imbalance_table(args, many, few)
    tuned = transfer(args, many, few)
    verdicts(args, few_avg, many_mean, imbalance, tuned, many, few)
    finish(args)


if __name__ == "__main__":
    main()
