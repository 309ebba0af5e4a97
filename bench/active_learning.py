"""Issue 60: `cea suggest` against random picks and small-text's query strategies, simulated on a labelled set.

    OMP_NUM_THREADS=1 python bench/active_learning.py banking77 [--seeds 0,1,2] [--rounds 5] [--start 8]

Starts a bundle (all-MiniLM-L6-v2, its default classifier) from ``--start`` labelled texts a class drawn from train
with the seed; the rest of train is the unlabelled pool. Each round labels 2 x (number of classes) texts of the pool
chosen by a strategy, which the bundle takes without retraining (``Bundle.add``), and the bundle's test accuracy is
read. Strategies: ``cea`` (:func:`cea.labelling.suggest.suggest`), ``random``, and small-text 1.4's breaking ties,
prediction entropy, embedding k-means and contrastive active learning, each asked with the bundle's own head (its
probabilities) on the same embeddings. The texts are encoded once (cached in bench/results/active-learning/): the
bundle's ``embed`` reads them. Records the mean test accuracy over the rounds (``docs/records/active_learning.jsonl``)
for cea against random, the best small-text strategy in the note. ``--within 1``: cea and random go on past the rounds
until the bundle comes within 1 point of the bundle built on all of train (up to ``--most`` of train), and the labels
that took are recorded as a share of train. ``--train``: once cea's rounds are done, one ``cea train`` run (its
defaults) on the texts labelled so far, and a bundle of its encoder on them, scored on test beside the bundle that
only took the labels.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import labelling_loop_arguments, minilm_splits, record  # noqa: E402

STRATEGIES = ("cea", "random", "breaking-ties", "entropy", "embedding-k-means", "contrastive")


class _Head:
    """small-text's face of the bundle's head: ``predict_proba`` of a dataset of embeddings."""

    def __init__(self, head):
        self.head = head

    def predict_proba(self, dataset):
        return self.head.predict_proba(dataset.x)

    def embed(self, dataset, return_proba=False, **kwargs):  # the texts' embeddings are the dataset's rows
        return (dataset.x, self.predict_proba(dataset)) if return_proba else dataset.x


def _small_text(
    name: str, bundle, vectors: np.ndarray, pool: np.ndarray, labelled: np.ndarray, codes: np.ndarray, n: int
) -> np.ndarray:
    """The rows of ``pool`` small-text's strategy ``name`` picks, asked with the bundle's head."""
    from small_text import BreakingTies, ContrastiveActiveLearning, EmbeddingKMeans, PredictionEntropy, SklearnDataset

    dataset = SklearnDataset(vectors, codes)
    strategy = {
        "breaking-ties": BreakingTies(),
        "entropy": PredictionEntropy(),
        "embedding-k-means": EmbeddingKMeans(),
        "contrastive": ContrastiveActiveLearning(k=10),
    }[name]
    extra = {} if name in ("breaking-ties", "entropy") else {"embeddings": vectors, "pbar": None}
    return np.asarray(strategy.query(_Head(bundle.head()), dataset, pool, labelled, codes[labelled], n=n, **extra))


def simulate(
    name: str,
    texts,
    labels,
    vectors,
    test_vectors,
    test_labels,
    seed: int,
    rounds: int,
    start: int,
    folder: Path,
    target: float | None = None,
    most: float = 1.0,
) -> tuple[list[float], int | None]:
    """Test accuracy after each round of strategy ``name`` (round 0: the start), the labels it took to reach
    ``target`` (rounds go on past ``rounds`` until then, up to ``most`` of train; None: not reached), and the rows
    labelled after ``rounds``."""
    from cea.bundle import Bundle
    from cea.labelling.suggest import suggest

    rng = np.random.default_rng(seed)
    classes, codes = np.unique(labels, return_inverse=True)
    labelled = np.concatenate([rng.choice(np.flatnonzero(labels == c), start, replace=False) for c in classes])
    where = {t: i for i, t in enumerate(texts)}
    shutil.rmtree(folder, ignore_errors=True)
    bundle = Bundle.create(
        folder,
        "all-MiniLM-L6-v2",
        [texts[i] for i in labelled],
        list(labels[labelled]),
        embeddings=vectors[labelled],
        progress=False,
    )
    lookup = {**where, **{f"\0test {i}": len(texts) + i for i in range(len(test_labels))}}
    every = np.vstack([vectors, test_vectors])
    bundle.embed = lambda batch: every[[lookup[t] for t in batch]]  # encoded once, read here
    test_texts = [f"\0test {i}" for i in range(len(test_labels))]

    def accuracy():  # once the head counts every addition, as the service's refits settle after a change
        for _ in range(50):
            if bundle.head() is None or not bundle.refit.stale:
                break
        return 100 * float(np.mean([p.label for p in bundle.predict(test_texts)] == test_labels))

    scores, n, needed, after = [accuracy()], 2 * len(classes), None, None
    for r in range(len(texts)):
        if r >= rounds and (target is None or needed is not None or len(labelled) >= most * len(texts)):
            break
        if r == rounds:
            after = labelled.copy()
        pool = np.setdiff1d(np.arange(len(texts)), labelled)
        n = min(n, len(pool))
        if name == "cea":
            picked = pool[suggest(bundle, [texts[i] for i in pool], n, seed)["row"].to_numpy()]
        elif name == "random":
            picked = rng.choice(pool, n, replace=False)
        else:
            picked = _small_text(name, bundle, vectors, pool, labelled, codes, n)
        bundle.add([texts[i] for i in picked], list(labels[picked]))
        labelled = np.concatenate([labelled, picked])
        scores.append(accuracy())
        if target is not None and needed is None and scores[-1] >= target:
            needed = len(labelled)
    bundle.close()
    return scores[: rounds + 1], needed, labelled if after is None else after


def train_after(dataset: str, ds, rows: np.ndarray, folder: Path, seed: int) -> float:
    """Test accuracy of a bundle of ``cea train``'s encoder (its defaults, on train's ``rows``) on those rows."""
    import subprocess

    from cea.bundle import Bundle

    folder.mkdir(parents=True, exist_ok=True)
    ds["train"].iloc[rows][["text", "label"]].to_csv(folder / "train.csv", index=False)
    ds["test"][["text", "label"]].to_csv(folder / "test.csv", index=False)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "cea",
            "train",
            "--train",
            str(folder / "train.csv"),
            "--test",
            str(folder / "test.csv"),
            "--seed",
            str(seed),
            "--output",
            str(folder / "run"),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    labelled = ds["train"].iloc[rows]
    with Bundle.create(
        folder / "bundle",
        str(folder / "run" / "model"),
        list(labelled["text"]),
        list(labelled["label"].astype(str)),
        progress=False,
    ) as bundle:
        found = [p.label for p in bundle.predict(list(ds["test"]["text"]))]
    return 100 * float(np.mean(np.asarray(found) == ds["test"]["label"].astype(str).to_numpy()))


def main():
    parser = labelling_loop_arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--within", type=float, default=None, help="points below the bundle on all of train")
    parser.add_argument("--most", type=float, default=0.5, help="with --within: the share of train at most")
    parser.add_argument("--train", action="store_true", help="one cea train run on cea's labels after the rounds")
    args = parser.parse_args()
    from cea.data import load_dataset

    ds = load_dataset(args.dataset)
    name = Path(args.dataset.rstrip("/")).name
    cached = minilm_splits(ds, name)
    texts, labels = list(ds["train"]["text"]), ds["train"]["label"].astype(str).to_numpy()
    test_labels = ds["test"]["label"].astype(str).to_numpy()
    curves = {s: [] for s in args.strategies.split(",")}
    needed = {s: [] for s in ("cea", "random") if s in curves}
    trained = []
    with tempfile.TemporaryDirectory() as tmp:
        target = None
        if args.within is not None:
            from cea.bundle import Bundle

            with Bundle.create(
                Path(tmp) / "all", "all-MiniLM-L6-v2", texts, list(labels), embeddings=cached["train"], progress=False
            ) as full:
                full.embed = lambda batch: cached["test"][[int(t.split()[-1]) for t in batch]]
                full_accuracy = 100 * float(
                    np.mean(
                        [p.label for p in full.predict([f"test {i}" for i in range(len(test_labels))])] == test_labels
                    )
                )
            target = full_accuracy - args.within
            print(f"the bundle on all of train: {full_accuracy:.2f}; target {target:.2f}", flush=True)
        for seed in [int(s) for s in args.seeds.split(",")]:
            for strategy in curves:
                curve, took, rows = simulate(
                    strategy,
                    texts,
                    labels,
                    cached["train"],
                    cached["test"],
                    test_labels,
                    seed,
                    args.rounds,
                    args.start,
                    Path(tmp) / f"{strategy}-{seed}",
                    target if strategy in needed else None,
                    args.most,
                )
                curves[strategy].append(curve)
                if strategy in needed:
                    needed[strategy].append(took)
                print(strategy, seed, [round(x, 2) for x in curve], "labels to target", took, flush=True)
                if strategy == "cea" and args.train:
                    trained.append(train_after(args.dataset, ds, rows, Path(tmp) / f"train-{seed}", seed))
                    print("cea train after the rounds", seed, trained[-1], flush=True)
    mean = {s: np.mean(c, axis=0) for s, c in curves.items()}  # per round, over the seeds
    peers = {s: m for s, m in mean.items() if s not in ("cea", "random")}
    best = max(peers, key=lambda s: peers[s][1:].mean()) if peers else None
    if "cea" in mean and "random" in mean and args.within is None:  # a --within run records the labels it took
        record(
            f"active learning, {name}, test accuracy, mean of {args.rounds} rounds",
            round(mean["cea"][1:].mean(), 2),
            baseline=round(mean["random"][1:].mean(), 2),
            baseline_is="random picks",
            unit="% accuracy",
            section="active-learning",
            note=(
                f"{best} {peers[best][1:].mean():.2f} (rounds " + " ".join(f"{x:.1f}" for x in peers[best][1:]) + "); "
                if best
                else ""
            )
            + f"start {mean['cea'][0]:.2f}; rounds "
            + " ".join(f"{x:.1f}" for x in mean["cea"][1:]),
        )
    if target is not None and "cea" in needed:
        share = {s: [100 * t / len(texts) if t is not None else None for t in took] for s, took in needed.items()}
        mean_share = {s: round(float(np.mean(v)), 1) if None not in v else None for s, v in share.items()}
        record(
            f"active learning, {name}, labels to come within {args.within:g} point of all of train, % of train",
            mean_share["cea"],
            baseline=mean_share.get("random") or f"not within {100 * args.most:g} %",
            baseline_is="random picks",
            unit="% of train",
            section="active-learning",
            note=f"all of train {full_accuracy:.2f}; seeds "
            + " / ".join("-" if v is None else f"{v:.1f}" for v in share["cea"]),
        )
    if trained:
        record(
            f"active learning, {name}, after {args.rounds} rounds: cea train on the labels",
            round(float(np.mean(trained)), 2),
            baseline=round(float(mean["cea"][-1]), 2),
            baseline_is="the bundle that took the labels without training",
            unit="% accuracy",
            section="active-learning",
            note=f"seeds {args.seeds}: " + " / ".join(f"{t:.2f}" for t in trained),
        )
    for s, m in mean.items():
        print(s, "rounds", [round(x, 2) for x in m], "mean", round(m[1:].mean(), 2), flush=True)


if __name__ == "__main__":
    main()
