"""Where cea keeps downloads and caches, how it writes files without leaving half of one, how it hashes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import CeaError


def cache_dir() -> Path:
    """The user's cache: ``$CEA_CACHE`` or ``~/.cache/cea``."""
    path = Path(os.environ.get("CEA_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "cea"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike):
    """A temporary path beside ``target`` (file or folder), renamed onto it only on success: no half-written target."""
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
    write_text(path, json.dumps(obj, indent=2, default=str) + "\n")


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write text atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_npy(path: str | os.PathLike, array) -> None:
    """Write a ``.npy`` array atomically (no pickle)."""
    import numpy as np

    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, array, allow_pickle=False)


def read_json(path: str | os.PathLike, formats: str | tuple[str, ...], fix: str = "write it again with this cea"):
    """A JSON file cea wrote, checked to hold one of ``formats`` (its ``"format"`` key): a missing,
    damaged or foreign file is a :class:`cea.errors.CeaError` that names it and ends with ``fix``."""
    path, formats = Path(path), (formats,) if isinstance(formats, str) else formats
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CeaError(f"{path} is missing; {fix}") from None
    except json.JSONDecodeError as exc:
        raise CeaError(f"{path} is not valid JSON (line {exc.lineno}); {fix}") from None
    found = data.get("format") if isinstance(data, dict) else None
    if found not in formats:
        raise CeaError(f"{path} holds format {found!r}, not {' or '.join(formats)}; {fix}")
    return data


def sha256_chunks(chunks: Iterable[bytes]) -> str:
    """Hex sha256 of the concatenated ``chunks`` (streamed: nothing is joined in memory)."""
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes, read ``chunk`` bytes at a time."""
    with open(path, "rb") as fh:
        return sha256_chunks(iter(lambda: fh.read(chunk), b""))
