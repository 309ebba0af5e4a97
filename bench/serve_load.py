"""Issue 6: the HTTP service under load, and durability across SIGKILL.

    python bench/serve_load.py [--model all-MiniLM-L6-v2] [--seconds 30] [--clients 8] [--backend onnx-int8]

Builds a banking77 bundle (train split as references) in bench/results/bundle-banking77-BACKEND if missing,
starts `cea serve` on 127.0.0.1, measures latency with one client alone (200 requests of 1 text, 40 of
32 texts), then runs N client threads for S seconds: each request is, at random,
a prediction of 1 text (60%), of 32 texts (20%), or an addition of 1 labelled example (20%). Records
latency per kind (p50, p99), throughput and errors; then kills the server with SIGKILL, starts it again
and checks that every acknowledged addition is there (GET /examples/{id}).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np

R = Path("bench/results")


def start(bundle: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "cea", "serve", str(bundle), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError("the service did not start: " + proc.stderr.read().decode()[-500:])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--backend", default="torch", help="torch, onnx or onnx-int8 (the bundle's encoder)")
    args = parser.parse_args()
    from cea.data import load_dataset

    ds = load_dataset("banking77")
    bundle = R / f"bundle-banking77-{args.backend}"
    if not (bundle / "manifest.json").exists():
        subprocess.run([sys.executable, "-m", "cea", "bundle", args.model, "--dataset", "banking77", "-o", str(bundle),
                        "--backend", args.backend], check=True)
    queries = list(ds["test"]["text"])
    proc = start(bundle, args.port)
    url = f"http://127.0.0.1:{args.port}"
    quiet = {"predict-1": [], "predict-32": []}  # one client alone: latency without queueing
    rng = random.Random(0)
    with httpx.Client(base_url=url, timeout=60) as http:
        for kind, n, repeats in (("predict-1", 1, 200), ("predict-32", 32, 40)):
            for _ in range(repeats):
                texts = rng.sample(queries, n)
                t0 = time.perf_counter()
                http.post("/predict", json={"texts": texts}).raise_for_status()
                quiet[kind].append(time.perf_counter() - t0)
    latencies = {"predict-1": [], "predict-32": [], "add-1": []}
    acknowledged, errors, lock = [], [], threading.Lock()
    stop = time.perf_counter() + args.seconds

    def client(seed):
        rng = random.Random(seed)
        with httpx.Client(base_url=url, timeout=60) as http:
            while time.perf_counter() < stop:
                roll = rng.random()
                if roll < 0.6:
                    kind, req = "predict-1", ("/predict", {"texts": [rng.choice(queries)]})
                elif roll < 0.8:
                    kind, req = "predict-32", ("/predict", {"texts": rng.sample(queries, 32)})
                else:
                    kind, req = "add-1", ("/examples", {"texts": [f"load test example {seed} {rng.random()}"],
                                                         "labels": [f"load-{seed % 3}"]})
                t0 = time.perf_counter()
                try:
                    response = http.post(req[0], json=req[1])
                    ok = response.status_code == 200
                except httpx.HTTPError as exc:
                    ok, response = False, exc
                with lock:
                    if ok:
                        latencies[kind].append(time.perf_counter() - t0)
                        if kind == "add-1":
                            acknowledged.extend(response.json()["ids"])
                    else:
                        errors.append(f"{kind}: {getattr(response, 'status_code', response)}")

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc = start(bundle, args.port)
    missing = [i for i in acknowledged if httpx.get(f"{url}/examples/{i}", timeout=30).status_code != 200]
    proc.terminate()
    proc.wait()
    summary = {"backend": args.backend, "clients": args.clients, "seconds": round(wall, 1), "errors": len(errors), "error_samples": errors[:5],
               "acknowledged_additions": len(acknowledged), "missing_after_sigkill": len(missing),
               "requests": {k: len(v) for k, v in latencies.items()},
               "texts_per_second": round((len(latencies["predict-1"]) + 32 * len(latencies["predict-32"])) / wall, 1),
               "latency_ms": {k: {"p50": round(1000 * float(np.percentile(v, 50)), 1),
                                  "p99": round(1000 * float(np.percentile(v, 99)), 1)} for k, v in latencies.items() if v},
               "one_client_latency_ms": {k: {"p50": round(1000 * float(np.percentile(v, 50)), 1),
                                             "p99": round(1000 * float(np.percentile(v, 99)), 1),
                                             "texts_per_second": round(len(v) * (1 if k == "predict-1" else 32) / sum(v), 1)}
                                         for k, v in quiet.items()}}
    (R / f"serve_load-{args.backend}.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
