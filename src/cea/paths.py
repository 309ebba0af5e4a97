"""Where cea keeps downloads and caches, and how it writes files without leaving half of one."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


def cache_dir() -> Path:
    """The user's cache: ``$CEA_CACHE`` or ``~/.cache/cea``."""
    root = os.environ.get("CEA_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "cea")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike):
    """Yield a temporary path beside ``target``; rename it onto ``target`` only on success.

    Works for files and for folders: whatever the block writes at the yielded path replaces
    ``target`` in one rename, so a crash never leaves a half-written ``target``.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent)) / "part"
    try:
        yield tmp
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write JSON atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, default=str) + "\n")


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write text atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
