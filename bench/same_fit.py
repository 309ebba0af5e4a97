"""A change that must not change ``cea fit``'s answers (a move, a format): ``cea fit`` run by the code before it and
by the code after it, side by side on this machine, each data set's test accuracy and chosen candidates compared.

    OMP_NUM_THREADS=1 python bench/same_fit.py --before 2f43292 --issue 106 trec50 banking77

Each side runs from a worktree of its commit (``bench/results/same-fit/tree-REV``, its ``src`` first on the path),
``cea fit D -o BUNDLE --work WORK --budget 60m``: an hour's budget, so that no deadline cuts the training and two runs
of the same code take the same steps. With one thread (``OMP_NUM_THREADS=1``) the same steps give the same weights.
Each side starts from an empty embedding store (its own ``CEA_CACHE``, the user's models and archives linked in): a
text found in the store is not encoded again, and one encoded in another batch differs in the last bits, enough to
move a borderline answer (trec50's frozen candidate: 86.2 against 85.8 on test where one side read the store).

Records (``docs/records/fit.jsonl``, section ``refactor``): ``cea fit test accuracy after issue N's move, D``, the
after side's against the before side's, and in its note whether fit.json's candidates (each one's dev and test
figures) and choices are identical.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from common import R, record

OUT = (R / "same-fit").resolve()  # absolute: each side runs in its own worktree
CHOICES = ("chosen", "layer", "classifier", "C", "knn_share", "k", "weights")


def tree(rev: str) -> Path:
    """A worktree of ``rev`` under :data:`OUT` (made once)."""
    folder = OUT / f"tree-{rev}"
    if not folder.exists():
        subprocess.run(["git", "worktree", "add", "--detach", "-f", str(folder), rev], check=True)
    return folder


def fresh_cache(folder: Path) -> Path:
    """A cache folder with an empty embedding store, the user's downloaded models and archives linked in."""
    from cea.paths import cache_dir

    folder.mkdir(parents=True, exist_ok=True)
    for part in ("models", "archives"):
        if (cache_dir() / part).exists() and not (folder / part).exists():
            (folder / part).symlink_to(cache_dir() / part)
    return folder


def fitted(rev: str, dataset: str) -> dict:
    """fit.json of ``cea fit dataset --budget 60m`` run by the code of ``rev`` (reused where it finished)."""
    folder = tree(rev)
    work = OUT / f"{rev}-{dataset}-fit"
    if not (work / "fit.json").exists():
        cache = fresh_cache(OUT / f"cache-{rev}-{dataset}")
        env = {**os.environ, "PYTHONPATH": str(folder / "src"), "CEA_CACHE": str(cache)}
        command = [sys.executable, "-m", "cea", "fit", dataset, "-o", str(OUT / f"{rev}-{dataset}-bundle")]
        subprocess.run([*command, "--work", str(work), "--budget", "60m"], check=True, env=env, cwd=folder)
    return json.loads((work / "fit.json").read_text())


def candidates(fit: dict) -> dict:
    """Each candidate's dev and test figures, and the choices: what the two sides must share."""
    figures = {
        name: {"dev": c.get("dev"), "test": c.get("test"), "described": c.get("described")}
        for name, c in fit.get("candidates", {}).items()
    }
    return {"candidates": figures, **{key: fit.get(key) for key in CHOICES}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--before", required=True, help="the commit before the change")
    parser.add_argument("--after", default="HEAD", help="the commit after it")
    parser.add_argument("--issue", required=True, help="the issue whose change it is (names the record)")
    args = parser.parse_args()
    revs = [
        subprocess.run(["git", "rev-parse", "--short", r], capture_output=True, text=True, check=True).stdout.strip()
        for r in (args.before, args.after)
    ]
    for dataset in args.datasets:
        before, after = (fitted(rev, dataset) for rev in revs)
        same = candidates(before) == candidates(after)
        chosen = after.get("chosen")
        record(
            f"cea fit test accuracy after issue {args.issue}'s move, {dataset}",
            after["test"]["accuracy"],
            baseline=before["test"]["accuracy"],
            unit="% test accuracy",
            name="fit",
            section="refactor",
            baseline_is=f"the code before the move ({revs[0]}), side by side on this machine",
            command=f"OMP_NUM_THREADS=1 python bench/same_fit.py --before {revs[0]} --issue {args.issue} {dataset}",
            note=f"{revs[1]} against {revs[0]}: chose {chosen}; fit.json's candidates and choices "
            + ("identical" if same else "differ"),
        )


if __name__ == "__main__":
    main()
