"""Issue 90's serving goals while ``cea serve`` fine-tunes in the background: the predictions' p99 during a fit
against idle, every acknowledged annotation present after the swap, and a second replica answering from the new
generation.

    python bench/background_fit.py [--dataset banking77] [--per-class 8] [--budget 5m] [--seconds 30]

An empty all-MiniLM-L6-v2 bundle (``cea bundle MODEL -o B``, no data set) served by two ``cea serve`` processes on one
folder: the primary fits in the background (``--train-budget``, ``--train-from 0``: on START_TRAINING only), the replica
never does (``--no-train``). PER_CLASS train examples a class are posted to the primary as Label Studio's
ANNOTATION_CREATED webhooks (its label config names every class, so each class starts from its name). Then 16
one-text clients predict test texts for SECONDS (idle); Label Studio's START_TRAINING starts a fit, and the same
clients predict until it ends while one more posts an annotation every half second, keeping each acknowledged one's
ids. After the fit, each acknowledged id is asked of both replicas (``GET /examples/ID``), and the replica's
``model_version`` is polled every 50 ms from the moment the primary's ``/health`` says the fit ended until it carries
the new generation.

Records (``docs/records/background_fit.jsonl``, section ``background-fit``): predict p99 during the fit against idle
(the ratio's goal: at most 2), acknowledged annotations lost (goal: 0), the replica's seconds to the new generation
(goal: at most 5), and the fit's outcome with its held-back accuracies.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

import httpx
import numpy as np
import pandas as pd
from serve_load import crash, start

from common import R, record

CLIENTS = 16
SECTION = "background-fit"


def annotation(number: int, text: str, label: str, config: str) -> dict:
    """Label Studio's ANNOTATION_CREATED of annotation ``number`` (task ``number``, project 1)."""
    return {
        "action": "ANNOTATION_CREATED",
        "annotation": {
            "id": number,
            "task": number,
            "was_cancelled": False,
            "result": [{"from_name": "label", "to_name": "text", "type": "choices", "value": {"choices": [label]}}],
        },
        "task": {"id": number, "project": 1, "data": {"text": text}},
        "project": {"id": 1, "label_config": config},
    }


def clients(url: str, texts: list[str], stop: threading.Event, latencies: list[float]) -> list[threading.Thread]:
    """:data:`CLIENTS` threads predicting one text a request until ``stop``; each request's seconds appended."""

    def client(seed: int):
        rng = random.Random(seed)
        with httpx.Client(base_url=url, timeout=60) as http:
            while not stop.is_set():
                started = time.perf_counter()
                http.post("/predict", json={"texts": [rng.choice(texts)]}).raise_for_status()
                latencies.append(time.perf_counter() - started)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    return threads


def p99(seconds: list[float]) -> float:
    return float(np.percentile(np.asarray(seconds) * 1000, 99))


def parse() -> argparse.Namespace:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="banking77")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--per-class", type=int, default=8)
    parser.add_argument("--budget", default="5m")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--port", type=int, default=8731)
    return parser.parse_args()


@dataclass
class Annotations:
    """What is annotated: ``picked`` before the fit, ``later`` during it (in order), under the label ``config``."""

    picked: pd.DataFrame
    later: pd.DataFrame
    config: str


def annotations(train: pd.DataFrame, per_class: int) -> Annotations:
    """``per_class`` train examples a class (shuffled), the rest of train (shuffled), and a config naming each class."""
    rng, labels = np.random.default_rng(0), train["label"].to_numpy()
    classes = sorted(set(labels))
    rows = np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:per_class] for c in classes])
    picked = train.iloc[rng.permutation(rows)]
    later = train.drop(picked.index).sample(frac=1.0, random_state=1)  # annotated during the fit
    config = (
        '<View><Text name="text" value="$text"/><Choices name="label" toName="text">'
        + "".join(f"<Choice value={quoteattr(str(c))}/>" for c in classes)
        + "</Choices></View>"
    )
    return Annotations(picked, later, config)


def serve(args: argparse.Namespace) -> list[subprocess.Popen]:
    """An empty bundle of ``args.model`` in a fresh folder, served by the primary (fits) and the replica (never)."""
    folder = R / "background-fit"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    bundle = folder / "bundle"
    subprocess.run([sys.executable, "-m", "cea", "bundle", args.model, "-o", str(bundle)], check=True)
    primary, replica = args.port, args.port + 1
    return [
        start(
            [
                sys.executable,
                "-m",
                "cea",
                "serve",
                str(bundle),
                "--port",
                str(primary),
                "--train-budget",
                args.budget,
                "--train-from",
                "0",
                "--train-work",
                str(folder / "fits"),
            ],
            primary,
        ),
        start([sys.executable, "-m", "cea", "serve", str(bundle), "--port", str(replica), "--no-train"], replica),
    ]


def predictions_for(url: str, texts: list[str], seconds: float) -> list[float]:
    """Each request's seconds while :data:`CLIENTS` clients predict for ``seconds``."""
    latencies = []
    stop = threading.Event()
    threads = clients(url, texts, stop, latencies)
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return latencies


