"""Issues 6, 19 and 32: the HTTP service under load against its encoder's own throughput, and durability across SIGKILL.

    python bench/serve_load.py --backend onnx-int8 --additions 0            # 16 clients, one-text predictions only
    python bench/serve_load.py --backend onnx-int8                          # 20% additions, a tenth of them new labels
    python bench/serve_load.py --store postgresql --services 2 --removals 0.1   # issue 19's load test
    python bench/serve_load.py --workers 2                                  # one address, two processes
    python bench/serve_load.py --peer st --additions 0      # sentence-transformers behind FastAPI, one text per call
    python bench/serve_load.py --peer infinity --additions 0 --peer-python /path/to/venv/bin/python
    python bench/serve_load.py --service-cpus 0,1 --bundle DIR --dataset DIR   # on a bigger machine: the load apart
    python bench/serve_load.py --trivial --additions 0 [--big 1 --big-texts 64]   # the HTTP layer's own limit
    python bench/serve_load.py --bundle STATIC-BUNDLE --tag static --additions 0 --repeats 3  # a static bundle

Builds a banking77 bundle (train, dev and test as references) in bench/results/bundle-banking77-BACKEND if missing,
and serves a fresh copy of it each run (with the PostgreSQL store: a fresh database and bundle each run). First the
bundle's encoder alone, in this process and the same backend, encodes 2,048 test texts in batches of 64
(length-sorted, as ``encode`` does; 3 passes) and 256 one text per call, and again once the services are down: the
limit the service is measured against is the median of those 6 passes (a shared machine's speed drifts). Then `cea
serve` starts on 127.0.0.1 and N client threads (persistent HTTP connections) send requests for S seconds, each at
random an addition of one example (``--additions``; ``--new-labels`` of them with a label never seen, the others
with a banking77 label), a removal of one of the client's own additions (``--removals``), a prediction of 32 texts
(``--big``) or else a prediction of one text. Records served texts/s and its ratio to the encoder's batch-64
throughput (the predicted texts; and with the added texts, which the service encodes and stores too), latency per
kind (p50, p99), errors, the batch sizes and queue waits of the service, and how long a change took to reach the
refitted head (p50, p99: from the service's histogram, interpolated within its buckets). Then every service (its
process group) and the database are killed with SIGKILL and started again; every acknowledged addition must be
there, every acknowledged removal gone, and an addition made through the first service must be the nearest neighbour
of its own text when asked through the last.

``--service-cpus 0,1`` pins each service (and the encoder's own measurement, in a child process) to those cores and
the clients to the others: the limit and the service then share the same two cores and nothing else, which is what
the goal's ratio means, measured on a machine with more cores than the service's (a device lease's 16). ``--bundle``
serves a copy of an existing bundle instead of building one, ``--dataset`` names banking77's folder where the
catalog is out of reach.

``--repeats N`` runs the load N times over fresh connections (a service of several workers gets them spread anew,
so one round can find them uneven) and keeps the median round.

``--trivial`` serves a banking77 bundle of a trivial encoder (8 random dimensions a token of all-MiniLM-L6-v2's
vocabulary, :func:`trivial_encoder`): all of the service's work but the encoder's, the limit a fast encoder's service
is held against. ``--big 1 --big-texts 64`` sends only 64-text predictions (bulk work).

Its figure is a record (``docs/records/serve_load.jsonl``): ``served texts/s[, QUALIFIER], predictions only`` or
``..., N % additions``, against the encoder alone's batch-64 rate, with the ratio and the one-text p99 as its note.

``--peer st`` serves the bundle's encoder as a plain sentence-transformers model behind FastAPI (one ``encode`` per
request, no batching); ``--peer infinity`` runs infinity-emb (dynamic batching) from another environment's
``--peer-python`` on the catalog's folder of the same model. Peers answer embeddings only (no search, no
classifier), on the same texts and clients.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import httpx
import numpy as np

from common import R, record


def start(command: list[str], port: int, threads: int | None = None, ready: str = "/health") -> subprocess.Popen:
    """A service process (its own process group), up when ``ready`` answers 200; ``threads``: OMP_NUM_THREADS.
    The port must be free (else another process would answer ``ready``), and the service's stderr goes to a file:
    a pipe nobody reads fills up and stops the service at its next log line."""
    import socket
    import tempfile

    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            raise RuntimeError(f"port {port} is taken by another process; stop it or pass --port")
    env = {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
        env=env,
        preexec_fn=(lambda: os.sched_setaffinity(0, SERVICE_CPUS)) if SERVICE_CPUS else None,
    )
    for _ in range(900):
        if proc.poll() is not None:
            break
        try:
            if httpx.get(f"http://127.0.0.1:{port}{ready}", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    log.seek(0)
    raise RuntimeError("the service did not start: " + log.read().decode(errors="replace")[-800:])


SERVICE_CPUS: set[int] = set()  # --service-cpus: the cores of the services and of the encoder's measurement
PGDATA = R / "serve-pgdata"  # --store postgresql: the database's folder


def serve_command(bundle: Path, port: int, args) -> list[str]:
    return [
        sys.executable,
        "-m",
        "cea",
        "serve",
        str(bundle),
        "--port",
        str(port),
        *(["--workers", str(args.workers)] if args.workers else []),
        *(["--max-batch", str(args.max_batch)] if args.max_batch else []),
        *(["--max-wait", str(args.max_wait)] if args.max_wait is not None else []),
    ]


def trivial_encoder(folder: Path) -> Path:
    """A static encoder that does next to nothing: 8 random dimensions a token of all-MiniLM-L6-v2's tokenizer."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import StaticEmbedding
    from tokenizers import Tokenizer

    from cea.encoders.catalog import resolve_model

    if not (folder / "modules.json").exists():
        tokenizer = Tokenizer.from_file(str(Path(resolve_model("all-MiniLM-L6-v2")) / "tokenizer.json"))
        SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_dim=8)]).save(str(folder))
    return folder


