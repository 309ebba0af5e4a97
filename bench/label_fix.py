"""Issue 60: what `cea check --fix` wins back: `cea fit`'s test accuracy on noisy, fixed and clean labels.

    OMP_NUM_THREADS=1 python bench/label_fix.py banking77 [--noise 0.1,0.2] [--kind confusable] [--fixes drop,relabel]
                                                [--seed 0] [--budget 5m]

Flips a share of train's labels as ``bench/label_issues.py`` does (towards the class each class is confused with
most: the realistic case, or uniformly), runs ``cea fit --train T --test TEST --budget B`` on the clean and the noisy
train (dev carved from it, as a user's would be), cleans the noisy copy with `cea check`'s :func:`cea.labelling.check.
check_labels` and :func:`cea.labelling.check.fixed` on the embeddings of the encoder the noisy fit chose (``cea check
T --model BUNDLE``; ``--check-on frozen``: all-MiniLM-L6-v2's, cached in bench/results/label-issues/), and fits each
fixed train. Records, per noise level and fix, the share of the accuracy
the noise cost that the fix wins back (``docs/records/label_issues.jsonl``, section label-issues).
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
from common import R, cea, record  # noqa: E402
from label_issues import flip  # noqa: E402


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
    subprocess.run(cea("fit", "--train", str(folder / "train.csv"), "--test", str(folder / "test.csv"), "--budget",
                       budget, "--seed", str(seed), "-o", str(folder / "bundle"), "--work", str(folder / "work")),
                   check=True, stdout=subprocess.DEVNULL, env={**os.environ, "CEA_CACHE": str(folder / "cache")})
    return json.loads((folder / "bundle" / "fit.json").read_text())["test"]["accuracy"]


def bundle_embeddings(bundle: Path, texts: list[str]) -> np.ndarray:
    """``texts`` encoded by the encoder a bundle serves, as ``cea check --model BUNDLE`` encodes them."""
    from cea.encoders import load_encoder
    from cea.serving.examples import encode

    return encode(load_encoder(str(bundle / "encoder")), texts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--noise", default="0.1,0.2")
    parser.add_argument("--kind", default="confusable")
    parser.add_argument("--fixes", default="drop,relabel")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", default="5m")
    parser.add_argument("--check-on", default="fit", choices=("fit", "frozen"),
                        help="the encoder the check reads: the noisy fit's bundle's, or the frozen all-MiniLM-L6-v2")
    args = parser.parse_args()
    from cea.data import load_dataset
    from cea.labelling.check import check_labels, fixed

    ds = load_dataset(args.dataset)
    name = Path(args.dataset.rstrip("/")).name
    train = ds["train"][["text", "label"]].reset_index(drop=True).astype({"label": str})
    test = ds["test"][["text", "label"]].astype({"label": str})
    labels = train["label"].to_numpy()
    embeddings = np.load(R / "label-issues" / f"{name}-train.npy")  # bench/label_issues.py encodes it
    centroids = {c: embeddings[labels == c].mean(0) for c in np.unique(labels)}
    work = R / "label-fix" / name
    clean = fit(train, test, work / "clean", args.budget, args.seed)
    print("clean", clean, flush=True)
    for share in [float(x) for x in args.noise.split(",")]:
        noisy_labels, flipped = flip(labels, share, args.kind, centroids, args.seed)
        noisy = train.assign(label=noisy_labels)
        lost = fit(noisy, test, work / f"noisy-{share}", args.budget, args.seed)
        print("noisy", share, lost, flush=True)
        on = embeddings if args.check_on == "frozen" else bundle_embeddings(work / f"noisy-{share}" / "bundle",
                                                                            list(noisy["text"]))
        checked = check_labels(list(noisy["text"]), noisy_labels, on, seed=args.seed)
        hit = np.isin(checked.issues["row"].to_numpy(), flipped)
        precision, recall = float(hit.mean()) if len(hit) else 0.0, float(hit.sum()) / max(1, len(flipped))
        print("flagged", len(hit), "precision", round(precision, 3), "recall", round(recall, 3), flush=True)
        for fix in args.fixes.split(","):
            won = fit(fixed(noisy, checked, fix), test, work / f"{fix}-{share}", args.budget, args.seed)
            print(fix, share, won, flush=True)
            record(f"cea check --fix {fix}, {name}, {share:.0%} flipped {args.kind}: share of the noise's cost "
                   "won back",
                   round(100 * (won - lost) / (clean - lost), 1) if clean > lost else None, baseline=50,
                   baseline_is="the goal", unit="%", section="label-issues", name="label_issues",
                   note=f"cea fit test accuracy: clean {clean:.2f}, noisy {lost:.2f}, fixed {won:.2f}; "
                   f"{len(checked.issues)} flagged (precision {precision:.2f}, recall {recall:.2f}), checked on the "
                   f"{args.check_on} encoder; budget {args.budget}, seed {args.seed}")


if __name__ == "__main__":
    main()
