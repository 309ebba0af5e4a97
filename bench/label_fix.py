"""Issue 60: what `cea check --fix` wins back: `cea fit`'s test accuracy on noisy, fixed and clean labels.

    OMP_NUM_THREADS=1 python bench/label_fix.py banking77 [--noise 0.1,0.2] [--kind confusable]
                                                [--fixes drop,relabel,drop-again,oracle] [--seed 0] [--budget 5m]

Each seed's figures go to bench/results/label-fix/SET/seed-S/result-fit.json (or -frozen); the records are the mean
over the seeds found there (run seeds 0, 1 and 2, one per core), each seed's share in the note.

Flips a share of train's labels as ``bench/label_issues.py`` does (towards the class each class is confused with
most: the realistic case, or uniformly), runs ``cea fit --train T --test TEST --budget B`` on the clean and the noisy
train (dev carved from it, as a user's would be), cleans the noisy copy with `cea check`'s :func:`cea.labelling.check.
check_labels` and :func:`cea.labelling.check.fixed` on the embeddings of the encoder the noisy fit chose (``cea check
T --model BUNDLE``; ``--check-on frozen``: all-MiniLM-L6-v2's, cached in bench/results/label-issues/), and fits each
fixed train (``--fixes oracle``: drops exactly the flipped texts, the most any drop can win back; ``drop-again``: the
labelling loop twice, the drop's fit checking the data it was fitted on and a fit of what that check leaves). A seed
run again keeps the fits its result file holds. Records, per noise level and fix, the share of the accuracy the noise
cost that the fix wins back, from the mean accuracies (``docs/records/label_issues.jsonl``, section label-issues).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from label_issues import flip  # noqa: E402

from cea.labelling.check import FIXES, check_labels, fixed  # noqa: E402
from common import R, cea, record  # noqa: E402

AGAIN = "drop-again"  # the loop twice: the drop's fit checks its own data again


def fit(train, test, folder: Path, budget: str, seed: int) -> float:
    """``cea fit``'s test accuracy on ``train`` (a frame), ``test`` (a frame), in ``folder``, with an embedding cache
    of its own (``CEA_CACHE``, the models linked in): a fit whose texts another fit probed would otherwise skip the
    probe's encoding and train longer within the budget (a cleaned copy's texts are new to the cache)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    from cea.paths import cache_dir

    (folder / "cache").mkdir()
    for kept in ("models", "archives", "hub"):
        if (cache_dir() / kept).exists():
            (folder / "cache" / kept).symlink_to(cache_dir() / kept)
    train.to_csv(folder / "train.csv", index=False)
    test.to_csv(folder / "test.csv", index=False)
    subprocess.run(
        cea(
            "fit",
            "--train",
            str(folder / "train.csv"),
            "--test",
            str(folder / "test.csv"),
            "--budget",
            budget,
            "--seed",
            str(seed),
            "-o",
            str(folder / "bundle"),
            "--work",
            str(folder / "work"),
        ),
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "CEA_CACHE": str(folder / "cache")},
    )
    return json.loads((folder / "bundle" / "fit.json").read_text())["test"]["accuracy"]