def crash(proc: subprocess.Popen) -> None:
    """SIGKILL a service and its workers (its process group), and wait until none of them is left: a worker still
    dying holds the port, and the service started again after it would find it taken."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for _ in range(200):
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def encoder_rate(bundle: Path, texts: list[str]) -> dict:
    """The bundle's encoder alone, as the service loads it: texts/s in length-sorted batches of 64 (median of 3
    passes over ``texts``) and one text per call (256 calls), on every core it may use (with ``--service-cpus``: in a
    child process on the services' cores)."""
    if SERVICE_CPUS and os.sched_getaffinity(0) != SERVICE_CPUS:
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(texts, f)
            f.flush()
            out = subprocess.run(
                [sys.executable, __file__, "--rate-of", str(bundle), "--rate-texts", f.name],
                check=True,
                capture_output=True,
                text=True,
                preexec_fn=lambda: os.sched_setaffinity(0, SERVICE_CPUS),
            ).stdout
        return json.loads(out.strip().splitlines()[-1])
    import torch

    from cea.bundle.create import BACKENDS
    from cea.bundle.examples import encode
    from cea.service.app import usable_cores

    manifest = json.loads((bundle / "manifest.json").read_text())
    cores = usable_cores()
    torch.set_num_threads(cores)
    if BACKENDS[manifest.get("backend", "torch")]:
        from cea.encoders.onnx import OnnxEncoder

        encoder = OnnxEncoder(bundle / "encoder", BACKENDS[manifest["backend"]], threads=cores)
    else:
        from cea.encoders import load_encoder

        encoder = load_encoder(str(bundle / "encoder"))
    encode(encoder, texts[:64])  # warm
    passes = []
    for _ in range(3):
        t0 = time.perf_counter()
        encode(encoder, texts, batch_size=64)
        passes.append(len(texts) / (time.perf_counter() - t0))
    t0 = time.perf_counter()
    for text in texts[:256]:
        encode(encoder, [text])
    one = 256 / (time.perf_counter() - t0)
    del encoder
    gc.collect()
    return {
        "batch64_texts_per_second": round(statistics.median(passes), 1),
        "batch64_passes": [round(p, 1) for p in passes],
        "one_text_per_call": round(one, 1),
    }


def histogram_quantile(text: str, name: str, q: float) -> float | None:
    """The ``q`` quantile of a Prometheus histogram in ``text``, interpolated within its buckets (as PromQL's
    ``histogram_quantile``); None when it holds no observation."""
    from prometheus_client.parser import text_string_to_metric_families

    buckets = sorted(
        (float(s.labels["le"]), s.value)
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == f"{name}_bucket"
    )
    if not buckets or buckets[-1][1] == 0:
        return None
    rank, lower, below = q * buckets[-1][1], 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if upper == float("inf"):
                return lower
            return lower + (upper - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = upper, count
    return lower


def metric_sums(text: str, name: str) -> tuple[float, float]:
    from prometheus_client.parser import text_string_to_metric_families

    values = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}
    return values.get(f"{name}_sum", 0.0), values.get(f"{name}_count", 0.0)


def peer_main(kind: str, model: str, port: int) -> None:
    """``--peer-server st``: the model behind FastAPI, one ``encode`` per request (what a plain deployment does)."""
    import uvicorn
    from fastapi import Body, FastAPI
    from sentence_transformers import SentenceTransformer

    encoder = SentenceTransformer(model, device="cpu")
    app = FastAPI()

    @app.get("/health")
    def health():
        return {"status": "ok"}

    @app.post("/predict")
    def embed(body: dict = Body(...)):  # a plain dict: the module's postponed annotations hide local models
        return {"embeddings": encoder.encode(body["texts"], normalize_embeddings=True).tolist()}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def parse() -> argparse.Namespace:
    """The command line (module docstring; the suppressed options are the script's own children's)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="rounds of --seconds, fresh connections each; the median round is the figure",
    )
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--backend", default="torch", help="torch, onnx or onnx-int8 (the bundle's encoder)")
    parser.add_argument("--store", default="folder", help="folder or postgresql (a local pgserver)")
    parser.add_argument("--services", type=int, default=1, help="cea serve processes on the bundle")
    parser.add_argument("--workers", type=int, default=None, help="cea serve --workers of each (default: its own)")
    parser.add_argument("--max-batch", type=int, default=None, help="cea serve --max-batch (default: its own)")
    parser.add_argument("--max-wait", type=float, default=None, help="cea serve --max-wait, ms (default: its own)")
    parser.add_argument("--additions", type=float, default=0.2, help="share of requests that add an example")
    parser.add_argument("--new-labels", type=float, default=0.1, help="share of additions with a label never seen")
    parser.add_argument("--removals", type=float, default=0.0, help="share of requests that remove an addition")
    parser.add_argument("--big", type=float, default=0.0, help="share of requests that predict --big-texts texts")
    parser.add_argument("--big-texts", type=int, default=32, help="texts of a big request")
    parser.add_argument("--trivial", action="store_true", help="a bundle of a trivial encoder: the HTTP limit")
    parser.add_argument("--peer", default=None, help="st or infinity: a peer server instead of cea serve")
    parser.add_argument("--peer-python", default=None, help="--peer infinity: the python of its environment")
    parser.add_argument("--peer-server", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--peer-model", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--tag", default="", help="added to the results file's name")
    parser.add_argument("--service-cpus", default=None, help="e.g. 0,1: the services' cores; the clients get the rest")
    parser.add_argument("--bundle", default=None, help="serve a copy of this bundle instead of building one")
    parser.add_argument("--dataset", default="banking77", help="banking77's catalog name or folder")
    parser.add_argument("--rate-of", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rate-texts", default=None, help=argparse.SUPPRESS)
    return parser.parse_args()


def pin_clients(cpus: str) -> None:
    """``--service-cpus``: those cores noted as the services', and this process (the clients) moved to the others."""
    SERVICE_CPUS.update(int(c) for c in cpus.split(","))
    rest = os.sched_getaffinity(0) - SERVICE_CPUS
    if not rest:
        raise SystemExit("--service-cpus leaves no core for the clients; name fewer")
    os.sched_setaffinity(0, rest)  # before any thread starts: the clients and their pools inherit it


def served_bundle(args: argparse.Namespace) -> Path:
    """The bundle to serve: built if missing (with the PostgreSQL store: in a fresh database, its server started),
    then for the folder store a fresh copy; ``--trivial`` sets the model and the tag."""
    import pg_server

    built = Path(args.bundle) if args.bundle else R / f"bundle-banking77-{args.backend}"
    if args.trivial:
        built, args.model, args.tag = (
            R / "bundle-banking77-trivial",
            str(trivial_encoder(R / "trivial-encoder")),
            args.tag or "trivial encoder",
        )
    store = []
    if args.store == "postgresql":  # a fresh database and bundle each run: the last run's additions are not in it
        shutil.rmtree(PGDATA, ignore_errors=True)
        built = R / f"serve-pg-{args.backend}"
        shutil.rmtree(built, ignore_errors=True)
        store = ["--store", pg_server.start(PGDATA)]
    if not (built / "manifest.json").exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "cea",
                "bundle",
                args.model,
                "--dataset",
                "banking77",
                "-o",
                str(built),
                "--backend",
                args.backend,
                *store,
            ],
            check=True,
        )
    bundle = built
    if args.store == "folder":  # a copy each run: the last run's additions are not in it
        bundle = R / "serve-run"
        shutil.rmtree(bundle, ignore_errors=True)
        shutil.copytree(built, bundle)
    return bundle


