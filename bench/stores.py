"""benchd's vector kinds against the same store driven directly by its client library.

For each kind (pgvector, chroma, milvus; qdrant in qdrant-client's local mode, no
server) this starts the real server on
loopback (as tests/stores does: the stores' own virtualenv, .venv-stores),
then in the same run (each side filtered to one namespace, asking k+1 = 11 as benchd
does, so the store does the same work):

- **benchd**: ``benchd once`` on a synthetic corpus (``benchd synth``) with a
  closed-loop load pass at c=8: seed records/s, serial p50/p99, load req/s;
- **direct**: the same vectors (benchd's hashing embedder, so no model time on
  either side) written, searched serially and at c=8 through the store's own
  client (psycopg, httpx, pymilvus), with no benchd in between.

It prints one row per kind and pass and benchd's overhead as a ratio
(direct / benchd for rates, benchd / direct for latencies). Usage::

    .venv/bin/python bench/stores.py [--records 2000] [--queries 50] [--seconds 5]
        [--kinds pgvector,chroma,milvus,qdrant]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "stores"))

from store_servers import run_chroma, run_milvus, run_postgres  # noqa: E402

from benchd.embed.models import HashEmbedder  # noqa: E402
from benchd.fixtures.model import load_fixture  # noqa: E402

DIMS = 256
C = 8


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def benchd_once(kind: str, target: str, fixture: Path, seconds: float, env: dict[str, str],
                work: Path) -> dict[str, float]:  # fmt: skip
    config = work / f"{kind}.toml"
    config.write_text(f"""
