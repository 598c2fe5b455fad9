"""Another tenant in a shared table or collection, written and read with the store's own client.

Each helper builds the shared table/collection the way its owner would
(benchd never creates a shared one), fills it with the tenant's records —
the fixture's own ids and texts, which is what a store that was ever
evaluated holds — and takes a byte-level snapshot to compare after benchd
ran beside them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import numpy as np

from benchd.embed.models import HashEmbedder

__all__ = ["ChromaTenant", "MilvusTenant", "PostgresTenant", "QdrantTenant", "vectors"]

TENANT = "tenant-a"


def vectors(texts: Sequence[str], dims: int) -> list[list[float]]:
    """What the tenant's own (hashing) embedder gives, as plain floats."""
    matrix = HashEmbedder(dims).embed_sync(list(texts))
    return [[float(x) for x in row] for row in np.asarray(matrix)]


def _records(
    memories: Sequence[Mapping[str, Any]], ids: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    """(id, text) of each memory: the fixture's own id, or the one ``ids`` maps it to (the id
    benchd would write it under, for a tenant that got there first)."""
    named = ids or {}
    return [
        (named.get(str(m["id"]), str(m["id"])), str(m.get("content") or m.get("text")))
        for m in memories
    ]


class PostgresTenant:
    """A table ``shared_docs`` the superuser owns, granted to benchd, with the tenant's rows."""

    table = "shared_docs"

    def __init__(self, admin_dsn: str, dims: int) -> None:
        self.admin_dsn = admin_dsn
        self.dims = dims

    def _run(self, sql: str, params: Sequence[Any] = (), many: bool = False) -> list[Any]:
        import psycopg

        with psycopg.connect(self.admin_dsn, autocommit=True) as conn, conn.cursor() as cur:
            if many:
                cur.executemany(sql, params)
                return []
            cur.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def create(
        self, memories: Sequence[Mapping[str, Any]], ids: Mapping[str, str] | None = None
    ) -> None:
        self._run(f"DROP TABLE IF EXISTS {self.table}")
        self._run(
            f"CREATE TABLE {self.table} (id text PRIMARY KEY, namespace text NOT NULL, "
            f"content text NOT NULL, metadata jsonb NOT NULL DEFAULT '{{}}', "
            f"embedding vector({self.dims}) NOT NULL)"
        )
        self._run(f"CREATE INDEX ON {self.table} USING hnsw (embedding vector_cosine_ops)")
        self._run(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {self.table} TO benchd")
        rows = _records(memories, ids)
        self._run(
            f"INSERT INTO {self.table} VALUES (%s, %s, %s, %s::jsonb, %s::vector)",
            [
                (i, TENANT, t, json.dumps({"source": "tenant"}), str(v))
                for (i, t), v in zip(rows, vectors([t for _, t in rows], self.dims), strict=True)
            ],
            many=True,
        )

    def snapshot(self) -> list[tuple[Any, ...]]:
        return [
            tuple(r)
            for r in self._run(
                f"SELECT id, namespace, content, metadata::text, embedding::text, xmin::text "
                f"FROM {self.table} WHERE namespace = %s ORDER BY id",
                (TENANT,),
            )
        ]

    def table_definition(self) -> list[tuple[Any, ...]]:
        return [
            tuple(r)
            for r in self._run(
                "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                "WHERE table_name = %s ORDER BY ordinal_position",
                (self.table,),
            )
        ]


class ChromaTenant:
    """A collection ``shared-docs`` created by its owner, holding the tenant's records."""

    name = "shared-docs"

    def __init__(self, url: str, dims: int) -> None:
        self.base = f"{url}/api/v2/tenants/default_tenant/databases/default_database/collections"
        self.dims = dims
        self.id = ""

    def create(
        self, memories: Sequence[Mapping[str, Any]], ids: Mapping[str, str] | None = None
    ) -> None:
        httpx.delete(f"{self.base}/{self.name}", timeout=30)
        made = httpx.post(
            self.base, json={"name": self.name, "metadata": {"owner": "tenant"}}, timeout=30
        )
        made.raise_for_status()
        self.id = made.json()["id"]
        rows = _records(memories, ids)
        body = {
            "ids": [i for i, _ in rows],
            "documents": [t for _, t in rows],
            "metadatas": [{"tenant": TENANT} for _ in rows],
            "embeddings": vectors([t for _, t in rows], self.dims),
        }
        httpx.post(f"{self.base}/{self.id}/add", json=body, timeout=30).raise_for_status()

    def snapshot(self) -> Any:
        body = {"where": {"tenant": TENANT}, "include": ["documents", "metadatas", "embeddings"]}
        got = httpx.post(f"{self.base}/{self.id}/get", json=body, timeout=30)
        got.raise_for_status()
        return got.json()

    def collection(self) -> Any:
        return httpx.get(f"{self.base}/{self.name}", timeout=30).json()


class MilvusTenant:
    """A collection ``shared_docs`` with benchd's default field names and a partition key."""

    name = "shared_docs"

    def __init__(self, uri: str, dims: int) -> None:
        self.uri = uri
        self.dims = dims

    def _client(self) -> Any:
        from pymilvus import MilvusClient

        # dedicated: pymilvus shares one channel per address in a process, and a shared one
        # left idle while other tests run keeps pinging Milvus Lite until it answers GOAWAY
        # "too many pings" to the next client that borrows it
        return MilvusClient(uri=self.uri, dedicated=True)

    def create(
        self, memories: Sequence[Mapping[str, Any]], ids: Mapping[str, str] | None = None
    ) -> None:
        from pymilvus import DataType

        client = self._client()
        try:
            if client.has_collection(self.name):
                client.drop_collection(self.name)
            schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
            schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=256)
            schema.add_field("namespace", DataType.VARCHAR, max_length=128, is_partition_key=True)
            schema.add_field("content", DataType.VARCHAR, max_length=65535)
            schema.add_field("benchd", DataType.JSON)
            schema.add_field("vector", DataType.FLOAT_VECTOR, dim=self.dims)
            index = client.prepare_index_params()
            index.add_index("vector", index_type="AUTOINDEX", metric_type="COSINE")
            client.create_collection(self.name, schema=schema, index_params=index)
            rows = _records(memories, ids)
            vecs = vectors([t for _, t in rows], self.dims)
            entities = [
                {"id": i, "namespace": TENANT, "content": t, "benchd": {"x": 1}, "vector": v}
                for (i, t), v in zip(rows, vecs, strict=True)
            ]
            client.insert(self.name, entities)
        finally:
            client.close()

    def snapshot(self) -> list[Any]:
        client = self._client()
        try:
            rows = client.query(
                self.name, filter=f'namespace == "{TENANT}"',
                output_fields=["id", "namespace", "content", "benchd", "vector"], limit=16384,
            )  # fmt: skip
            return sorted(
                (
                    r["id"],
                    r["namespace"],
                    r["content"],
                    json.dumps(r["benchd"]),
                    np.asarray(r["vector"], dtype=np.float32).tobytes().hex(),
                )
                for r in rows
            )
        finally:
            client.close()


class QdrantTenant:
    """A collection ``shared_docs`` in qdrant-client's local mode, with the tenant's points.

    The tenant's payload uses benchd's default namespace key (``benchd_namespace``) with its
    own value, and its point ids are UUIDs of the fixture's ids. Local mode admits one client
    at a time: each call opens the directory and closes it.
    """

    name = "shared_docs"

    def __init__(self, path: str, dims: int) -> None:
        self.path = path
        self.dims = dims

    def _client(self) -> Any:
        from qdrant_client import QdrantClient

        return QdrantClient(path=self.path)

    @staticmethod
    def point(fixture_id: str) -> str:
        import uuid

        return str(uuid.uuid5(uuid.NAMESPACE_URL, fixture_id))

    def create(
        self, memories: Sequence[Mapping[str, Any]], ids: Mapping[str, str] | None = None
    ) -> None:
        from qdrant_client import models

        from benchd.kinds.qdrant import point_id  # benchd's point of a benchd id

        client = self._client()
        try:
            if client.collection_exists(self.name):
                client.delete_collection(self.name)
            client.create_collection(
                self.name,
                vectors_config=models.VectorParams(size=self.dims, distance=models.Distance.COSINE),
                metadata={"owner": "tenant"},
            )
            rows = _records(memories, ids)
            points = [
                models.PointStruct(
                    id=self.point(i) if ids is None else point_id(i), vector=v,
                    payload={"benchd_namespace": TENANT, "content": t, "fixture_id": i},
                )
                for (i, t), v in zip(rows, vectors([t for _, t in rows], self.dims), strict=True)
            ]  # fmt: skip
            client.upsert(self.name, points=points)
        finally:
            client.close()

    def add(self, point_id: str, text: str) -> None:
        """One more point of the tenant's, at an id of its choosing."""
        from qdrant_client import models

        client = self._client()
        try:
            (vector,) = vectors([text], self.dims)
            payload = {"benchd_namespace": TENANT, "content": text, "fixture_id": "planted"}
            client.upsert(
                self.name, points=[models.PointStruct(id=point_id, vector=vector, payload=payload)]
            )
        finally:
            client.close()

    def snapshot(self) -> list[Any]:
        from qdrant_client import models

        client = self._client()
        try:
            only = models.Filter(must=[models.FieldCondition(
                key="benchd_namespace", match=models.MatchValue(value=TENANT))])  # fmt: skip
            points, _ = client.scroll(
                self.name, scroll_filter=only, limit=100_000, with_payload=True, with_vectors=True
            )
            return sorted(
                (
                    str(p.id),
                    json.dumps(p.payload, sort_keys=True),
                    np.asarray(p.vector, dtype=np.float32).tobytes().hex(),
                )
                for p in points
            )
        finally:
            client.close()

    def rows_in(self, namespace: str, collection: str | None = None) -> int:
        """How many points carry ``benchd_namespace = namespace`` (benchd's, when it is its)."""
        from qdrant_client import models

        client = self._client()
        try:
            name = collection or self.name
            if not client.collection_exists(name):
                return 0
            only = models.Filter(must=[models.FieldCondition(
                key="benchd_namespace", match=models.MatchValue(value=namespace))])  # fmt: skip
            return int(client.count(name, count_filter=only, exact=True).count)
        finally:
            client.close()
