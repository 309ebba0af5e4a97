"""Grids of ``cea train`` runs with the defaults, and their table.

``train``: one run per seed (full train split) or per sample (``--shots N``: sample S trains with ``--seed S``, or
with ``--train-seed`` for every sample, as the issue's acceptance line ``cea train --dataset banking77 --shots 8
--shots-seed S`` does with seed 0), for each of ``--epochs`` (``default``: the rule, or a number) and each of
``--lr`` (``default``: the objective's own, or a rate), with ``--flag`` on every run where given. Finished runs are
reused. DATASET is a catalog name or a folder of train/dev/test files (``bench/heldout_sets.py``); runs are named
``bench/results/epochs-NAME-{full|Nshot}-sS-eE`` (``-lrL`` added where the rate is given).

``table``: Markdown rows of finished runs: the bundle's head (logistic regression on the trained embeddings), kNN-5
and the trained head on test, epochs, steps, training seconds and dev at the judged epochs (the trained head's;
the linear probe's in runs from before issue 33).

    OMP_NUM_THREADS=1 python bench/runs.py train trec50 --seeds 0,1,2 --epochs default,6,10
    OMP_NUM_THREADS=1 python bench/runs.py train banking77 --shots 8 --seeds 0,1,2 --train-seed 0
    OMP_NUM_THREADS=1 python bench/runs.py train bench/results/heldout/hwu64 --shots 8 --epochs default,3
    OMP_NUM_THREADS=1 python bench/runs.py train stackoverflow --shots 8 --epochs 5 --lr 1e-4,2e-4
    OMP_NUM_THREADS=1 python bench/runs.py train trec50 --shots 8 --flag=--frozen-layers=3
    python bench/runs.py table bench/results/epochs-*

On 2 cores: two of these side by side, ``OMP_NUM_THREADS=1`` each.

A grid of the defaults (``--epochs default``, ``--lr default``, no ``--flag``) records its figures
(``docs/records/runs.jsonl``): ``cea train defaults, [N a label, ]D``, the bundle's head's test accuracy, mean of the
seeds or samples (against ``--baseline``, the frozen baseline of ``bench/heads.py``, where given), and
``training time, D, full`` or ``training time, D, N a label`` (the range of the runs' ``trainer.train()`` seconds).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common import R, grid, record, results, table


def runs(
    dataset: str,
    shots: int,
    seeds: list[int],
    epochs: list[str],
    train_seed: int | None,
    rates: list[str] = ("default",),
    flag: str | None = None,
) -> list:
    name = Path(dataset.rstrip("/")).name
    planned = []
    for e, lr, s in ((e, lr, s) for e in epochs for lr in rates for s in seeds):
        if shots:
            args, tag = (
                ["--shots", shots, "--shots-seed", s, "--seed", s if train_seed is None else train_seed],
                f"{name}-{shots}shot-s{s}",
            )
        else:
            args, tag = ["--seed", s], f"{name}-full-s{s}"
        args = (
            ["--dataset", dataset, *map(str, args)]
            + ([] if e == "default" else ["--epochs", e])
            + ([] if lr == "default" else ["--lr", lr])
            + ([flag] if flag else [])
        )
        planned.append(
            (
                args,
                R
                / (
                    f"epochs-{tag}-e{e}"
                    + ("" if lr == "default" else f"-lr{lr}")
                    + (f"-{flag.lstrip('-').replace('=', '')}" if flag else "")
                ),
            )
        )
    return planned


def row(folder: Path) -> list:
    r = results(folder)
    test = r["metrics"]["test"]
    key = "dev_head_accuracy" if any("dev_head_accuracy" in h for h in r["dev_history"]) else "dev_linear_accuracy"
    dev = ", ".join(f"{100 * h[key]:.2f}" for h in r["dev_history"] if key in h)  # the trained head's since issue 33
    return [
        folder.name,
        test.get("linear_accuracy"),
        test.get("knn_accuracy"),
        test.get("head_accuracy", "-"),
        f"{r['epochs']:g}",
        r["steps"],
        f"{r['train_seconds']:.0f}",
        dev or "-",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="a grid of cea train runs (finished ones reused)")
    t.add_argument("dataset")
    t.add_argument("--shots", type=int, default=0, help="examples per label (0: the full train split)")
    t.add_argument("--seeds", default="0,1,2", help="seeds, or samples with --shots")
    t.add_argument("--epochs", default="default", help="comma-separated: default (the rule) or numbers")
    t.add_argument("--train-seed", type=int, help="with --shots: one training seed for every sample")
    t.add_argument("--lr", default="default", help="comma-separated: default (the objective's own) or rates")
    t.add_argument("--flag", help="one more cea train flag for every run, e.g. --frozen-layers=3 (in the run's name)")
    t.add_argument("--baseline", type=float, help="the frozen baseline's test accuracy, beside the grid's record")
    s = sub.add_parser("table", help="Markdown rows of finished runs")
    s.add_argument("runs", nargs="+")
    args = parser.parse_args()
    if args.command == "train":
        folders = grid(
            runs(
                args.dataset,
                args.shots,
                [int(x) for x in args.seeds.split(",")],
                args.epochs.split(","),
                args.train_seed,
                args.lr.split(","),
                args.flag,
            )
        )
    else:
        folders = [Path(f) for f in args.runs]
    table(
        ["run", "head", "kNN-5", "trained head", "epochs", "steps", "train s", "dev by judged epoch"],
        [row(f) for f in folders if results(f) is not None],
    )
    if args.command == "train" and args.epochs == "default" and args.lr == "default" and not args.flag:
        records(args, [results(f) for f in folders])


NAMES = {"hwu64": "HWU64", "mcid": "MCID"}  # the held-out sets' names as the pages give them


def records(args, finished: list[dict]) -> None:
    """The grid's figures as records: the bundle's head's mean test accuracy and the training seconds."""
    name = Path(args.dataset.rstrip("/")).name
    name = NAMES.get(name, name)
    what = f"{args.shots} a label, {name}" if args.shots else name
    acc = [r["metrics"]["test"]["linear_accuracy"] for r in finished]
    secs = [r["train_seconds"] for r in finished]
    runs = "samples" if args.shots else "seeds"
    record(
        f"cea train defaults, {what}",
        round(sum(acc) / len(acc), 2),
        baseline=args.baseline,
        unit=f"% test accuracy, mean of {len(acc)} {runs}",
        section="accuracy",
        baseline_is="the frozen baseline (bench/heads.py)" if args.baseline is not None else None,
        command=f"cea train --dataset {args.dataset}"
        + (f" --shots {args.shots} --shots-seed S" if args.shots else "")
        + " --seed S",
        note=f"{runs} {args.seeds}: " + " / ".join(f"{a:.2f}" for a in acc),
    )
    record(
        f"training time, {name}, " + (f"{args.shots} a label" if args.shots else "full"),
        f"{min(secs):.0f}-{max(secs):.0f}" if len(secs) > 1 else round(secs[0]),
        unit="s of trainer.train()",
        section="training-time",
        note=f"{finished[0]['epochs']:g} epochs, {finished[0]['steps']} steps",
    )


if __name__ == "__main__":
    main()
