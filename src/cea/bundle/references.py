"""Where a bundle's reference examples live: one interface, :class:`Store`, and its two kinds.

``folder`` (the default, :class:`FolderStore`): generations of ``.npy`` files and a write-ahead log in the bundle
folder (:mod:`cea.bundle.layout` lays the files out). ``postgresql`` (:class:`cea.bundle.postgres.PostgresStore`):
a table with a pgvector column in a database the user runs, for several replicas or machines. Each kind registers
itself in :data:`STORES` (:func:`register_store`), where :func:`open_store` finds the one a manifest names.

A bundle keeps its rows in memory in step with the store (:mod:`cea.bundle.changes`): it applies the changes made since
(:meth:`Store.pull`) before each request and makes its own under :meth:`Store.locked` (one writer at a time across
processes and machines; durable at its exit), so every replica sees an acknowledged change from its next request on.

Records are dicts: ``{"op": "add", "ids", "labels", "texts", "embeddings": (n, d) float32}`` (with ``"sources"``,
each row's annotation key, and ``"replaces"``, ids removed in the same change, where an annotation's examples are
set: :meth:`cea.bundle.Bundle.set_examples`), ``{"op": "remove", "ids"}``, ``{"op": "relabel", "ids", "labels"}``.

No library keeps a FAISS or numpy index in step with a log shared by processes, hence this module.
"""

from __future__ import annotations

import abc
import base64
import contextlib
import datetime as dt
import fcntl
import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import CeaError
from ..knn.head import FILE as HEAD_FILE, LinearHead
from ..knn.index import load_index
from ..paths import atomic_path, write_json
from .layout import (
    WAL,
    append_record,
    checksums,
    cut_torn_line,
    decode_line,
    fsync_dir,
    read_manifest,
    retired_encoder,
    sha256,
    write_generation,
)

LOCK = "lock"  # the folder store's lock file (flock), beside the log
# what a service keeps beside the examples, each pile its own file and lock (FILE.jsonl, FILE.lock): the texts answered
# unknown (cea discover groups them), and its latest predicted texts with their embeddings (cea suggest ranks them)
PILES = ("unknowns", "traffic")
# what stays behind when a bundle travels (cea push, MLflow): the locks, what a service kept of its traffic and the
# state of its background fits (cea.service.fine_tuning)
LEFT_BEHIND = (LOCK, "*.lock", *(f"{pile}.jsonl" for pile in PILES), "training.json")


def _kept_item(line: str) -> dict | None:
    """One line of a folder store's pile, its embedding (if any) as float32; None for a blank line or one torn by a
    crash (never read back)."""
    try:
        item = json.loads(line) if line.strip() else None
    except ValueError:
        return None
    if not isinstance(item, dict) or "id" not in item:
        return None
    if "embedding" in item:
        item["embedding"] = np.frombuffer(base64.b64decode(item["embedding"]), dtype=np.float32)
    return item


@dataclass
class Loaded:
    """What a store holds now: the rows of its last compacted state and the changes since (``records``)."""

    manifest: dict
    embeddings: np.ndarray
    ids: np.ndarray
    labels: list
    texts: list[str]
    index: object = None  # a saved index of exactly these rows, if the store keeps one
    head: LinearHead | None = None  # the head fitted to these rows, if saved
    records: list[dict] = field(default_factory=list)
    sources: list | None = None  # each row's source (an annotation's key; None: added as itself), if any has one


