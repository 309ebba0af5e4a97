"""Issue 77: ``cea predict --input --output`` (the local engine) holds one batch whatever the corpus's size.

    python bench/batch_predict.py STATIC_ENCODER [--sizes 100000,1000000]

Builds a bundle of banking77's train split with the static encoder (``cea distill all-MiniLM-L6-v2 -o DIR``), writes
corpora of the given sizes (banking77 and clinc150 train texts, each numbered so that no two are the same) as Parquet,
and runs ``cea predict BUNDLE --input CORPUS --output OUT.parquet`` on each in a process of its own: its peak RSS
(the kernel's high-water mark of the child) and texts/s. Records the largest corpus's peak against the goal of 1.5 GB,
the ratio to the smallest's in the note (goal: within 10 %).
"""

from __future__ import annotations

import argparse
import os
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
    parser.add_argument("encoder", help="a static encoder's folder (cea distill)")
    parser.add_argument("--sizes", default="100000,1000000")
    args = parser.parse_args()
    from cea.data import load_dataset

    texts = [t for name in ("banking77", "clinc150") for t in load_dataset(name)["train"]["text"]]
    peaks = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        subprocess.run([sys.executable, "-m", "cea", "bundle", args.encoder, "--dataset", "banking77", "--splits",
                        "train", "-o", str(tmp / "bundle")], check=True, stdout=subprocess.DEVNULL)
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
    record(f"cea predict --output, {large:,} texts, static bundle: peak RSS", round(peaks[large]), baseline=1536,
           baseline_is="the goal", unit="MB", section="batch-predict",
           note=f"{small:,} texts: {peaks[small]:.0f} MB ({peaks[large] / peaks[small]:.2f}x; goal within 1.1x)")


if __name__ == "__main__":
    main()
