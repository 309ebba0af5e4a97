"""A bundle's reference examples in PostgreSQL with pgvector: several service processes, on one machine or many,
share one store (``cea bundle ... --store postgresql://HOST/DB``).

Two tables per bundle, named after its folder: ``cea_NAME`` (the examples: id, label as JSON, text, embedding, and the
source: the key of the annotation an example was added for) and ``cea_NAME_changes`` (seq, op, ids, labels, at);
:data:`SQL` holds every statement on them. A change is one transaction holding a transaction-level advisory lock on the
table: rows inserted, deleted or relabelled, and one ``_changes`` row. Sequence numbers are therefore committed in
order, and a replica that has read up to ``seq`` misses nothing by asking for ``seq > s`` next
(:meth:`PostgresStore.pull`, before every request: one indexed query, empty when nothing changed). The connection string
never holds a password (it is written into the manifest): libpq reads ``PGPASSWORD`` or ``~/.pgpass``.

psycopg and the pgvector adapter talk to the database; what they lack is keeping an in-memory index in step
with a table, hence :class:`PostgresStore`.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path

import numpy as np

from ..errors import CeaError
from ..paths import write_json
from .layout import checksums, read_manifest, retired_encoder
from .references import Loaded, Store, register_store

INSTALL = "PostgreSQL stores need psycopg and pgvector: pip install 'cea[postgresql]'"
# the statements on one bundle's tables: {rows} its examples, {changes} the changes
SQL = {
    "create rows": "CREATE TABLE {rows} (id bigint PRIMARY KEY, label jsonb NOT NULL, text text NOT NULL, "
    "embedding vector({dim}) NOT NULL, source text)",
    "source column": "ALTER TABLE {rows} ADD COLUMN IF NOT EXISTS source text",  # tables made before it
    "create changes": "CREATE TABLE {changes} (seq bigserial PRIMARY KEY, op text NOT NULL, ids bigint[] NOT NULL, "
    "labels jsonb, at timestamptz NOT NULL DEFAULT now())",
    "copy rows": "COPY {rows} (id, label, text, embedding, source) FROM STDIN WITH (FORMAT BINARY)",
    "last change": "SELECT coalesce(max(seq), 0) FROM {changes}",
    "all rows": "SELECT id, label, text, embedding, source FROM {rows} ORDER BY id",
    "changes since": "SELECT seq, op, ids, labels FROM {changes} WHERE seq > %s ORDER BY seq",
    "rows of": "SELECT id, label, text, embedding, source FROM {rows} WHERE id = ANY(%s) ORDER BY id",
    "add": "INSERT INTO {rows} (id, label, text, embedding, source) VALUES (%s, %s, %s, %s, %s)",
    "remove": "DELETE FROM {rows} WHERE id = ANY(%s)",
    "remove all": "DELETE FROM {rows}",
    "relabel": "UPDATE {rows} SET label = %s WHERE id = %s",
    "log": "INSERT INTO {changes} (op, ids, labels) VALUES (%s, %s, %s) RETURNING seq",
}
# the kept piles (cea.bundle.references.PILES), a table each ({kept}: the bundle's table and _PILE), by their own
# columns
KEPT = {
    "create kept": "CREATE TABLE IF NOT EXISTS {kept} (id bigserial PRIMARY KEY, text text NOT NULL, {defs}, "
    "at timestamptz NOT NULL DEFAULT now())",
    "keep": "INSERT INTO {kept} (text, {columns}) VALUES (%s, {slots})",
    "trim kept": "DELETE FROM {kept} WHERE id <= (SELECT max(id) FROM {kept}) - %s",
    "kept": "SELECT id, text, {columns}, at FROM {kept} ORDER BY id",
    "forget": "DELETE FROM {kept} WHERE id = ANY(%s)",
}
RENEW = "renew"  # the change that replaced every row and the encoder (cea.bundle.renewal)
PILE_COLUMNS = {
    "unknowns": {"closest": "text", "evidence": "real"},
    "traffic": {"prediction": "text", "embedding": "vector({dim})"},
}


def _modules():
    """psycopg and pgvector's adapter (inside, as every psycopg import here: postgres is the optional extra
    cea[postgresql], and psycopg takes about 0.25 s to import, which every bundle opened would pay)."""
    try:
        import psycopg
        from pgvector.psycopg import register_vector
    except ImportError:
        raise CeaError(INSTALL) from None
    return psycopg, register_vector


def table_name(folder: str | Path) -> str:
    """``cea_`` and the bundle folder's name in lower-case letters, digits and underscores (at most 40)."""
    return "cea_" + (re.sub(r"[^a-z0-9_]+", "_", Path(folder).resolve().name.lower()).strip("_") or "bundle")[:40]


