"""Where batch work over parts (:mod:`cea.batch.parts`) runs: ``local``, this process, part after part; ``ray``, a pool
of Ray actors on this machine or a cluster, each made once (loading its model once) and given parts as they free up,
the pattern Ray Data documents for model inference (``map_batches`` with an actor pool).

What it expects
    A worker class (``worker(**options)`` loads what it needs; ``worker(part_dict)`` reads, does and writes one part and
    answers a dict with its ``rows``; ``close()``, where it has one, when the local engine is done), the parts, and
    for Ray an ``address`` (None: a Ray on this machine; ``auto`` or ``HOST:PORT``: a running cluster), the actors
    (default: one per CPU, or per GPU with ``gpus``). The worker's class must be importable where the actors run (cea
    installed on every node) and the paths it writes seen by every node (a shared filesystem).

What it returns
    One dict per part, in the order parts finish, with the ``node`` that did it (Ray's node id; ``local`` here) and
    the seconds the worker spent reading, working and writing (:func:`spent`).

Why written here
    Ray Data's reads number no rows and name their files themselves; handing actors numbered parts keeps the rows
    numbered and a part's output under its own name, whatever the order in which parts finish.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import asdict

import pandas as pd

from ..errors import CeaError, OptionError
from ..hardware import bounded_primitive_cache
from .parts import Part

ENGINES = ("local", "ray")


def run_parts(
    worker: type,
    options: dict,
    parts: Iterable[Part],
    engine: str = "local",
    address: str | None = None,
    actors: int | None = None,
    gpus: bool = False,
    say: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Run ``worker`` (made by ``worker(**options)``) over ``parts`` on ``engine`` (module docstring); ``say(result)``
    after each part."""
    parts, say = list(parts), say or (lambda result: None)
    bounded_primitive_cache()  # before the worker's first encode: memory that stays the same over any corpus
    if engine not in ENGINES:
        raise OptionError("engine", f"must be one of {', '.join(ENGINES)}, got {engine!r}")
    if actors is not None and actors < 1:
        raise OptionError("actors", f"must be at least 1, got {actors}")
    if engine == "ray":
        return _run_ray(worker, options, parts, address, actors, gpus, say)
    if address is not None or actors is not None:
        raise OptionError("address", "and actors go with engine ray", cli="--address and --actors go with --engine ray")
    done, job = [], worker(**options)
    try:
        for part in parts:
            done.append({**job(asdict(part)), "node": "local"})
            say(done[-1])
    finally:
        getattr(job, "close", lambda: None)()  # what it opened (a bundle's files), closed here and not at exit
    return done


class _Actor:
    """One actor of the pool: the worker made once, each part's answer tagged with this node."""

    def __init__(self, worker: type, options: dict):
        import ray

        self.job = worker(**options)
        self.node = ray.get_runtime_context().get_node_id()

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        done = []
        for part in batch["part"]:
            try:
                done.append({**self.job(json.loads(part)), "node": self.node})
            except CeaError as exc:  # said to the driver as it is: Ray's wrapping would keep only its text
                done.append({"error": str(exc)})
        return pd.DataFrame({"result": [json.dumps(d) for d in done]})


def connect(address: str | None):
    """Ray, connected to ``address`` (None: started on this machine); a CeaError where Ray is not installed or the
    address does not answer. Returns ``(ray, started)``: whether this call started it (and should shut it down)."""
    try:
        import ray
    except ImportError:
        raise OptionError("engine", "ray needs Ray: pip install 'cea[ray]'") from None
    if ray.is_initialized():
        return ray, False
    if address not in (None, "auto"):
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
        except (OSError, ValueError):
            raise OptionError(
                "address",
                f"{address} does not answer; start Ray there (ray start --head) or leave "
                "it out for a Ray on this machine",
            ) from None
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")  # Ray's C++ warns of every actor's arguments on stderr
    try:
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
            runtime_env={"env_vars": bounded_primitive_cache()},
        )  # each actor's memory as this process's
    except ConnectionError as exc:
        raise OptionError(
            "address",
            f"{address}: no Ray cluster answered ({str(exc).splitlines()[0]}); start one "
            "with ray start --head, or leave it out",
        ) from None
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    return ray, True


def _run_ray(worker, options, parts, address, actors, gpus, say) -> list[dict]:
    ray, started = connect(address)
    try:
        size = max(1, min(actors or int(ray.cluster_resources().get("GPU" if gpus else "CPU", 1)), len(parts)))
        ds = ray.data.from_items([{"part": json.dumps(asdict(p))} for p in parts], override_num_blocks=len(parts))
        ds = ds.map_batches(
            _Actor,
            fn_constructor_args=(worker, options),
            batch_size=1,
            batch_format="pandas",
            compute=ray.data.ActorPoolStrategy(size=size),
            num_cpus=0 if gpus else 1,
            num_gpus=1 if gpus else 0,
        )
        done = []
        for row in ds.iter_rows():
            done.append(json.loads(row["result"]))
            if "error" in done[-1]:  # a worker's refusal (a file it cannot read): the run stops on it
                raise CeaError(done[-1]["error"])
            say(done[-1])
        return done
    finally:
        if started:
            ray.shutdown()


def shares_said(done: list[dict]) -> str:
    """``; node ab12cd34: 51%, node ...``, each node's share of the rows done, largest first, where more than one node
    worked, else nothing."""
    rows = pd.DataFrame(done).groupby("node")["rows"].sum().sort_values(ascending=False) if done else pd.Series()
    return "; " + ", ".join(f"node {n[:8]}: {v / rows.sum():.0%}" for n, v in rows.items()) if len(rows) > 1 else ""


def spent(clock: list[float]) -> dict[str, float]:
    """A part's seconds reading, working and writing, from the four times a worker took around them."""
    return {name: round(b - a, 4) for name, a, b in zip(("read_s", "work_s", "write_s"), clock, clock[1:])}
