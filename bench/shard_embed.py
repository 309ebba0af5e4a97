"""Issue 7: embed 100k texts in shards with one process, then with two (torchrun), and build an IVF
index from the shards; wall time and peak resident memory of every process.

The corpus: the texts of banking77, clinc150, stackoverflow, trec50, yahoo and dbpedia219 (every
split), cycled to 100,000 lines (bench/results/corpus-100k.txt). One process gets 2 threads; two
processes get 1 thread each, so both use the machine's 2 cores. Run it alone.

    python bench/shard_embed.py [--texts 100000] [--shard-size 10000]

Its figure is a record (``docs/records/shard_embed.jsonl``): two processes' wall time against one's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from common import R, record



def corpus(n: int) -> Path:
    path = R / f"corpus-{n // 1000}k.txt"
    if not path.exists():
        from cea.cli.scale import corpus_texts

        texts = []
        for name in ("banking77", "clinc150", "stackoverflow", "trec50", "yahoo", "dbpedia219"):
            texts += [" ".join(t.split()) for t in corpus_texts(name)]
        texts = [t for t in texts if t]
        path.write_text("\n".join(texts[i % len(texts)] for i in range(n)) + "\n")
    return path


def measured(cmd: list[str], env: dict) -> dict:
    """Run ``cmd``; wall time and the peak RSS of each process in its tree (sampled every 0.1 s)."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peaks: dict[int, int] = {}
    names: dict[int, str] = {}

    def watch():
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                for p in [root, *root.children(recursive=True)]:
                    rss = p.memory_info().rss
                    peaks[p.pid] = max(peaks.get(p.pid, 0), rss)
                    names.setdefault(p.pid, " ".join(p.cmdline()[1:4]))
            except psutil.Error:
                pass
            time.sleep(0.1)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    _, err = proc.communicate()
    thread.join()
    if proc.returncode:
        raise RuntimeError(err.decode()[-2000:])
    workers = {pid: rss for pid, rss in peaks.items() if "-m cea" in names[pid] and "torch.distributed" not in names[pid]}
    return {"wall_s": round(time.perf_counter() - started, 1),
            "peak_mb_per_process": sorted(round(v / 2**20) for v in workers.values()),
            "stderr_tail": err.decode().strip().splitlines()[-2:]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=100_000)
    ap.add_argument("--shard-size", type=int, default=10_000)
    args = ap.parse_args()
    path = corpus(args.texts)
    lines = path.read_text().splitlines()
    rows = {"texts": len(lines), "mean_chars": round(sum(map(len, lines)) / len(lines), 1)}
    base = [sys.executable, "-m", "cea", "embed", str(path), "--shard-size", str(args.shard_size)]
    runs = {"1 process, 2 threads": ([], {"OMP_NUM_THREADS": "2"}),
            "2 processes (torchrun), 1 thread each": ([sys.executable, "-m", "torch.distributed.run",
                                                       "--nproc_per_node", "2", "--master_port", "29611"],
                                                      {"OMP_NUM_THREADS": "1"})}
    for name, (launcher, extra) in runs.items():
        out = R / f"shards-{name.split()[0]}"
        shutil.rmtree(out, ignore_errors=True)
        cmd = (launcher + ["-m", "cea"] + base[3:] if launcher else base) + ["-o", str(out)]
        rows[name] = measured(cmd, {**os.environ, **extra})
        print(name, json.dumps(rows[name]), flush=True)
    out = R / "shards-2"
    rows["ivf index from the 2-process shards"] = measured([sys.executable, "-m", "cea", "index", str(out), "--kind", "ivf"],
                                                            {**os.environ, "OMP_NUM_THREADS": "2"})
    rows["index"] = json.loads((out / "index.json").read_text())
    print(json.dumps(rows["ivf index from the 2-process shards"]), json.dumps(rows["index"]), flush=True)
    rows["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    (R / "shard_embed.json").write_text(json.dumps(rows, indent=2))
    two, one = rows["2 processes (torchrun), 1 thread each"], rows["1 process, 2 threads"]
    record(f"embedding {len(lines):,} texts into shards", two["wall_s"], baseline=one["wall_s"], unit="s",
           section="speed", baseline_is="one process, 2 threads", note="torchrun, 2 processes x 1 thread")


if __name__ == "__main__":
    main()
