"""``cea serve --workers N``: N service processes behind one address, each listening on a socket of its own.

What it does
    :func:`serve_processes` starts N processes (spawned), each binding ``host:port`` with ``SO_REUSEPORT`` and serving
    the app of :func:`cea.service.app.from_environment` under uvicorn; the kernel hands each new connection to one of
    their sockets. The parent waits: SIGINT or SIGTERM stops every worker (each finishes what it answers), a worker that
    dies after starting is started again, and one that dies while starting stops the service (its error is on stderr).

Why not uvicorn's own workers
    They share one listening socket, and the worker that wakes first accepts every connection waiting: 16 keep-alive
    clients that connected together could all sit on one of 2 workers (``bench/serve_load.py``: the other worker's
    batches 0, 1,200 texts/s against 1,900 when spread), and the service ran at one process's rate. Where the system
    has no ``SO_REUSEPORT`` (Windows), uvicorn's workers serve instead.

What it expects
    ``settings``: what each worker opens (:data:`cea.service.app.SETTINGS`).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import threading
import time

STARTING = 120.0  # seconds within which a worker's death is a failure to start (no restart)


def reuse_port() -> bool:
    """Whether sockets of several processes can listen on one port here (``SO_REUSEPORT``)."""
    return hasattr(socket, "SO_REUSEPORT")


def listening_socket(host: str, port: int, shared: bool = True) -> socket.socket:
    """A socket bound to ``host:port`` that other processes' sockets may share (``SO_REUSEPORT``; ``shared``
    False: one that no other may, which binds only where nothing else is bound: the check before starting)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if shared:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def worker(settings: dict, host: str, port: int, ready=None) -> None:
    """One worker process: the app of ``settings`` opened, then (after every worker of ``ready``, a barrier, has
    opened its own) its own socket listening. Listening together: connections made while one worker still opened
    its bundle would all go to those already listening."""
    import uvicorn

    from .app import SETTINGS

    os.environ[SETTINGS] = json.dumps(settings)
    sock = listening_socket(host, port)  # bound; listening (taking connections) from the server's start
    config = uvicorn.Config("cea.service.app:from_environment", factory=True, log_level="warning", access_log=False)
    config.load()
    if ready is not None:
        try:
            ready.wait(STARTING)
        except threading.BrokenBarrierError:  # another worker failed to start: the parent stops the service
            return
    uvicorn.Server(config).run(sockets=[sock])


def serve_processes(settings: dict, workers: int, host: str, port: int) -> int:
    """Run ``workers`` worker processes until SIGINT or SIGTERM (0) or until one fails to start (1)."""
    context = multiprocessing.get_context("spawn")
    stopping = []

    def start(ready=None):
        process = context.Process(target=worker, args=(settings, host, port, ready), name="cea-serve-worker")
        process.start()
        return process, time.monotonic()

    previous = {s: signal.signal(s, lambda signum, _: stopping.append(signum)) for s in (signal.SIGINT, signal.SIGTERM)}
    ready = context.Barrier(workers)  # the first workers listen together; one started again listens at once
    running, code = [start(ready) for _ in range(workers)], 0
    try:
        while not stopping:
            time.sleep(0.2)
            for i, (process, started) in enumerate(running):
                if process.is_alive():
                    continue
                if time.monotonic() - started < STARTING:
                    code = 1
                    stopping.append(None)
                    break
                running[i] = start()
    finally:
        for process, _ in running:
            if process.is_alive():
                process.terminate()  # SIGTERM: uvicorn finishes the requests in hand
        for process, _ in running:
            process.join(30)
            if process.is_alive():
                process.kill()
        for s, handler in previous.items():
            signal.signal(s, handler)
    return code
