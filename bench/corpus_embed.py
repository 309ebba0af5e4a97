"""Issue 77: ``cea embed`` of a corpus into Parquet parts in one process (2 threads) and on Ray (2 actors of one
thread each), then ``cea index`` (IVF) from the parts; wall time and the peak resident memory of the processes
that encode.

The corpus: the texts of banking77, clinc150, stackoverflow, trec50, yahoo and dbpedia219 (every split), cycled to
``--texts`` lines (bench/results/corpus-Nk.txt). Run it alone.

    python bench/corpus_embed.py [--texts 20000]

Its figure is a record (``docs/records/corpus_embed.jsonl``): Ray's wall time against one process's. Ray replaced
``torchrun`` for this job; that scheme's last record (``docs/records/shard_embed.jsonl``, 100,000 texts) took 0.90x
one process's time.
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
    workers = {pid: rss for pid, rss in peaks.items() if "-m cea" in names[pid] or "MapWorker" in names[pid]}
    return {
        "wall_s": round(time.perf_counter() - started, 1),
        "peak_mb_per_process": sorted(round(v / 2**20) for v in workers.values()),
        "stderr_tail": err.decode().strip().splitlines()[-2:],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=20_000)
    args = ap.parse_args()
    path = corpus(args.texts)
    lines = path.read_text().splitlines()
    rows = {"texts": len(lines), "mean_chars": round(sum(map(len, lines)) / len(lines), 1)}
    runs = {
        "1 process, 2 threads": ([], {"OMP_NUM_THREADS": "2"}),
        "Ray, 2 actors x 1 thread": (["--engine", "ray"], {}),
    }
    for name, (extra_args, extra_env) in runs.items():
        out = R / f"parts-{name.split()[0].rstrip(',')}"
        shutil.rmtree(out, ignore_errors=True)
        cmd = [sys.executable, "-m", "cea", "embed", str(path), "-o", str(out), *extra_args]
        rows[name] = measured(cmd, {**os.environ, **extra_env})
        print(name, json.dumps(rows[name]), flush=True)
    out = R / "parts-Ray"
    rows["ivf index from the parts"] = measured(
        [sys.executable, "-m", "cea", "index", str(out), "--kind", "ivf"], {**os.environ, "OMP_NUM_THREADS": "2"}
    )
    rows["index"] = json.loads((out / "index.json").read_text())
    print(json.dumps(rows["ivf index from the parts"]), json.dumps(rows["index"]), flush=True)
    ray, one = rows["Ray, 2 actors x 1 thread"], rows["1 process, 2 threads"]
    record(
        f"embedding {len(lines):,} texts into parts, Ray",
        ray["wall_s"],
        baseline=one["wall_s"],
        unit="s",
        section="batch-predict",
        baseline_is="one process, 2 threads",
        note=f"{ray['wall_s'] / one['wall_s']:.2f}x (torchrun's record: 0.90x); IVF index from the parts "
        f"{rows['index']['build_seconds']:.1f} s, recall@5 {rows['index']['recall_at_k']:.3f}",
    )


if __name__ == "__main__":
    main()
