"""Hostile answers from the vector stores' real servers, through benchd's client code (#23 item 7).

Another tenant (or a broken writer) puts rows *into benchd's namespace* of a shared
table/collection that no benchd would write: multi-megabyte texts and metadata, ids far
longer than any benchd id or not strings at all, vectors whose distance is NaN or NULL.
Every listing and search must then either come back cut to benchd's bounds (ids of at
most 2 x MAX_ID_CHARS, mark values of at most 4 KiB, finite scores or none, at most the
asked number of hits) or end as a :class:`~benchd.errors.TargetError` of a bounded kind:
never another exception, never an answer read whole beyond the declared bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from store_servers import missing
from tenants import TENANT, vectors
from test_vector_stores import DIMS, corpus, make_store, records, servers  # noqa: F401

from benchd.errors import TargetError
from benchd.kinds.vectors import VectorStore
from benchd.store.owned import MAX_ID_CHARS
from benchd.store.target import SearchQuery

pytestmark = pytest.mark.anyio
MB = 1 << 20
KINDS_OF_ERROR = {"decode", "ownership", "connect", "timeout", "auth", "http"}


def _need(module: str) -> None:
    try:
        __import__(module)
    except ImportError:
        missing(f"{module} is not installed")


def assert_bounded_listing(page: Any) -> None:
    for listed in page.records:
        assert len(listed.id) <= 2 * MAX_ID_CHARS
        assert listed.kept is None or len(listed.kept) <= 64  # a fingerprint, never the mark
        assert listed.lease is None or len(listed.lease.instance) <= 4096
        assert listed.digest is None or len(listed.digest) == 64


def assert_bounded_hits(hits: Any, limit: int) -> None:
    assert len(hits.ids) <= limit
    assert all(isinstance(i, str) and len(i) <= 2 * MAX_ID_CHARS for i in hits.ids)
    assert all(s is None or math.isfinite(s) for s in hits.scores)


async def listing_and_search(store: VectorStore, q: str, limit: int) -> list[str]:
    """List and search; what ended as a TargetError (by kind), asserting the bounds on the rest."""
    ended: list[str] = []
    try:
        assert_bounded_listing(await store.list_page(None))
    except TargetError as exc:
        assert exc.kind in KINDS_OF_ERROR, exc
        assert len(str(exc)) < 2000
        ended.append(f"list:{exc.kind}")
    try:
        assert_bounded_hits(await store.search(SearchQuery(q=q, limit=limit)), limit + 1)
    except TargetError as exc:
        assert exc.kind in KINDS_OF_ERROR, exc
        assert len(str(exc)) < 2000
        ended.append(f"search:{exc.kind}")
    return ended


# -- pgvector: a shared table with nullable vectors and no limit on ids -------------------


class HostileTable:
    """``hostile_docs``: benchd's default columns, a nullable vector, ids without a key."""

    table = "hostile_docs"

    def __init__(self, admin_dsn: str) -> None:
        self.admin_dsn = admin_dsn

    def run(self, sql: str, params: Any = ()) -> None:
        import psycopg

        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(sql, params)

    def create(self) -> None:
        self.run(f"DROP TABLE IF EXISTS {self.table}")
        self.run(
            f"CREATE TABLE {self.table} (id text NOT NULL, namespace text NOT NULL, "
            f"content text NOT NULL, metadata jsonb NOT NULL DEFAULT '{{}}', "
            f"embedding vector({DIMS}))"
        )
        self.run(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {self.table} TO benchd")

    def add(self, sid: str, ns: str, text: str, meta: str, vector: str | None) -> None:
        self.run(
            f"INSERT INTO {self.table} VALUES (%s, %s, %s, %s::jsonb, %s::vector)",
            (sid, ns, text, meta, vector),
        )


async def test_pgvector_hostile_rows_in_benchds_namespace_end_bounded(
    servers: Callable[[str], Any], tmp_path: Path  # noqa: F811
) -> None:
    _need("psycopg")
    server = servers("pgvector")
    memories, _ = corpus()
    ns = "benchd-hostile"
    table = HostileTable(server.admin_dsn)
    table.create()
    store = make_store("pgvector", server, ns, tmp_path, shared=True, table=table.table)
    try:
        await store.write(records(ns, memories[:5]))
        text = str(memories[0]["content"])
        (near,) = vectors([text], DIMS)
        big = "x" * (5 * MB)
        zero = "[" + ",".join(["0"] * DIMS) + "]"
        table.add("foreign-big", ns, big, '{"benchd_lease": "' + big + '"}', str(near))
        table.add("foreign-null", ns, "no vector", "{}", None)
        table.add("foreign-zero", ns, "zero vector: cosine distance NaN", "{}", zero)
        ended = await listing_and_search(store, text, 10)
        assert ended == []  # cut to the bounds, nothing refused
        hits = await store.search(SearchQuery(q=text, limit=10))
        assert "foreign-big" in hits.ids
        scores = dict(zip(hits.ids, hits.scores, strict=True))
        assert scores.get("foreign-null") is None and scores.get("foreign-zero") is None
        table.add("y" * (3 * MB), ns, "an id of 3 MB", "{}", str(near))
        ended = await listing_and_search(store, text, 10)
        assert ended == ["list:decode", "search:decode"]
    finally:
        await store.aclose()


# -- chroma: a shared collection over the v2 HTTP API --------------------------------------


async def test_chroma_hostile_records_in_benchds_namespace_end_bounded(
    servers: Callable[[str], Any], tmp_path: Path  # noqa: F811
) -> None:
    import httpx

    server = servers("chroma")
    memories, _ = corpus()
    ns = "benchd-hostile"
    base = f"{server.url}/api/v2/tenants/default_tenant/databases/default_database/collections"
    httpx.delete(f"{base}/hostile-docs", timeout=30)
    made = httpx.post(base, json={"name": "hostile-docs"}, timeout=30)
    made.raise_for_status()
    cid = made.json()["id"]
    store = make_store(
        "chroma", server, ns, tmp_path, shared=True, collection="hostile-docs",
        max_response_bytes=8 * MB,
    )  # fmt: skip
    try:
        await store.write(records(ns, memories[:5]))
        text = str(memories[0]["content"])
        (near,) = vectors([text], DIMS)
        big = "x" * (3 * MB)
        body = {
            "ids": ["foreign-big", "foreign-zero"],
            "documents": [big, "zero"],
            "metadatas": [{"benchd_namespace": ns, "benchd_lease": big},
                          {"benchd_namespace": ns, "tenant": TENANT}],
            "embeddings": [near, [0.0] * DIMS],
        }  # fmt: skip
        httpx.post(f"{base}/{cid}/add", json=body, timeout=60).raise_for_status()
        assert await listing_and_search(store, text, 10) == []  # 3 MB: read, then cut
        more = {
            "ids": ["foreign-big-2", "foreign-big-3"],
            "documents": ["a", "b"],
            "metadatas": [{"benchd_namespace": ns, "benchd_lease": big}] * 2,
            "embeddings": [near, near],
        }
        httpx.post(f"{base}/{cid}/add", json=more, timeout=60).raise_for_status()
        # 9 MB of metadata in one listing page, past max_response_bytes (8 MiB)
        assert await listing_and_search(store, text, 10) == ["list:decode"]
    finally:
        await store.aclose()


# -- milvus: a shared collection; gRPC's max_receive_message_length ----------------------


async def test_milvus_answers_past_max_response_bytes_end_bounded(
    servers: Callable[[str], Any], tmp_path: Path  # noqa: F811
) -> None:
    _need("pymilvus")
    from tenants import MilvusTenant

    server = servers("milvus")
    memories, _ = corpus()
    tenant = MilvusTenant(server.uri, DIMS)
    tenant.name = "hostile_docs"  # type: ignore[misc]
    tenant.create(memories[:3])
    ns = "benchd-hostile"
    store = make_store(
        "milvus", server, ns, tmp_path, shared=True, collection=tenant.name,
        max_response_bytes=1 * MB,
    )  # fmt: skip
    try:
        await store.write(records(ns, memories[:5]))
        text = str(memories[0]["content"])
        (near,) = vectors([text], DIMS)
        from pymilvus import MilvusClient

        client = MilvusClient(uri=server.uri, dedicated=True)
        try:
            fat = {"benchd_lease": "x" * 60_000}
            rows = [
                {"id": f"foreign-{i}", "namespace": ns, "content": "c", "benchd": fat,
                 "vector": near}
                for i in range(30)
            ]  # fmt: skip
            rows.append({"id": "foreign-zero", "namespace": ns, "content": "zero",
                         "benchd": {}, "vector": [0.0] * DIMS})  # fmt: skip
            client.insert(tenant.name, rows)
        finally:
            client.close()
        # 30 x 60 kB of JSON marks in one query answer: past the 1 MiB gRPC bound
        ended = await listing_and_search(store, text, 10)
        assert ended == ["list:decode"], ended
        hits = await store.search(SearchQuery(q=text, limit=40))
        assert "foreign-zero" in hits.ids
        assert all(s is None or math.isfinite(s) for s in hits.scores)
    finally:
        await store.aclose()


# -- qdrant (local mode): integer point ids, huge payloads, a zero vector -----------------


async def test_qdrant_hostile_points_in_benchds_namespace_end_bounded(
    servers: Callable[[str], Any], tmp_path: Path  # noqa: F811
) -> None:
    _need("qdrant_client")
    from qdrant_client import QdrantClient, models

    server = servers("qdrant")
    memories, _ = corpus()
    ns = "benchd-hostile"
    client = QdrantClient(path=server.path)
    try:
        if client.collection_exists("hostile_docs"):
            client.delete_collection("hostile_docs")
        client.create_collection(
            "hostile_docs",
            vectors_config=models.VectorParams(size=DIMS, distance=models.Distance.COSINE),
        )
    finally:
        client.close()
    store = make_store("qdrant", server, ns, tmp_path, shared=True, collection="hostile_docs")
    try:
        await store.write(records(ns, memories[:5]))
    finally:
        await store.aclose()
    text = str(memories[0]["content"])
    (near,) = vectors([text], DIMS)
    big = "x" * (5 * MB)
    client = QdrantClient(path=server.path)
    try:
        client.upsert("hostile_docs", points=[
            models.PointStruct(id=7, vector=near, payload={
                "benchd_namespace": ns, "benchd_id": big, "benchd_lease": big, "content": big}),
            models.PointStruct(id=8, vector=[0.0] * DIMS, payload={"benchd_namespace": ns}),
            models.PointStruct(id=9, vector=near, payload={
                "benchd_namespace": ns, "benchd_id": 12345, "benchd_digest": ["not", "a", "str"]}),
        ])  # fmt: skip
    finally:
        client.close()
    store = make_store("qdrant", server, ns, tmp_path, shared=True, collection="hostile_docs")
    try:
        assert await listing_and_search(store, text, 10) == []
        hits = await store.search(SearchQuery(q=text, limit=10))
        assert {"7", "8", "9"} <= set(hits.ids)  # listed as the foreign points they are
        assert all(s is None or math.isfinite(s) for s in hits.scores)
        assert np.isfinite([s for s in hits.scores if s is not None]).all()
    finally:
        await store.aclose()


# -- answers no real server here gives: shaped with httpx.MockTransport (chroma) ------------


def _chroma_answering(query: dict[str, Any], tmp: Path) -> VectorStore:
    import json

    import httpx

    from benchd.embed.config import EmbedConfig
    from benchd.kinds.chroma import ChromaConfig, ChromaStore

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/query"):
            return httpx.Response(200, content=json.dumps(query).encode())
        return httpx.Response(200, json={"id": "c-1", "name": "benchd-x", "dimension": DIMS,
                                         "metadata": {"benchd_owner": "benchd-x"}})  # fmt: skip

    config = ChromaConfig(
        url="http://chroma.invalid:8000", namespace="benchd-x",
        embed=EmbedConfig(model=f"hash:{DIMS}", cache_dir=str(tmp)),
    )  # fmt: skip
    return ChromaStore(config, None, transport=httpx.MockTransport(answer))


@pytest.mark.parametrize(
    ("query", "outcome"),
    [
        ({"ids": [[f"id-{i}" for i in range(5000)]], "distances": [[0.1] * 5000]}, "cut"),
        ({"ids": [["a", "b", "c"]], "distances": [[float("nan"), float("inf"), 1e308]]}, "cut"),
        ({"ids": [["a", 7, "c"]], "distances": [[0.1, 0.2, 0.3]]}, "decode"),
        ({"ids": [["a", "z" * 100_000]], "distances": [[0.1, 0.2]]}, "decode"),
        ({"ids": [["a", "b"]], "distances": [["0.1", None]]}, "cut"),
        ({"ids": "not a list"}, "decode"),
    ],
    ids=["5000-hits", "nan-inf-huge", "int-id", "100k-id", "string-scores", "no-ids"],
)
async def test_chroma_shaped_hostile_query_answers_end_bounded(
    query: dict[str, Any], outcome: str, tmp_path: Path
) -> None:
    store = _chroma_answering(query, tmp_path)
    try:
        if outcome == "cut":
            assert_bounded_hits(await store.search(SearchQuery(q="x", limit=10)), 11)
        else:
            with pytest.raises(TargetError) as caught:
                await store.search(SearchQuery(q="x", limit=10))
            assert caught.value.kind == outcome
    finally:
        await store.aclose()