[[probe]]
name = "{kind}"
fixture = "{fixture}"
k = [10]
timeout_s = 900
[probe.target]
{target}
[probe.target.embed]
model = "hash:{DIMS}"
cache_dir = "{work / 'cache'}"
[probe.load]
mode = "closed"
concurrency = {C}
duration_s = {seconds}
""")
    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "once", "-c", str(config), "--format", "json"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    probe = json.loads(proc.stdout)["probes"][0]
    seed, serial = probe["seed"], probe["latency"]["serial"]
    return {  # the seed phase: listing, sentinel, writes, verify and time-to-searchable
        "seed_rps": seed["requested"] / probe["phases"]["seed"],
        "p50_ms": serial["p50"] * 1000,
        "p99_ms": (serial["p99"] or serial["max"]) * 1000,
        "load_rps": probe["load"]["achieved_rate"],
    }


async def closed_loop(search: Callable[[int], Awaitable[None]], seconds: float) -> float:
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(w: int) -> None:
        nonlocal done
        i = w
        while time.perf_counter() < deadline:
            await search(i)
            done += 1
            i += C

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for w in range(C):
            tg.start_soon(worker, w)
    return done / (time.perf_counter() - started)


async def measure(write: Callable[[list[int]], Awaitable[None]],
                  search: Callable[[int], Awaitable[None]], n: int, queries: int,
                  seconds: float) -> dict[str, float]:  # fmt: skip
    started = time.perf_counter()
    for start in range(0, n, 500):
        await write(list(range(start, min(n, start + 500))))
    seed_rps = n / (time.perf_counter() - started)
    lat: list[float] = []
    for i in range(queries):
        t = time.perf_counter()
        await search(i)
        lat.append(time.perf_counter() - t)
    rps = await closed_loop(search, seconds)
    return {"seed_rps": seed_rps, "p50_ms": statistics.median(lat) * 1000,
            "p99_ms": percentile(lat, 0.99) * 1000, "load_rps": rps}  # fmt: skip


def vectors(texts: list[str]) -> list[list[float]]:
    return [[float(x) for x in row] for row in HashEmbedder(DIMS).embed_sync(texts)]


async def direct_pg(dsn: str, texts: list[str], qv: list[list[float]], seconds: float) -> Any:
    import psycopg

    dv = vectors(texts)
    conns = [await psycopg.AsyncConnection.connect(dsn, autocommit=True) for _ in range(C)]
    await conns[0].execute("DROP TABLE IF EXISTS direct")
    await conns[0].execute(
        f"CREATE TABLE direct (id text PRIMARY KEY, namespace text, content text, "
        f"embedding vector({DIMS}))"
    )
    await conns[0].execute("CREATE INDEX ON direct USING hnsw (embedding vector_cosine_ops)")

    async def write(rows: list[int]) -> None:
        async with conns[0].cursor() as cur:
            await cur.executemany(
                "INSERT INTO direct VALUES (%s, 'bench', %s, %s::vector)",
                [(f"d{i}", texts[i], str(dv[i])) for i in rows],
            )

    async def search(i: int) -> None:
        conn = conns[i % C]
        v = str(qv[i % len(qv)])
        cur = await conn.execute(
            "SELECT id FROM direct WHERE namespace = 'bench' "
            "ORDER BY embedding <=> %s::vector LIMIT 11",
            (v,),
        )
        await cur.fetchall()

    try:
        return await measure(write, search, len(texts), len(qv), seconds)
    finally:
        for conn in conns:
            await conn.close()


async def direct_chroma(url: str, texts: list[str], qv: list[list[float]], seconds: float) -> Any:
    base = f"{url}/api/v2/tenants/default_tenant/databases/default_database/collections"
    dv = vectors(texts)
    async with httpx.AsyncClient(timeout=60) as client:
        made = await client.post(base, json={"name": "direct", "get_or_create": True,
                                             "metadata": {"hnsw:space": "cosine"}})  # fmt: skip
        cid = made.json()["id"]

        async def write(rows: list[int]) -> None:
            body = {"ids": [f"d{i}" for i in rows], "documents": [texts[i] for i in rows],
                    "embeddings": [dv[i] for i in rows],
                    "metadatas": [{"ns": "bench"} for _ in rows]}  # fmt: skip
            (await client.post(f"{base}/{cid}/add", json=body)).raise_for_status()

        async def search(i: int) -> None:
            body = {"query_embeddings": [qv[i % len(qv)]], "n_results": 11,
                    "where": {"ns": "bench"}, "include": ["distances"]}  # fmt: skip
            (await client.post(f"{base}/{cid}/query", json=body)).raise_for_status()

        return await measure(write, search, len(texts), len(qv), seconds)


async def direct_qdrant(path: str, texts: list[str], qv: list[list[float]], seconds: float) -> Any:
    """qdrant-client's local mode (experimental kind): in-process, exact, on this event loop."""
    from qdrant_client import AsyncQdrantClient, models

    client = AsyncQdrantClient(path=path)
    await client.create_collection(
        "direct", vectors_config=models.VectorParams(size=DIMS, distance=models.Distance.COSINE)
    )
    dv = vectors(texts)
    bench = models.FieldCondition(key="ns", match=models.MatchValue(value="bench"))
    only = models.Filter(must=[bench])

    async def write(rows: list[int]) -> None:
        await client.upsert("direct", points=[
            models.PointStruct(id=i, vector=dv[i], payload={"ns": "bench", "content": texts[i]})
            for i in rows
        ])  # fmt: skip

    async def search(i: int) -> None:
        await client.query_points("direct", query=qv[i % len(qv)], query_filter=only, limit=11)

    try:
        return await measure(write, search, len(texts), len(qv), seconds)
    finally:
        await client.close()


async def direct_milvus(uri: str, texts: list[str], qv: list[list[float]], seconds: float) -> Any:
    from pymilvus import AsyncMilvusClient, DataType, MilvusClient

    sync = MilvusClient(uri=uri)
    schema = sync.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field("namespace", DataType.VARCHAR, max_length=64, is_partition_key=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIMS)
    index = sync.prepare_index_params()
    index.add_index("vector", index_type="AUTOINDEX", metric_type="COSINE")
    sync.create_collection("direct", schema=schema, index_params=index)
    sync.close()
    client = AsyncMilvusClient(uri=uri)
    dv = vectors(texts)

    async def write(rows: list[int]) -> None:
        await client.insert(
            "direct", [{"id": f"d{i}", "namespace": "bench", "vector": dv[i]} for i in rows]
        )

    async def search(i: int) -> None:
        await client.search(
            "direct", data=[qv[i % len(qv)]], limit=11, filter='namespace == "bench"',
            output_fields=["id"],
        )  # fmt: skip

    try:
        return await measure(write, search, len(texts), len(qv), seconds)
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--kinds", default="pgvector,chroma,milvus,qdrant",
                        help="comma-separated: which kinds to run")  # fmt: skip
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    work = Path(tempfile.mkdtemp(prefix="benchd-stores-bench-"))
    fixture = work / "synth.json"
    subprocess.run(
        [sys.executable, "-m", "benchd", "synth", "--memories", str(args.records),
         "--queries", str(args.queries), "--out", str(fixture)],
        check=True, capture_output=True,
    )  # fmt: skip
    loaded = load_fixture(fixture)
    texts = [str(m.get("content") or m.get("text")) for m in loaded.memories]
    qv = [[float(x) for x in row] for row in HashEmbedder(DIMS).embed_sync(
        [q.q for q in loaded.queries])]  # fmt: skip
    rows: list[tuple[str, str, dict[str, float]]] = []
    if "pgvector" in kinds:
        run_pgvector(rows, fixture, texts, qv, args.seconds, work)
    if "chroma" in kinds:
        run_chroma_kind(rows, fixture, texts, qv, args.seconds, work)
    if "milvus" in kinds:
        run_milvus_kind(rows, fixture, texts, qv, args.seconds, work)
    if "qdrant" in kinds:  # local mode: benchd once, then the client, on separate directories
        target = f'kind = "qdrant"\npath = "{work / "qdrant-benchd"}"\nnamespace = "bench"'
        rows.append(("qdrant", "benchd", benchd_once("qdrant", target, fixture, args.seconds,
                                                     dict(os.environ), work)))  # fmt: skip
        rows.append(("qdrant", "direct", anyio.run(
            direct_qdrant, str(work / "qdrant-direct"), texts, qv, args.seconds)))  # fmt: skip
    report(rows, args)