def bundle_embeddings(bundle: Path, texts: list[str]) -> np.ndarray:
    """``texts`` encoded by the encoder a bundle serves, as ``cea check --model BUNDLE`` encodes them."""
    from cea.bundle.examples import encode
    from cea.encoders import load_encoder

    return encode(load_encoder(str(bundle / "encoder")), texts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--noise", default="0.1,0.2")
    parser.add_argument("--kind", default="confusable")
    parser.add_argument("--fixes", default="drop,relabel")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", default="5m")
    parser.add_argument(
        "--check-on",
        default="fit",
        choices=("fit", "frozen"),
        help="the encoder the check reads: the noisy fit's bundle's, or the frozen all-MiniLM-L6-v2",
    )
    args = parser.parse_args()
    from cea.data import load_dataset

    ds = load_dataset(args.dataset)
    name = Path(args.dataset.rstrip("/")).name
    train = ds["train"][["text", "label"]].reset_index(drop=True).astype({"label": str})
    test = ds["test"][["text", "label"]].astype({"label": str})
    labels = train["label"].to_numpy()
    embeddings = np.load(R / "label-issues" / f"{name}-train.npy")  # bench/label_issues.py encodes it
    centroids = {c: embeddings[labels == c].mean(0) for c in np.unique(labels)}
    work = R / "label-fix" / name / f"seed-{args.seed}"
    saved = work / f"result-{args.check_on}.json"
    result = json.loads(saved.read_text()) if saved.exists() else {}  # a seed run again: the fits it holds kept
    if "clean" not in result:
        result["clean"] = fit(train, test, work / "clean", args.budget, args.seed)
    print("clean", result["clean"], flush=True)
    fixes = args.fixes.split(",")
    if AGAIN in fixes and "drop" not in fixes:  # the second round starts from the first's fit
        fixes.insert(fixes.index(AGAIN), "drop")
    for share in [float(x) for x in args.noise.split(",")]:
        noisy_labels, flipped = flip(labels, share, args.kind, centroids, args.seed)
        noisy = train.assign(label=noisy_labels)
        cell = result.setdefault(f"{share}", {})
        if "noisy" not in cell:
            cell["noisy"] = fit(noisy, test, work / f"noisy-{share}", args.budget, args.seed)
        print("noisy", share, cell["noisy"], flush=True)
        if any(fix != "oracle" and fix not in cell for fix in fixes):
            on = (
                embeddings
                if args.check_on == "frozen"
                else bundle_embeddings(work / f"noisy-{share}" / "bundle", list(noisy["text"]))
            )
            checked = check_labels(list(noisy["text"]), noisy_labels, on, seed=args.seed)
            hit = np.isin(checked.issues["row"].to_numpy(), flipped)
            cell.update(
                flagged=len(hit),
                precision=float(hit.mean()) if len(hit) else 0.0,
                recall=float(hit.sum()) / max(1, len(flipped)),
            )
            print(
                "flagged",
                len(hit),
                "precision",
                round(cell["precision"], 3),
                "recall",
                round(cell["recall"], 3),
                flush=True,
            )
        for fix in fixes:
            if fix not in cell:
                if fix == "oracle":
                    cleaned = noisy.drop(index=flipped)
                elif fix == AGAIN:
                    cleaned = again(noisy, checked, work / f"drop-{share}" / "bundle", flipped, cell, args.seed)
                else:
                    cleaned = fixed(noisy, checked, fix)
                cell[fix] = fit(cleaned, test, work / f"{fix}-{share}", args.budget, args.seed)
            print(fix, share, cell[fix], flush=True)
        saved.write_text(json.dumps(result))
        for fix in fixes:
            summarise(name, share, fix, args)


def again(noisy, checked, bundle: Path, flipped: np.ndarray, cell: dict, seed: int):
    """The loop's second round: ``noisy`` less what ``checked`` flagged, checked again on the encoder of the fit made
    from it (``bundle``), less what that check flags; the two rounds' flags counted into ``cell`` (``again_*``)."""
    kept = np.setdiff1d(np.arange(len(noisy)), checked.issues["row"].to_numpy())
    first = noisy.iloc[kept].reset_index(drop=True)
    second = check_labels(
        list(first["text"]), first["label"].to_numpy(), bundle_embeddings(bundle, list(first["text"])), seed=seed
    )
    kept = np.delete(kept, second.issues["row"].to_numpy())
    dropped = np.setdiff1d(np.arange(len(noisy)), kept)
    hit = np.isin(dropped, flipped)
    cell.update(
        again_flagged=len(dropped),
        again_precision=float(hit.mean()),
        again_recall=float(hit.sum()) / max(1, len(flipped)),
    )
    print(
        "again: flagged",
        len(dropped),
        "precision",
        round(cell["again_precision"], 3),
        "recall",
        round(cell["again_recall"], 3),
        flush=True,
    )
    return noisy.iloc[kept].reset_index(drop=True)


def summarise(name: str, share: float, fix: str, args):
    """Record the share of the noise's cost ``fix`` won back at ``share``, from the mean accuracies over the seeds
    whose results bench/results/label-fix/NAME holds (each seed's share in the note)."""
    seeds = {}
    for path in sorted((R / "label-fix" / name).glob(f"seed-*/result-{args.check_on}.json")):
        result = json.loads(path.read_text())
        if fix in result.get(f"{share}", {}):
            seeds[path.parent.name.removeprefix("seed-")] = {"clean": result["clean"], **result[f"{share}"]}
    counts = ("flagged", "precision", "recall") if fix in FIXES or fix == AGAIN else ()  # the oracle checks nothing
    prefix = "again_" if fix == AGAIN else ""
    mean = {key: float(np.mean([s[key] for s in seeds.values()])) for key in ("clean", "noisy", fix)}
    mean |= {key: float(np.mean([s[prefix + key] for s in seeds.values()])) for key in counts}

    def won(s):
        return round(100 * (s[fix] - s["noisy"]) / (s["clean"] - s["noisy"]), 1) if s["clean"] > s["noisy"] else None

    check = (
        f"{mean['flagged']:.0f} flagged (P {mean['precision']:.2f}, R {mean['recall']:.2f})"
        if counts
        else "flipped texts dropped: the ceiling"
    )  # the encoder checked on and the budget: in the command
    what = {
        AGAIN: "cea check --fix drop twice (fit, check, fit, check, fit)",
        "oracle": "dropping exactly the flipped texts",
    }.get(fix, f"cea check --fix {fix}")
    record(
        f"{what}, {name}, {share:.0%} flipped {args.kind}: share of the noise's cost won back",
        won(mean),
        baseline=50,
        baseline_is="the goal",
        unit="%",
        section="label-issues",
        name="label_issues",
        note=f"test: clean {mean['clean']:.2f}, noisy {mean['noisy']:.2f}, fixed {mean[fix]:.2f}; {check}; seeds: "
        + " / ".join(str(won(s)) for s in seeds.values()),
    )


if __name__ == "__main__":
    main()