class Store(abc.ABC):
    kind = ""  # the manifest's "store": {"kind": ...}

    @classmethod
    @abc.abstractmethod
    def attach(cls, root: Path, manifest: dict) -> Store:
        """The store of the bundle in ``root`` whose manifest is ``manifest``."""

    @abc.abstractmethod
    def load(self, verify: bool = False) -> Loaded:
        """Everything, read afresh; later :meth:`pull` calls return what changed after it."""

    @abc.abstractmethod
    def pull(self) -> list[dict] | None:
        """The records committed since the last load, pull or append, in order; None: load afresh (compacted)."""

    @abc.abstractmethod
    def locked(self):
        """A context in which this process is the only writer; what :meth:`append` wrote is durable at its exit."""

    @abc.abstractmethod
    def append(self, record: dict) -> None:
        """Write one record (inside :meth:`locked`, after a :meth:`pull`)."""

    def compact(self, bundle, index) -> dict | None:
        """Fold the changes into a new compacted state of ``bundle``'s live rows and their ``index`` (inside
        :meth:`locked`); the new manifest, or None where the store has nothing to fold."""
        return None

    @abc.abstractmethod
    def renew(self, rows: Loaded, encoder: Path) -> dict:
        """Replace every row by ``rows`` (the same examples encoded by another encoder; ``rows.manifest``: the
        manifest's entries that change with it) and the encoder by a copy of the folder ``encoder``, as a new
        generation that every process serving the bundle loads at its next request (inside :meth:`locked`, after a
        :meth:`pull`); the new manifest (:mod:`cea.bundle.renewal`)."""

    def close(self) -> None:
        """Let go of files and connections (every change is already durable)."""

    # --- texts kept beside the examples (where a service asks for it, shared by its replicas): the piles of PILES ---
    @abc.abstractmethod
    def keep(self, items: list[dict], limit: int, pile: str = "unknowns") -> None:
        """Keep ``items`` in ``pile`` and drop all but its latest ``limit`` (the folder store lets about twice as many
        build up between two trims). Unknowns: ``{"text", "closest", "evidence"}``; traffic: ``{"text",
        "prediction", "embedding"}``."""

    @abc.abstractmethod
    def kept(self, pile: str = "unknowns") -> list[dict]:
        """The texts kept in ``pile``, oldest first, each with its ``id`` (a string) and ``at`` (ISO time)."""

    @abc.abstractmethod
    def forget(self, ids: list[str], pile: str = "unknowns") -> None:
        """Drop the kept texts of ``ids`` from ``pile`` (accepted as a class, labelled)."""


STORES: dict[str, type[Store]] = {}  # kind -> class; cea.bundle imports every store module, so all are here


def register_store(cls: type[Store]) -> type[Store]:
    """Class decorator: ``cls`` opens the bundles whose manifest names its ``kind``."""
    STORES[cls.kind] = cls
    return cls