def run_pgvector(rows: list[Any], fixture: Path, texts: list[str], qv: list[list[float]],
                 seconds: float, work: Path) -> None:  # fmt: skip
    with run_postgres() as pg:
        target = 'kind = "pgvector"\ndsn_env = "PG_DSN"\nnamespace = "bench"\ntable = "bench"'
        env = {**os.environ, "PG_DSN": pg.dsn}
        rows.append(("pgvector", "benchd", benchd_once("pgvector", target, fixture,
                                                       seconds, env, work)))  # fmt: skip
        rows.append(("pgvector", "direct", anyio.run(direct_pg, pg.dsn, texts, qv, seconds)))


def run_chroma_kind(rows: list[Any], fixture: Path, texts: list[str], qv: list[list[float]],
                    seconds: float, work: Path) -> None:  # fmt: skip
    with run_chroma() as chroma:
        target = f'kind = "chroma"\nurl = "{chroma.url}"\nnamespace = "bench"'
        rows.append(("chroma", "benchd", benchd_once("chroma", target, fixture, seconds,
                                                     dict(os.environ), work)))  # fmt: skip
        rows.append(("chroma", "direct",
                     anyio.run(direct_chroma, chroma.url, texts, qv, seconds)))  # fmt: skip


def run_milvus_kind(rows: list[Any], fixture: Path, texts: list[str], qv: list[list[float]],
                    seconds: float, work: Path) -> None:  # fmt: skip
    with run_milvus() as milvus:
        target = f'kind = "milvus"\nuri = "{milvus.uri}"\nnamespace = "bench"'
        rows.append(("milvus", "benchd", benchd_once("milvus", target, fixture, seconds,
                                                     dict(os.environ), work)))  # fmt: skip
        rows.append(("milvus", "direct",
                     anyio.run(direct_milvus, milvus.uri, texts, qv, seconds)))  # fmt: skip


def report(rows: list[Any], args: argparse.Namespace) -> None:
    print(f"{args.records} records, {args.queries} queries, c={C} for {args.seconds:g} s, "
          f"hash:{DIMS} vectors")  # fmt: skip
    print(f"{'kind':9} {'via':7} {'seed rec/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'c=8 req/s':>10}")
    by = {(k, v): m for k, v, m in rows}
    for kind in [k for k in ("pgvector", "chroma", "milvus", "qdrant") if (k, "benchd") in by]:
        for via in ("benchd", "direct"):
            m = by[(kind, via)]
            print(f"{kind:9} {via:7} {m['seed_rps']:10.0f} {m['p50_ms']:8.2f} {m['p99_ms']:8.2f} "
                  f"{m['load_rps']:10.0f}")  # fmt: skip
        b, d = by[(kind, "benchd")], by[(kind, "direct")]
        print(f"{kind:9} {'ratio':7} {d['seed_rps'] / b['seed_rps']:10.2f} "
              f"{b['p50_ms'] / d['p50_ms']:8.2f} {b['p99_ms'] / d['p99_ms']:8.2f} "
              f"{d['load_rps'] / b['load_rps']:10.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
