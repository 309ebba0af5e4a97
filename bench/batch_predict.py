"""Issues 77 and 91: ``cea predict --input --output`` (the local engine) holds one batch whatever the corpus's size and
whatever the bundle.

    python bench/batch_predict.py STATIC_ENCODER [--sizes 100000,1000000]
    python bench/batch_predict.py all-MiniLM-L6-v2 --words 20-40 [--backend auto]
    python bench/batch_predict.py all-MiniLM-L6-v2 --words 20-40 --engine ray [--actors 2]

Builds a bundle of banking77's train split with the encoder given (a static one: ``cea distill all-MiniLM-L6-v2 -o
DIR``; a transformer, in ``--backend``, auto by default: int8 ONNX where it is faster), writes corpora of the given
sizes (banking77 and clinc150 train texts, each numbered so that no two are the same; with ``--words A-B``, texts of A
to B words made of such texts joined) as Parquet, and runs ``cea predict BUNDLE --input CORPUS --output OUT.parquet``
on each in a process of its own: its peak RSS (the kernel's high-water mark of the child) and texts/s. With ``--engine
ray`` (a local Ray, ``--actors`` actors, the output a folder of parts), the peak is the largest RSS of Ray's worker
processes (named ``ray::...`` and not idle: the actors and Ray Data's tasks; Ray's children, not the command's),
sampled every 0.2 s. Records the largest corpus's peak against the goal of 1.5 GB, the ratio to the smallest's in the
note (goal: within 10 %).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import record  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("encoder", help="the bundle's encoder: a static encoder's folder (cea distill), a catalog name")
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--words", default=None, help="A-B: texts of A to B words (default: the data sets' own)")
    parser.add_argument("--backend", default="auto", help="cea bundle --backend")
    parser.add_argument("--engine", default="local", help="cea predict --engine: local or ray")
    parser.add_argument("--actors", type=int, default=2, help="with --engine ray: cea predict --actors")
    args = parser.parse_args()
    from cea.data import load_dataset

    texts = [t for name in ("banking77", "clinc150") for t in load_dataset(name)["train"]["text"]]
    if args.words:
        texts = joined(texts, *map(int, args.words.split("-")))
    peaks = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "cea",
                "bundle",
                args.encoder,
                "--dataset",
                "banking77",
                "--splits",
                "train",
                "-o",
                str(tmp / "bundle"),
                "--backend",
                args.backend,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        manifest = json.loads((tmp / "bundle" / "manifest.json").read_text())
        kind = (
            f"{'static' if 'static' in Path(args.encoder).name else Path(args.encoder).name} bundle "
            f"({manifest['backend']})"
        )
        for size in [int(s) for s in args.sizes.split(",")]:
            corpus = tmp / f"corpus-{size}.parquet"
            pd.DataFrame(
                {"id": range(size), "text": [f"{texts[i % len(texts)]} #{i // len(texts)}" for i in range(size)]}
            ).to_parquet(corpus)
            out = tmp / (f"out-{size}" if args.engine == "ray" else f"out-{size}.parquet")
            engine = ["--engine", "ray", "--actors", str(args.actors)] if args.engine == "ray" else []
            started, workers = time.perf_counter(), {}
            child = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "cea",
                    "predict",
                    str(tmp / "bundle"),
                    "--input",
                    str(corpus),
                    "--output",
                    str(out),
                    *engine,
                ],
                stderr=subprocess.DEVNULL,
            )
            sampler = threading.Thread(target=sample_workers, args=(child, workers), daemon=True)
            sampler.start()
            _, status, usage = os.wait4(child.pid, 0)
            seconds = time.perf_counter() - started
            sampler.join()
            assert status == 0, f"cea predict failed on {size} texts"
            peaks[size] = max(workers.values()) if args.engine == "ray" else usage.ru_maxrss / 1024  # KB -> MB
            rows = len(pd.read_parquet(out, columns=["id"]))
            assert rows == size
            print(
                f"{size} texts: peak {peaks[size]:.0f} MB ({len(workers)} Ray workers), {size / seconds:.0f} texts/s",
                flush=True,
            )
    small, large = min(peaks), max(peaks)
    texts_of = f"texts of {args.words} words" if args.words else "texts"
    how = f"on Ray ({args.actors} actors)" if args.engine == "ray" else "--output"
    whose = "peak RSS per actor" if args.engine == "ray" else "peak RSS"
    record(
        f"cea predict {how}, {large:,} {texts_of}, {kind}: {whose}",
        round(peaks[large]),
        baseline=1536,
        baseline_is="the goal",
        unit="MB",
        section="batch-predict",
        note=f"{small:,} texts: {peaks[small]:.0f} MB ({peaks[large] / peaks[small]:.2f}x; goal within 1.1x)",
    )


def sample_workers(child: subprocess.Popen, peaks: dict[int, float]) -> None:
    """Each busy Ray worker's (a ``ray::`` process's) largest RSS in MB while ``child`` runs, sampled every 0.2 s."""
    import psutil

    while child.poll() is None:
        for process in psutil.process_iter(["pid", "cmdline", "memory_info"]):
            title = " ".join(process.info["cmdline"] or [])
            if title.startswith("ray::") and not title.startswith("ray::IDLE") and process.info["memory_info"]:
                rss = process.info["memory_info"].rss / 2**20
                peaks[process.info["pid"]] = max(peaks.get(process.info["pid"], 0.0), rss)
        time.sleep(0.2)


def joined(texts: list[str], least: int, most: int, count: int = 20_000) -> list[str]:
    """``count`` texts of ``least`` to ``most`` words, each made of ``texts`` drawn at random and joined."""
    rng, out = random.Random(0), []
    for _ in range(count):
        words, target = [], rng.randint(least, most)
        while len(words) < target:
            words += texts[rng.randrange(len(texts))].split()
        out.append(" ".join(words[:target]))
    return out


if __name__ == "__main__":
    main()