def connect(url: str):
    """A connection (autocommit; vectors as numpy arrays) or a one-line CeaError naming what failed."""
    psycopg, register_vector = _modules()
    from psycopg.conninfo import conninfo_to_dict  # inside: as _modules

    try:
        settings = conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise CeaError(
            f"--store {url!r} is not a PostgreSQL connection string ({exc}); pass postgresql://USER@HOST:PORT/DATABASE"
        ) from None
    if settings.get("password"):
        raise CeaError(
            "--store holds a password, which would be written into the bundle's manifest; "
            "pass it in PGPASSWORD or ~/.pgpass instead"
        )
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise CeaError(
            f"cannot connect to the PostgreSQL store {url}: {reason}; check --store and that the server is running"
        ) from None
    try:
        register_vector(conn)
    except psycopg.ProgrammingError:  # not created in this database yet: created here where the role may
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(conn)
        except psycopg.Error:
            conn.close()
            raise CeaError(
                f"the database at {url} has no pgvector extension and this role cannot create it; "
                "install pgvector and run CREATE EXTENSION vector there, or use another database"
            ) from None
    return conn


def _stack(vectors) -> np.ndarray:
    """pgvector's values (binary results: ``Vector`` objects) as one float32 matrix."""
    return np.stack([v.to_numpy() if hasattr(v, "to_numpy") else v for v in vectors]).astype(np.float32)