@register_store
class FolderStore(Store):
    """Generation ``gen-N`` (embeddings, ids, labels, texts, index, head) plus ``wal.jsonl``, the changes since.

    Processes share the folder: a writer holds ``flock`` on ``BUNDLE/lock``; a reader follows the log from the byte
    it read last (whole lines only), and loads afresh when ``manifest.json`` was replaced (another process
    compacted). Appends cost in proportion to the change."""

    kind = "folder"

    def __init__(self, root: Path):
        self.root = root
        self._lock, self._depth = open(root / LOCK, "a+b"), 0  # noqa: SIM115 (held for the store's life)
        self._log, self._offset = None, 0  # the log being read, and where reading stopped
        self._stamp, self._writer = None, None  # manifest.json's identity when loaded; the log being appended to

    @classmethod
    def attach(cls, root: Path, manifest: dict) -> FolderStore:
        return cls(root)

    def _identity(self) -> tuple:
        st = os.stat(self.root / "manifest.json")
        return st.st_ino, st.st_mtime_ns, st.st_size

    def load(self, verify: bool = False) -> Loaded:
        with self.locked():  # a torn last line is cut off under the lock: no writer is mid-line
            manifest = read_manifest(self.root)
            generation = self.root / f"gen-{manifest['generation']}"
            if verify:
                for name, digest in manifest["files"].items():
                    file = self.root / name
                    if not file.exists():
                        raise CeaError(f"bundle file {name} is missing; the bundle is damaged, rebuild or restore it")
                    if sha256(file) != digest:
                        raise CeaError(
                            f"bundle file {name} does not match its checksum; the bundle is damaged, "
                            "rebuild or restore it"
                        )
            embeddings = np.load(generation / "embeddings.npy", allow_pickle=False)
            examples = json.loads((generation / "examples.json").read_text())
            loaded = Loaded(
                manifest,
                embeddings,
                np.load(generation / "ids.npy", allow_pickle=False),
                examples["labels"],
                examples["texts"],
                load_index(generation, manifest.get("index", {}), embeddings),
                LinearHead.load(generation) if (generation / HEAD_FILE).exists() else None,
                sources=examples.get("sources"),
            )
            cut_torn_line(self.root / WAL)
            self._open(manifest)
            loaded.records = self.pull() or []
        return loaded

    def _open(self, manifest: dict) -> None:
        self.close_log()
        self._generation, self._stamp = manifest["generation"], self._identity()
        (self.root / WAL).touch()  # a log deleted by hand holds no changes
        self._log, self._offset = open(self.root / WAL, "rb"), 0  # noqa: SIM115

    def pull(self) -> list[dict] | None:
        if self._identity() != self._stamp:
            return None
        self._log.seek(self._offset)
        data = self._log.read()
        end = data.rfind(b"\n") + 1  # a line still being written is left for the next pull
        self._offset += end
        records = [decode_line(line) for line in data[:end].splitlines()]
        return [unpack(r) for r in records if r is not None and r.get("gen") == self._generation]

    @contextlib.contextmanager
    def locked(self):
        """Re-entrant: a load inside a change keeps the lock until the change ends."""
        if self._depth == 0:
            fcntl.flock(self._lock, fcntl.LOCK_EX)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                fcntl.flock(self._lock, fcntl.LOCK_UN)

    def append(self, record: dict) -> None:
        if self._writer is None:
            self._writer = open(self.root / WAL, "ab")  # noqa: SIM115
        append_record(self._writer, {**pack(record), "gen": self._generation})
        self._offset = self._writer.tell()  # read up to here before (caught up under the lock), and this line

    def compact(self, bundle, index) -> dict:
        """Write generation N+1 from ``bundle``'s live rows beside N, fsync it, replace ``manifest.json`` in one
        rename, start an empty log and delete N: a crash at any point leaves the old or the new state."""
        return self._next_generation(
            Loaded(
                {"next_id": bundle.next_id},
                bundle.embeddings,
                bundle.ids,
                bundle.stored_labels(),
                bundle.texts,
                index,
                bundle.head(),
                sources=bundle.sources,
            )
        )

    def renew(self, rows: Loaded, encoder: Path) -> dict:
        """As :meth:`compact`, with the encoder copied to ``encoder-N+1`` beside the old one (deleted with
        generation N, unless it is the bundle's first: :func:`~cea.bundle.layout.retired_encoder`)."""
        return self._next_generation(rows, encoder)

    def _next_generation(self, rows: Loaded, encoder: Path | None = None) -> dict:
        """Generation N+1 of ``rows`` (and of a copy of ``encoder``, where given) written and made the bundle's."""
        old, new = self._generation, self._generation + 1
        manifest = read_manifest(self.root)
        folders = [f"gen-{new}"]
        write_generation(
            self.root / folders[0],
            rows.embeddings,
            rows.ids,
            rows.labels,
            rows.texts,
            rows.index,
            rows.head,
            rows.sources,
        )
        retired = retired_encoder(manifest) if encoder is not None else None
        if encoder is not None:
            folders.append(f"encoder-{new}")
            shutil.rmtree(self.root / folders[1], ignore_errors=True)  # one a crash left half-copied
            shutil.copytree(encoder, self.root / folders[1])
        files = {
            k: v
            for k, v in manifest["files"].items()
            if not k.startswith("gen-") and (retired is None or not k.startswith(retired + "/"))
        }
        manifest = {
            **manifest,
            **rows.manifest,
            "generation": new,
            "files": {**files, **checksums(self.root, folders)},
            "index": {**manifest.get("index", {}), **rows.manifest.get("index", {}), "n": len(rows.index)},
            **({"encoder": folders[1]} if encoder is not None else {}),
        }
        write_json(self.root / "manifest.json", manifest)
        fsync_dir(self.root)
        with atomic_path(self.root / WAL) as tmp:  # lines of generation N left in the log would be skipped anyway
            Path(tmp).touch()
        shutil.rmtree(self.root / f"gen-{old}", ignore_errors=True)
        if retired is not None:  # processes that still encode with it hold it in memory
            shutil.rmtree(self.root / retired, ignore_errors=True)
        self._open(manifest)
        return manifest

    @contextlib.contextmanager
    def _pile_locked(self, pile: str):
        """``pile``'s own lock (flock on ``PILE.lock``): never held with the changes' lock."""
        if pile not in PILES:
            raise CeaError(f"no kept pile {pile!r}; one of {', '.join(PILES)}")
        with open(self.root / f"{pile}.lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield self.root / f"{pile}.jsonl"
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def keep(self, items: list[dict], limit: int, pile: str = "unknowns") -> None:
        at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        lines = [
            json.dumps(
                {
                    "id": uuid.uuid4().hex[:16],
                    "at": at,
                    **item,
                    **(
                        {
                            "embedding": base64.b64encode(
                                np.asarray(item["embedding"], dtype=np.float32).tobytes()
                            ).decode()
                        }
                        if "embedding" in item
                        else {}
                    ),
                }
            )
            + "\n"
            for item in items
        ]
        data = "".join(lines).encode("utf-8")
        with self._pile_locked(pile) as path:
            with open(path, "a+b") as fh:  # appends wherever it seeks
                end = fh.seek(0, os.SEEK_END)
                if end:
                    fh.seek(end - 1)
                    if fh.read(1) != b"\n":  # a line torn by a crash: ended first, so that it spoils only itself
                        fh.write(b"\n")
                fh.write(data)
                size = fh.tell()
            if size > 2 * limit * len(data) / len(lines):  # about twice the limit in lines of this size: counted,
                kept = self._kept(path)  # and cut back to the latest limit once past twice it (read only then)
                if len(kept) > 2 * limit:
                    self._rewrite(path, kept[-limit:])

    def kept(self, pile: str = "unknowns") -> list[dict]:
        with self._pile_locked(pile) as path:
            return [item for item in map(_kept_item, self._kept(path)) if item is not None]

    def forget(self, ids: list[str], pile: str = "unknowns") -> None:
        gone = set(map(str, ids))
        with self._pile_locked(pile) as path:
            self._rewrite(
                path,
                [
                    line
                    for line in self._kept(path)
                    if (item := _kept_item(line)) is not None and item["id"] not in gone
                ],
            )

    @staticmethod
    def _kept(path: Path) -> list[str]:
        return path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True) if path.exists() else []

    @staticmethod
    def _rewrite(path: Path, lines: list[str]) -> None:
        with atomic_path(path) as tmp:
            tmp.write_text("".join(lines), encoding="utf-8")

    def close_log(self) -> None:
        for handle in (self._log, self._writer):
            if handle is not None:
                handle.close()
        self._log = self._writer = None

    def close(self) -> None:
        self.close_log()
        self._lock.close()

    def __del__(self) -> None:  # a bundle dropped without close(): its files closed quietly
        if hasattr(self, "_lock"):
            self.close()


def pack(record: dict) -> dict:
    """A record as a log line holds it: embeddings as base64 float32."""
    if "embeddings" not in record:
        return record
    vectors = np.ascontiguousarray(record["embeddings"], dtype=np.float32)
    return {**record, "embeddings": base64.b64encode(vectors.tobytes()).decode()}


def unpack(record: dict) -> dict:
    if "embeddings" not in record:
        return record
    vectors = np.frombuffer(base64.b64decode(record["embeddings"]), dtype=np.float32)
    return {**record, "embeddings": vectors.reshape(len(record["ids"]), -1)}


def open_store(root: Path, manifest: dict) -> Store:
    """The store ``manifest`` names (``"store": {"kind": ...}``; bundles without one keep their folder)."""
    kind = manifest.get("store", {"kind": "folder"})["kind"]
    if kind not in STORES:
        raise CeaError(f"{root} keeps its examples in a {kind!r} store, unknown to this cea; upgrade cea")
    return STORES[kind].attach(root, manifest)