@dataclass
class Services:
    """What the load is sent to: each service's command and port, their OMP_NUM_THREADS (None: their own), the route
    of a prediction and its request body for a list of texts."""

    commands: list[list[str]]
    ports: list[int]
    threads: int | None
    route: str
    payload: Callable[[list[str]], dict]


def services_of(args: argparse.Namespace, bundle: Path) -> Services:
    """``--services`` services of ``bundle`` on ports from ``--port``: cea serve, or the ``--peer``."""
    ports = [args.port + i for i in range(args.services)]
    threads = max(1, (os.cpu_count() or 1) // args.services) if args.services > 1 else None  # the cores, shared
    route, payload = "/predict", (lambda texts: {"texts": texts})
    if args.peer == "st":
        commands = [
            [
                sys.executable,
                __file__,
                "--peer-server",
                "st",
                "--peer-model",
                str(bundle / "encoder"),
                "--port",
                str(port),
            ]
            for port in ports
        ]
    elif args.peer == "infinity":
        route, payload = "/embeddings", (lambda texts: {"model": "encoder", "input": texts})
        # the catalog's model folder, the bundle's encoder weights: infinity-emb 0.0.78 pins sentence-transformers
        # below 4, which cannot read the folder sentence-transformers 6 saved in the bundle
        from cea.encoders.catalog import resolve_model

        os.environ.update(HF_HUB_OFFLINE="1", DO_NOT_TRACK="1", INFINITY_ANONYMOUS_USAGE_STATS="0")
        commands = [
            [
                args.peer_python,
                "-m",
                "infinity_emb.cli",
                "v2",
                "--model-id",
                resolve_model(args.model),
                "--served-model-name",
                "encoder",
                "--port",
                str(port),
                "--engine",
                "torch",
                "--device",
                "cpu",
                "--no-model-warmup",
            ]
            for port in ports
        ]
    else:
        commands = [serve_command(bundle, port, args) for port in ports]
    return Services(commands, ports, threads, route, payload)


@dataclass
class Texts:
    """What the clients send: banking77's test texts (predictions), its train (text, label) pairs (additions), and
    2,048 of the test texts (the encoder alone's measurement, the warm-up)."""

    queries: list[str]
    train: list[tuple[str, str]]
    sample: list[str]


def main():
    args = parse()
    if args.peer_server:
        return peer_main(args.peer_server, args.peer_model, args.port)
    if args.rate_of:  # the child of encoder_rate, on the services' cores
        return print(json.dumps(encoder_rate(Path(args.rate_of), json.loads(Path(args.rate_texts).read_text()))))
    if args.service_cpus:
        pin_clients(args.service_cpus)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pg_server

    from cea.data import load_dataset

    ds = load_dataset(args.dataset)
    bundle = served_bundle(args)
    queries = list(ds["test"]["text"])
    train = list(zip(ds["train"]["text"], ds["train"]["label"]))
    texts = Texts(queries, train, sample=random.Random(0).sample(queries, 2048))
    limit = encoder_rate(bundle, texts.sample)
    print("encoder alone:", json.dumps(limit), flush=True)
    services = services_of(args, bundle)
    procs = []
    try:
        procs += [start(command, port, services.threads) for command, port in zip(services.commands, services.ports)]
        return measure(args, procs, services, texts, limit, again=lambda: encoder_rate(bundle, texts.sample))
    finally:  # nothing left serving on the ports, whatever failed
        for proc in procs:
            if proc.poll() is None:
                crash(proc)
        if args.store == "postgresql":
            pg_server.stop(PGDATA)


class Request(NamedTuple):
    """One request of the mix: its kind (the latencies' key), method, path and JSON body (None: none)."""

    kind: str
    method: str
    path: str
    body: dict | None


def send(connection: http.client.HTTPConnection, request: Request) -> tuple[int | str, bytes]:
    """``request`` over ``connection``: the answer's status and body, or the error (the connection closed) and none."""
    try:
        connection.request(
            request.method,
            request.path,
            None if request.body is None else json.dumps(request.body),
            {"content-type": "application/json"},
        )
        response = connection.getresponse()
        data = response.read()
        return response.status, data
    except (OSError, http.client.HTTPException) as exc:
        connection.close()
        return repr(exc), b""


@dataclass
class Round:
    """One round of the load: the served texts/s (the predicted texts), its seconds, and each kind's latencies."""

    served: float
    wall: float
    latencies: dict[str, list[float]]

    @property
    def with_additions(self) -> float:
        """The served texts/s with the added texts: an addition's text is encoded and stored, served too."""
        return self.served + len(self.latencies["add-1"]) / self.wall


class Traffic:
    """The clients' load (``args``' mix, to ``services``) and what came back: each kind's latencies this round, and
    over every round the additions acknowledged, the removals made and the errors."""

    def __init__(self, args: argparse.Namespace, services: Services, texts: Texts):
        self.args, self.services, self.texts = args, services, texts
        self.big = f"predict-{args.big_texts}"
        self.latencies = {"predict-1": [], self.big: [], "add-1": [], "remove-1": []}
        self.acknowledged, self.removed, self.errors, self.lock = [], [], [], threading.Lock()
        self.new_labels = 0  # the new labels made so far, by every client
        self.stop = 0.0

    def round(self, repeat: int) -> Round:
        """``--clients`` clients on fresh connections for ``--seconds`` (seeded apart from the other rounds')."""
        self.latencies = {"predict-1": [], self.big: [], "add-1": [], "remove-1": []}  # the clients read it and stop
        self.stop = time.perf_counter() + self.args.seconds
        started = time.perf_counter()
        clients = [threading.Thread(target=self.client, args=(i + 1000 * repeat,)) for i in range(self.args.clients)]
        for t in clients:
            t.start()
        for t in clients:
            t.join()
        wall = time.perf_counter() - started
        served = (len(self.latencies["predict-1"]) + self.args.big_texts * len(self.latencies[self.big])) / wall
        return Round(served, wall, self.latencies)

    def client(self, seed: int) -> None:
        """One client until ``stop``: each request of the mix to a service at random, on its own connections."""
        rng, mine = random.Random(seed), []
        connections = [http.client.HTTPConnection("127.0.0.1", port, timeout=300) for port in self.services.ports]
        while time.perf_counter() < self.stop:
            connection = rng.choice(connections)
            request = self.pick(rng, mine, seed)
            t0 = time.perf_counter()
            status, data = send(connection, request)
            self.tally(request, status, data, t0, mine)
        for connection in connections:
            connection.close()

    def pick(self, rng: random.Random, mine: list[int], seed: int) -> Request:
        """The next request at random: a removal of one of the client's additions (``mine``), an addition (some with
        a new label), a big prediction, or else a one-text prediction."""
        args, route, payload = self.args, self.services.route, self.services.payload
        roll = rng.random()
        if roll < args.removals and mine:
            return Request("remove-1", "DELETE", f"/examples/{mine.pop(rng.randrange(len(mine)))}", None)
        if roll < args.removals + args.additions:
            text, label = rng.choice(self.texts.train)
            if rng.random() < args.new_labels:
                with self.lock:
                    self.new_labels += 1
                    label = f"new label {seed} {self.new_labels}"
            body = {"texts": [f"{text} {rng.randrange(10**9)}"], "labels": [label]}
            return Request("add-1", "POST", "/examples", body)
        if roll < args.removals + args.additions + args.big:
            return Request(self.big, "POST", route, payload(rng.sample(self.texts.queries, args.big_texts)))
        return Request("predict-1", "POST", route, payload([rng.choice(self.texts.queries)]))

    def tally(self, request: Request, status: int | str, data: bytes, t0: float, mine: list[int]) -> None:
        """One answer counted: its latency (since ``t0``), an addition's ids (the client's too: ``mine``) or a
        removal's id; or else its error."""
        with self.lock:
            if status == 200:
                self.latencies[request.kind].append(time.perf_counter() - t0)
                if request.kind == "add-1":
                    self.acknowledged.extend(json.loads(data)["ids"])
                    mine.extend(json.loads(data)["ids"])
                elif request.kind == "remove-1":
                    self.removed.append(int(request.path.rsplit("/", 1)[1]))
            else:
                self.errors.append(f"{request.kind}: {status}")


def warm(services: Services, sample: list[str]) -> None:
    """Each service's first requests (20 one-text predictions), untimed."""
    for port in services.ports:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as warm:
            for text in sample[:20]:
                warm.post(services.route, json=services.payload([text])).raise_for_status()


def service_figures(ports: list[int]) -> dict:
    """The services' own figures from their /metrics: the mean batch, queue wait and refit, the refits, and how long
    a change took to reach the head (p50, p99: the first service's)."""
    texts = [httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text for port in ports]
    waits = [metric_sums(t, "cea_queue_wait_seconds") for t in texts]
    sizes = [metric_sums(t, "cea_batch_texts") for t in texts]
    refits = [metric_sums(t, "cea_refit_seconds") for t in texts]
    return {
        "mean_batch_texts": round(sum(s for s, _ in sizes) / max(sum(n for _, n in sizes), 1), 2),
        "mean_queue_wait_ms": round(1000 * sum(s for s, _ in waits) / max(sum(n for _, n in waits), 1), 2),
        "refits": int(sum(n for _, n in refits)),
        "mean_refit_s": round(sum(s for s, _ in refits) / max(sum(n for _, n in refits), 1), 3),
        "change_to_head_s": {
            f"p{int(100 * q)}": histogram_quantile(texts[0], "cea_change_to_head_seconds", q) for q in (0.5, 0.99)
        },
    }


def results_name(args: argparse.Namespace) -> str:
    """The results file's name: the peer or backend, the store, services and workers (unless one folder service of
    one worker), the additions' share and the tag."""
    name = f"serve_load-{args.peer or args.backend}"
    if (args.store, args.services, args.workers or 1) != ("folder", 1, 1):
        name += f"-{args.store}-s{args.services}-w{args.workers or 1}"
    return name + f"-a{args.additions:g}" + args.tag.replace(" ", "-")


def served_record(args: argparse.Namespace, rounds: list[Round], median: Round, rate: float, p99: float | None) -> None:
    """The median round's served texts/s as a record, against the encoder alone's batch-64 ``rate``."""
    served, encoded = median.served, median.with_additions
    qualifier = "".join(
        [
            f", peer {args.peer}" if args.peer else "",
            ", PyTorch backend" if args.backend == "torch" else "",
            f", PostgreSQL store, {args.services} services" if args.store == "postgresql" else "",
            f", {args.workers} workers" if (args.workers or 1) > 1 else "",
            ", clients on other cores" if SERVICE_CPUS else "",
            f", {args.tag}" if args.tag else "",
            f", {args.big_texts}-text requests" if args.big == 1 else "",
        ]
    )
    mix = "predictions only" if not args.additions else f"{100 * args.additions:g} % additions"
    record(
        f"served texts/s{qualifier}, {mix}",
        round(served, 1),
        baseline=rate,
        unit="texts/s",
        section="speed",
        baseline_is="the encoder alone, batch 64",
        note=f"{served / rate:.2f}x; p99 {p99} ms"
        + (f"; {encoded:.1f} with the added texts" if args.additions else "")
        + (
            f"; median of {len(rounds)} rounds: {', '.join(f'{r.served:.0f}' for r in rounds)}"
            if len(rounds) > 1
            else ""
        ),
    )


def measure(args, procs, services: Services, texts: Texts, limit: dict, again) -> None:
    """The load, the service's figures, SIGKILL and what is there after it, then the encoder alone ``again`` (the
    limit: the median of its passes before and after, as a shared machine's speed drifts); writes and prints the
    summary."""
    warm(services, texts.sample)
    traffic = Traffic(args, services, texts)
    rounds = []  # --repeats: rounds of fresh connections (spread over a service's workers anew), the median kept
    for repeat in range(args.repeats):
        rounds.append(traffic.round(repeat))
    median = sorted(rounds, key=lambda r: r.served)[len(rounds) // 2]
    served, encoded, latencies = median.served, median.with_additions, median.latencies
    service = {} if args.peer else service_figures(services.ports)
    summary = {
        "backend": args.backend,
        "peer": args.peer,
        "service_cpus": sorted(SERVICE_CPUS) or None,
        "client_cpus": len(os.sched_getaffinity(0)),
        "store": args.store,
        "services": args.services,
        "workers": args.workers,
        "max_batch": args.max_batch,
        "max_wait_ms": args.max_wait,
        "clients": args.clients,
        "seconds": round(median.wall, 1),
        "mix": {
            "additions": args.additions,
            "new_labels": args.new_labels,
            "removals": args.removals,
            "big": args.big,
            "big_texts": args.big_texts,
        },
        "served_texts_per_second": round(served, 1),
        "rounds": [round(r.served, 1) for r in rounds],
        "served_with_additions_texts_per_second": round(encoded, 1),
        "errors": len(traffic.errors),
        "error_samples": traffic.errors[:5],
        "requests": {k: len(v) for k, v in latencies.items()},
        "latency_ms": {
            k: {
                "p50": round(1000 * float(np.percentile(v, 50)), 1),
                "p99": round(1000 * float(np.percentile(v, 99)), 1),
            }
            for k, v in latencies.items()
            if v
        },
        "service": service,
    }
    if not args.peer:
        summary.update(durability(procs, services, traffic.acknowledged, traffic.removed, args))
    else:
        for proc in procs:
            crash(proc)
    after = again()  # nothing serving now
    rate = round(statistics.median(limit["batch64_passes"] + after["batch64_passes"]), 1)
    summary = {
        **summary,
        "encoder_alone": {"batch64_texts_per_second": rate, "before": limit, "after": after},
        "ratio_to_encoder_batch64": round(served / rate, 3),
        "ratio_with_additions": round(encoded / rate, 3),
    }
    R.mkdir(parents=True, exist_ok=True)
    (R / f"{results_name(args)}.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    p99 = summary["latency_ms"].get("predict-1" if args.big < 1 else traffic.big, {}).get("p99")
    served_record(args, rounds, median, rate, p99)


def durability(procs, services: Services, acknowledged, removed, args) -> dict:
    """SIGKILL every service (and the database), start them again, and look up what was acknowledged."""
    import pg_server

    for proc in procs:
        crash(proc)
    if args.store == "postgresql":
        pg_server.kill(PGDATA)
        pg_server.start(PGDATA)
    procs = [start(command, port, services.threads) for command, port in zip(services.commands, services.ports)]
    urls = [f"http://127.0.0.1:{port}" for port in services.ports]
    rng = random.Random(1)
    kept = sorted(set(acknowledged) - set(removed))
    missing = [i for i in kept if httpx.get(f"{rng.choice(urls)}/examples/{i}", timeout=30).status_code != 200]
    back = [i for i in removed if httpx.get(f"{rng.choice(urls)}/examples/{i}", timeout=30).status_code != 404]
    text = f"an addition made through one service {time.time()}"
    new_id = httpx.post(f"{urls[0]}/examples", json={"texts": [text], "labels": ["crossed"]}, timeout=300).json()[
        "ids"
    ][0]
    got = httpx.post(f"{urls[-1]}/predict", json={"texts": [text]}, timeout=300).json()["predictions"][0]
    for proc in procs:
        proc.terminate()
        proc.wait()
    if args.store == "postgresql":
        pg_server.stop(PGDATA)
    return {
        "acknowledged_additions": len(acknowledged),
        "acknowledged_removals": len(removed),
        "missing_after_sigkill": len(missing),
        "removed_but_back_after_sigkill": len(back),
        "addition_through_first_seen_by_last": got["neighbours"][0]["id"] == new_id,
        "new_label_predicted_at_once": got["label"] == "crossed",
    }


if __name__ == "__main__":
    main()