@register_store
class PostgresStore(Store):
    """The examples of one bundle in two tables (module docstring); ``dim``: the encoder's dimensions."""

    kind = "postgresql"

    def __init__(self, conn, url: str, table: str, dim: int):
        from psycopg import sql  # inside: as _modules

        self.conn, self.url, self.table, self.dim = conn, url, table, dim
        names = {"rows": sql.Identifier(table), "changes": sql.Identifier(table + "_changes"), "dim": sql.Literal(dim)}
        self.sql = {name: sql.SQL(text).format(**names) for name, text in SQL.items()}  # each statement, quoted
        self.kept_sql = {
            pile: {
                name: sql.SQL(text).format(
                    kept=sql.Identifier(f"{table}_{pile}"),
                    columns=sql.SQL(", ".join(columns)),
                    slots=sql.SQL(", ".join(["%s"] * len(columns))),
                    defs=sql.SQL(", ".join(f"{c} {t}" for c, t in columns.items())).format(dim=sql.Literal(dim)),
                )
                for name, text in KEPT.items()
            }
            for pile, columns in PILE_COLUMNS.items()
        }
        self.seq, self._kept_conn = 0, None

    @classmethod
    def open(cls, url: str, table: str, dim: int) -> PostgresStore:
        """The store a manifest names; its table must exist and hold vectors of ``dim`` dimensions."""
        conn = connect(url)
        found = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = to_regclass(%s) AND attname = 'embedding'",
            (table,),
        ).fetchone()
        if found is None:
            conn.close()
            raise CeaError(
                f"the PostgreSQL store {url} has no table {table}; the bundle was built against another "
                "database or the table was dropped: rebuild it with cea bundle --store"
            )
        stored = int(re.search(r"\d+", found[0]).group())
        if stored != dim:
            conn.close()
            raise CeaError(
                f"table {table} at {url} holds vectors of {stored} dimensions but the bundle's encoder "
                f"gives {dim}; rebuild the bundle with cea bundle --store"
            )
        store = cls(conn, url, table, dim)
        conn.execute(store.sql["source column"])
        return store

    @classmethod
    def attach(cls, root: Path, manifest: dict) -> PostgresStore:
        info = manifest["store"]
        store = cls.open(info["url"], info["table"], manifest["dim"])
        store.root = root  # the manifest lives in the bundle folder, not in the database: load() reads it there
        return store

    @classmethod
    def create(
        cls,
        url: str,
        table: str,
        embeddings: np.ndarray,
        ids,
        labels: list,
        texts: list[str],
        sources: list | None = None,
    ) -> None:
        """Make the two tables and copy the first examples in (``sources``: each one's, None: added as itself), in one
        transaction (refused if the table exists)."""
        from psycopg.types.json import Jsonb  # inside: as _modules

        conn = connect(url)
        store = cls(conn, url, table, int(embeddings.shape[1]))
        try:
            with conn.transaction():
                if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is not None:
                    raise CeaError(
                        f"the PostgreSQL store {url} already holds a table {table}; name the bundle "
                        f"folder differently or DROP TABLE {table}, {table}_changes"
                    )
                conn.execute(store.sql["create rows"])
                conn.execute(store.sql["create changes"])
                with conn.cursor().copy(store.sql["copy rows"]) as copy:
                    copy.set_types(["int8", "jsonb", "text", "vector", "text"])
                    for row in zip(
                        np.asarray(ids).tolist(),
                        labels,
                        texts,
                        embeddings.astype(np.float32),
                        sources or [None] * len(texts),
                    ):
                        copy.write_row((row[0], Jsonb(row[1]), row[2], row[3], row[4]))
        finally:
            conn.close()

    def load(self, verify: bool = False) -> Loaded:
        from psycopg.pq import TransactionStatus  # inside: as _modules

        outer = self.conn.info.transaction_status != TransactionStatus.IDLE  # inside locked(): no writer meanwhile
        with self.conn.transaction():  # one snapshot for the rows and the sequence they are current to
            if not outer:
                self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            self.seq = self.conn.execute(self.sql["last change"]).fetchone()[0]
            rows = self.conn.cursor(binary=True).execute(self.sql["all rows"]).fetchall()
        embeddings = _stack([r[3] for r in rows]) if rows else np.zeros((0, self.dim), np.float32)
        return Loaded(
            read_manifest(self.root),
            embeddings,
            np.array([r[0] for r in rows], dtype=np.int64),
            [r[1] for r in rows],
            [r[2] for r in rows],
            sources=[r[4] for r in rows],
        )

    def pull(self) -> list[dict] | None:
        records = []
        for seq, op, ids, labels in self.conn.execute(self.sql["changes since"], (self.seq,)).fetchall():
            if op == RENEW:  # every row and the encoder replaced: load afresh
                return None
            if op == "add":  # rows removed since are missing here: their remove record follows
                rows = self.conn.cursor(binary=True).execute(self.sql["rows of"], (ids,)).fetchall()
                if rows:
                    records.append(
                        {
                            "op": "add",
                            "ids": [r[0] for r in rows],
                            "labels": [r[1] for r in rows],
                            "texts": [r[2] for r in rows],
                            "embeddings": _stack([r[3] for r in rows]),
                            "sources": [r[4] for r in rows],
                        }
                    )
            else:
                records.append({"op": op, "ids": list(ids), **({"labels": labels} if op == "relabel" else {})})
            self.seq = seq
        return records

    @contextlib.contextmanager
    def locked(self):
        with self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.table,))
            yield

    def append(self, record: dict) -> None:
        from psycopg.types.json import Jsonb  # inside: as _modules

        op, ids = record["op"], [int(i) for i in record["ids"]]
        if record.get("replaces"):  # an annotation's earlier examples: removed in this transaction, logged first
            self.append({"op": "remove", "ids": record["replaces"]})
        if op == "add":
            sources = record.get("sources") or [None] * len(ids)
            with self.conn.cursor() as cur:
                cur.executemany(
                    self.sql["add"],
                    [
                        (i, Jsonb(label), text, vector, source)
                        for i, label, text, vector, source in zip(
                            ids, record["labels"], record["texts"], np.asarray(record["embeddings"]), sources
                        )
                    ],
                )
        elif op == "remove":
            self.conn.execute(self.sql["remove"], (ids,))
        elif op == "relabel":
            for i, label in zip(ids, record["labels"]):
                self.conn.execute(self.sql["relabel"], (Jsonb(label), i))
        self.seq = self.conn.execute(
            self.sql["log"], (op, ids, Jsonb(record["labels"]) if op == "relabel" else None)
        ).fetchone()[0]

    def renew(self, rows: Loaded, encoder: Path) -> dict:
        """Every row replaced in the change's transaction and a ``renew`` change logged (each replica loads afresh at
        its next request); the encoder copied to ``encoder-SEQ`` in the bundle folder, which the replicas on this
        machine share, and named in its manifest before the transaction commits; the one it replaces deleted, unless
        it is the bundle's first (:func:`~cea.bundle.layout.retired_encoder`)."""
        from psycopg.types.json import Jsonb  # inside: as _modules

        if rows.embeddings.shape[1] != self.dim:
            raise CeaError(
                f"the renewed encoder gives {rows.embeddings.shape[1]} dimensions where table {self.table} "
                f"holds {self.dim}; a PostgreSQL store keeps its dimensions"
            )
        self.conn.execute(self.sql["remove all"])
        with self.conn.cursor().copy(self.sql["copy rows"]) as copy:
            copy.set_types(["int8", "jsonb", "text", "vector", "text"])
            for row in zip(
                np.asarray(rows.ids).tolist(),
                rows.labels,
                rows.texts,
                rows.embeddings,
                rows.sources or [None] * len(rows.texts),
            ):
                copy.write_row((row[0], Jsonb(row[1]), row[2], row[3], row[4]))
        self.seq = self.conn.execute(self.sql["log"], (RENEW, [], None)).fetchone()[0]
        manifest = read_manifest(self.root)
        retired, folder = retired_encoder(manifest), f"encoder-{self.seq}"
        shutil.rmtree(self.root / folder, ignore_errors=True)
        shutil.copytree(encoder, self.root / folder)
        files = {k: v for k, v in manifest["files"].items() if retired is None or not k.startswith(retired + "/")}
        manifest = {
            **manifest,
            **rows.manifest,
            "encoder": folder,
            "generation": manifest["generation"] + 1,
            "files": {**files, **checksums(self.root, [folder])},
            "index": {**manifest.get("index", {}), **rows.manifest.get("index", {}), "n": len(rows.ids)},
        }
        write_json(self.root / "manifest.json", manifest)
        if retired is not None:
            shutil.rmtree(self.root / retired, ignore_errors=True)
        return manifest

    def _pile(self, pile: str) -> tuple:
        """The kept piles' own connection (a change's transaction on ``conn`` never holds them) and ``pile``'s
        statements, its table made on first use."""
        if pile not in self.kept_sql:
            raise CeaError(f"no kept pile {pile!r}; one of {', '.join(self.kept_sql)}")
        if self._kept_conn is None:
            self._kept_conn, self._made = connect(self.url), set()
        if pile not in self._made:
            self._kept_conn.execute(self.kept_sql[pile]["create kept"])
            self._made.add(pile)
        return self._kept_conn, self.kept_sql[pile]

    def keep(self, items: list[dict], limit: int, pile: str = "unknowns") -> None:
        conn, statements = self._pile(pile)
        with conn.transaction():
            with conn.cursor() as cur:
                cur.executemany(
                    statements["keep"], [(i["text"], *(i.get(c) for c in PILE_COLUMNS[pile])) for i in items]
                )
            conn.execute(statements["trim kept"], (limit,))

    def kept(self, pile: str = "unknowns") -> list[dict]:
        conn, statements = self._pile(pile)
        return [
            {
                "id": str(i),
                "text": text,
                **{c: _stack([v])[0] if c == "embedding" else v for c, v in zip(PILE_COLUMNS[pile], values)},
                "at": at.isoformat(timespec="seconds"),
            }
            for i, text, *values, at in conn.execute(statements["kept"])
        ]

    def forget(self, ids: list[str], pile: str = "unknowns") -> None:
        conn, statements = self._pile(pile)
        conn.execute(statements["forget"], ([int(i) for i in ids],))

    def close(self) -> None:
        if self._kept_conn is not None:
            self._kept_conn.close()
        self.conn.close()
