"""Issues 77 and 91: ``cea predict --input --output`` (the local engine) holds one batch whatever the corpus's size and
whatever the bundle.

    python bench/batch_predict.py STATIC_ENCODER [--sizes 100000,1000000]
    python bench/batch_predict.py all-MiniLM-L6-v2 --words 20-40 [--backend auto]

Builds a bundle of banking77's train split with the encoder given (a static one: ``cea distill all-MiniLM-L6-v2 -o
DIR``; a transformer, in ``--backend``, auto by default: int8 ONNX where it is faster), writes corpora of the given
sizes (banking77 and clinc150 train texts, each numbered so that no two are the same; with ``--words A-B``, texts of A
to B words made of such texts joined) as Parquet, and runs ``cea predict BUNDLE --input CORPUS --output OUT.parquet``
on each in a process of its own: its peak RSS (the kernel's high-water mark of the child) and texts/s. Records the
largest corpus's peak against the goal of 1.5 GB, the ratio to the smallest's in the note (goal: within 10 %).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
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
    args = parser.parse_args()
    from cea.data import load_dataset

    texts = [t for name in ("banking77", "clinc150") for t in load_dataset(name)["train"]["text"]]
    if args.words:
        texts = joined(texts, *map(int, args.words.split("-")))
    peaks = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        subprocess.run([sys.executable, "-m", "cea", "bundle", args.encoder, "--dataset", "banking77", "--splits",
                        "train", "-o", str(tmp / "bundle"), "--backend", args.backend], check=True,
                       stdout=subprocess.DEVNULL)
        manifest = json.loads((tmp / "bundle" / "manifest.json").read_text())
        kind = f"{'static' if 'static' in Path(args.encoder).name else Path(args.encoder).name} bundle " \
               f"({manifest['backend']})"
        for size in [int(s) for s in args.sizes.split(",")]:
            corpus = tmp / f"corpus-{size}.parquet"
            pd.DataFrame({"id": range(size), "text": [f"{texts[i % len(texts)]} #{i // len(texts)}"
                                                      for i in range(size)]}).to_parquet(corpus)
            started = time.perf_counter()
            child = subprocess.Popen([sys.executable, "-m", "cea", "predict", str(tmp / "bundle"), "--input",
                                      str(corpus), "--output", str(tmp / f"out-{size}.parquet")],
                                     stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(child.pid, 0)
            seconds = time.perf_counter() - started
            assert status == 0, f"cea predict failed on {size} texts"
            peaks[size] = usage.ru_maxrss / 1024  # KB -> MB
            rows = len(pd.read_parquet(tmp / f"out-{size}.parquet", columns=["id"]))
            assert rows == size
            print(f"{size} texts: peak {peaks[size]:.0f} MB, {size / seconds:.0f} texts/s", flush=True)
    small, large = min(peaks), max(peaks)
    texts_of = f"texts of {args.words} words" if args.words else "texts"
    record(f"cea predict --output, {large:,} {texts_of}, {kind}: peak RSS", round(peaks[large]), baseline=1536,
           baseline_is="the goal", unit="MB", section="batch-predict",
           note=f"{small:,} texts: {peaks[small]:.0f} MB ({peaks[large] / peaks[small]:.2f}x; goal within 1.1x)")



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