@dataclass
class Fit:
    """The fit under load: each prediction's seconds during it, the annotations acknowledged during it, its outcome
    (``/health``'s ``training.last``) and the replica's seconds to the new generation (None: not within 60 s)."""

    during: list[float]
    acknowledged: list[int]
    last: dict
    seen: float | None


def replica_seconds(replica: httpx.Client, last: dict, ended: float) -> float | None:
    """Seconds from ``ended`` until the replica's ``model_version`` carries ``last``'s generation (polled every 50 ms,
    at most 60 s; None: not swapped, or not within them)."""
    seen, renewed = None, f".{last.get('generation')}"
    while last["swapped"] and seen is None and time.monotonic() - ended < 60:
        answered = replica.get("/label-studio/health").json()["model_version"]
        if answered.count(".") == 2 and answered.endswith(renewed):  # next id, count, generation
            seen = time.monotonic() - ended
        time.sleep(0.05)
    return seen


def fit_under_load(one: httpx.Client, two: httpx.Client, url: str, texts: list[str], marks: Annotations) -> Fit:
    """START_TRAINING, and the clients predicting until the replica has the new generation while one more posts an
    annotation every half second until the fit ends."""
    started = one.post("/label-studio/webhook", json={"action": "START_TRAINING", "project": {"id": 1}}).json()
    assert started["fit"] == "started", started
    during = []
    stop = threading.Event()
    threads = clients(url, texts, stop, during)
    acknowledged, n = [], len(marks.picked)
    while True:
        health = one.get("/health").json()["training"]
        if health["last"] is not None:
            ended = time.monotonic()
            break
        if n - len(marks.picked) < len(marks.later):
            text, label = marks.later.iloc[n - len(marks.picked)][["text", "label"]]
            n += 1
            got = one.post("/label-studio/webhook", json=annotation(n, text, str(label), marks.config)).json()
            acknowledged += got["examples"][0]["ids"]
        time.sleep(0.5)
    seen = replica_seconds(two, health["last"], ended)
    stop.set()
    for thread in threads:
        thread.join()
    print(f"fit: {health['last']}", flush=True)
    return Fit(during, acknowledged, health["last"], seen)


def write_records(args: argparse.Namespace, idle: list[float], fit: Fit, lost: int) -> None:
    """The figures as records (module docstring)."""
    during, last = fit.during, fit.last
    where = f"{args.dataset}, {args.per_class} a class, budget {args.budget}"
    record(
        f"background fit: predict p99 during the fit ({where})",
        round(p99(during), 1),
        baseline=round(p99(idle), 1),
        unit="ms (baseline: idle)",
        section=SECTION,
        note=f"{CLIENTS} one-text clients, {args.model}; {p99(during) / p99(idle):.2f}x idle; median "
        f"{statistics.median(during) * 1000:.1f} ms during, {statistics.median(idle) * 1000:.1f} idle; goal "
        "at most 2x",
    )
    record(
        f"background fit: annotations lost ({where})",
        lost,
        baseline=len(fit.acknowledged),
        unit="annotations (baseline: acknowledged during the fit)",
        section=SECTION,
        note="asked of both replicas after the fit; goal 0",
    )
    record(
        f"background fit: outcome ({where})",
        last["outcome"],
        baseline=f"held-back {last.get('live_accuracy')} live, {last.get('fitted_accuracy')} fitted",
        unit="% of the held-back annotations right",
        section=SECTION,
        note=f"{last['held_back']} held back, {last['trained_on']} trained on, {last['seconds']:.0f} s"
        + ("" if last["swapped"] else f"; {last['why']}"),
    )
    if fit.seen is not None:
        record(
            f"background fit: replica on the new generation ({where})",
            round(fit.seen, 2),
            unit="s after the primary's swap",
            section=SECTION,
            note="goal at most 5 s",
        )


def main() -> None:
    args = parse()
    from cea.data import load_dataset

    data = load_dataset(args.dataset)
    marks = annotations(data["train"], args.per_class)
    procs = serve(args)
    url = f"http://127.0.0.1:{args.port}"
    try:
        one, two = (httpx.Client(base_url=f"http://127.0.0.1:{p}", timeout=120) for p in (args.port, args.port + 1))
        for n, (text, label) in enumerate(zip(marks.picked["text"], marks.picked["label"]), start=1):
            one.post("/label-studio/webhook", json=annotation(n, text, str(label), marks.config)).raise_for_status()
        print(f"{len(marks.picked)} annotations learned", flush=True)

        texts = list(data["test"]["text"])
        idle = predictions_for(url, texts, args.seconds)
        print(f"idle: {len(idle)} predictions, p99 {p99(idle):.1f} ms", flush=True)
        fit = fit_under_load(one, two, url, texts, marks)
        lost = sum(1 for i in fit.acknowledged for http in (one, two) if http.get(f"/examples/{i}").status_code != 200)
        print(
            f"during: {len(fit.during)} predictions, p99 {p99(fit.during):.1f} ms; {len(fit.acknowledged)} "
            f"annotations acknowledged during the fit, {lost} missing; replica {fit.seen} s",
            flush=True,
        )
    finally:
        for proc in procs:
            crash(proc)
    write_records(args, idle, fit, lost)


if __name__ == "__main__":
    main()
