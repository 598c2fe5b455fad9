"""The vector kinds' store I/O against the real servers: pgvector, Chroma, Milvus Lite.

The same behaviours for each kind, driven through the store seam's protocol
(what the shared flow calls): benchd's rows are listed with their digests,
an unchanged record is recognised and a switched embedder is not, searches
rank by the vectors benchd computed, deletes take only benchd's rows, a
table/collection benchd did not create is refused in own mode, and in shared
mode another tenant's rows (the fixture's own ids and texts) stay
byte-identical through all of it.

Qdrant (experimental) runs in qdrant-client's local mode, which admits one client
per directory at a time: every test here closes one store before it opens the next.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from store_servers import Postgres, missing
from tenants import ChromaTenant, MilvusTenant, PostgresTenant, QdrantTenant

from benchd import redact
from benchd.embed.config import EmbedConfig
from benchd.errors import OwnershipError, TargetAuthError
from benchd.fixtures.model import load_fixture, packaged_fixture
from benchd.kinds.vectors import VectorStore
from benchd.store.flow import NamespaceFlow
from benchd.store.lease import LeaseHolder
from benchd.store.owned import OwnedIds, sentinel_id, sentinel_text
from benchd.store.protocol import Record
from benchd.store.target import SearchQuery

pytestmark = pytest.mark.anyio
DIMS = 256
KINDS = ("pgvector", "chroma", "milvus", "qdrant")


def corpus() -> tuple[list[dict[str, Any]], list[Any]]:
    fixture = load_fixture(packaged_fixture("smoke"))
    return [dict(m) for m in fixture.memories], list(fixture.queries)


def records(namespace: str, memories: list[dict[str, Any]]) -> list[Record]:
    owned = OwnedIds.of(namespace, memories)
    return [
        Record(owned.store_of[str(m["id"])], str(m["id"]), m, {"namespace": namespace})
        for m in memories
    ]


def sentinel(namespace: str, holder: LeaseHolder) -> Record:
    memory = {"id": sentinel_id(namespace), "content": sentinel_text(namespace)}
    return Record(sentinel_id(namespace), "", memory, holder.mark(namespace))


@pytest.fixture(scope="module")
def servers(request: pytest.FixtureRequest) -> Callable[[str], Any]:
    def get(kind: str) -> Any:
        return request.getfixturevalue({"pgvector": "postgres"}.get(kind, kind))

    return get


def _need(module: str, extra: str) -> None:
    try:
        __import__(module)
    except ImportError:
        missing(f"{module} (benchd[{extra}]) is not installed")


def make_store(
    kind: str, server: Any, namespace: str, tmp: Path, *, model: str = f"hash:{DIMS}", **kw: Any
) -> VectorStore:
    embed = EmbedConfig(model=model, cache_dir=str(tmp))
    if kind == "pgvector":
        _need("psycopg", "pgvector")
        from benchd.kinds.pgvector import PgvectorConfig, PgvectorStore

        table = kw.pop("table", "benchd_" + namespace.replace("-", "_"))
        config = PgvectorConfig(embed=embed, dsn_env="X", table=table, namespace=namespace, **kw)
        return PgvectorStore(config, server.dsn)
    if kind == "chroma":
        from benchd.kinds.chroma import ChromaConfig, ChromaStore

        config = ChromaConfig(url=server.url, embed=embed, namespace=namespace, **kw)
        return ChromaStore(config, None)
    if kind == "qdrant":
        _need("qdrant_client", "qdrant")
        from benchd.kinds.qdrant import QdrantConfig, QdrantStore

        settings = {"path": server.path, "embed": embed, "namespace": namespace, **kw}
        return QdrantStore(QdrantConfig(**settings), None)
    _need("pymilvus", "milvus")
    from benchd.kinds.milvus import MilvusConfig, MilvusStore

    return MilvusStore(MilvusConfig(uri=server.uri, embed=embed, namespace=namespace, **kw), None)


async def listed(store: VectorStore) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cursor: str | None = None
    while True:
        page = await store.list_page(cursor)
        out.update({r.id: r for r in page.records})
        if page.next is None:
            return out
        cursor = page.next


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_written_records_are_listed_searched_and_deleted(
    kind: str, servers: Callable[[str], Any], tmp_path: Path
) -> None:
    memories, queries = corpus()
    ns = f"own-{kind}"
    store = make_store(kind, servers(kind), ns, tmp_path)
    try:
        batch = records(ns, memories)
        assert await store.write(batch) == (len(batch), 0, 0)
        seen = await listed(store)
        assert set(seen) == {r.store_id for r in batch}
        assert all(store.unchanged(seen[r.store_id], r) for r in batch)
        # as the flow asks it (NamespaceFlow.asked): k = 5 and room for the sentinel
        hits = await store.search(SearchQuery(q=memories[3]["content"], limit=6))
        assert hits.ids[0] == batch[3].store_id and len(hits.ids) == 6
        assert all(a >= b for a, b in zip(hits.scores, hits.scores[1:], strict=False))  # type: ignore[operator]
        assert await store.delete(batch[0].store_id) is True
        assert await store.delete(batch[0].store_id) is False
        assert batch[0].store_id not in await listed(store)
        assert [r.id for r in await store.read_back([batch[1].store_id, "nope"])] == [
            batch[1].store_id
        ]
        assert queries  # the fixture's queries are what the flow searches
    finally:
        await store.aclose()


async def test_a_switched_embedder_makes_every_record_changed(
    kind: str, servers: Callable[[str], Any], tmp_path: Path
) -> None:
    memories, _ = corpus()
    ns = f"switch-{kind}"
    store = make_store(kind, servers(kind), ns, tmp_path)
    batch = records(ns, memories)
    try:
        await store.write(batch)
    finally:
        await store.aclose()
    other = make_store(kind, servers(kind), ns, tmp_path, model="hash:128")
    try:
        seen = await listed(other)
        assert not any(other.unchanged(seen[r.store_id], r) for r in batch)
        await other.write(batch[:2])  # 128 dims: benchd's own table/collection is recreated
        assert set(await listed(other)) == {r.store_id for r in batch[:2]}
        hits = await other.search(SearchQuery(q=memories[1]["content"], limit=3))
        assert hits.ids[0] == batch[1].store_id
    finally:
        await other.aclose()


async def test_the_sentinel_carries_the_lease(
    kind: str, servers: Callable[[str], Any], tmp_path: Path
) -> None:
    ns = f"lease-{kind}"
    store = make_store(kind, servers(kind), ns, tmp_path)
    holder = LeaseHolder(instance="replica-0", ttl_s=60.0, fixture_hash="abc")
    try:
        await store.write_sentinel(sentinel(ns, holder))
        (only,) = (await listed(store)).values()
        assert only.id == sentinel_id(ns)
        assert only.lease is not None and only.lease.token == holder.token
        assert only.lease.instance == "replica-0" and only.lease.live()
    finally:
        await store.aclose()


async def test_own_mode_refuses_what_another_namespace_created(
    kind: str, servers: Callable[[str], Any], tmp_path: Path
) -> None:
    memories, _ = corpus()
    first = make_store(kind, servers(kind), f"first-{kind}", tmp_path)
    try:
        await first.write(records(f"first-{kind}", memories[:3]))
    finally:
        await first.aclose()
    name = {
        "pgvector": {"table": f"benchd_first_{kind}"},
        "chroma": {"collection": f"benchd-first-{kind}"},
        "milvus": {"collection": f"benchd_first_{kind}"},
        "qdrant": {"collection": f"benchd_first_{kind}"},
    }[kind]
    second = make_store(kind, servers(kind), f"second-{kind}", tmp_path, **name)
    try:
        with pytest.raises(OwnershipError, match="another namespace") as caught:
            await second.list_page(None)
        assert caught.value.kind == "ownership"
        with pytest.raises(OwnershipError):
            await second.write(records(f"second-{kind}", memories[:1]))
    finally:
        await second.aclose()
    again = make_store(kind, servers(kind), f"first-{kind}", tmp_path)
    try:
        assert len(await listed(again)) == 3
    finally:
        await again.aclose()


def tenant_of(kind: str, server: Any) -> Any:
    if kind == "pgvector":
        return PostgresTenant(server.admin_dsn, DIMS)
    if kind == "chroma":
        return ChromaTenant(server.url, DIMS)
    if kind == "qdrant":
        return QdrantTenant(server.path, DIMS)
    return MilvusTenant(server.uri, DIMS)


def shared_settings(kind: str, tenant: Any) -> dict[str, Any]:
    if kind == "pgvector":
        return {"shared": True, "table": tenant.table}
    return {"shared": True, "collection": tenant.name}


async def test_shared_mode_leaves_another_tenants_rows_byte_identical(
    kind: str, servers: Callable[[str], Any], tmp_path: Path
) -> None:
    memories, _ = corpus()
    tenant = tenant_of(kind, servers(kind))
    tenant.create(memories)
    before = tenant.snapshot()
    ns = "benchd-shared"
    store = make_store(kind, servers(kind), ns, tmp_path, **shared_settings(kind, tenant))
    try:
        batch = records(ns, memories)
        await store.write(batch)
        await store.write(batch[:5])  # a rewrite: delete-then-insert of benchd's own rows
        seen = await listed(store)
        assert set(seen) == {r.store_id for r in batch}  # the tenant's rows are not listed
        hits = await store.search(SearchQuery(q=memories[0]["content"], limit=10))
        assert all(h.startswith(f"benchd:{ns}:") for h in hits.ids)
        for fid in [str(m["id"]) for m in memories[:5]]:
            assert await store.delete(fid) is False  # the tenant's id, outside benchd's namespace
        if kind == "qdrant":  # the tenant's own point ids, as benchd would read them listed
            for fid in [str(m["id"]) for m in memories[:5]]:
                assert await store.delete(QdrantTenant.point(fid)) is False
        for r in batch:
            assert await store.delete(r.store_id) is True
        assert await listed(store) == {}
    finally:
        await store.aclose()
    assert tenant.snapshot() == before


async def test_a_bulk_delete_takes_only_benchds_rows_in_its_namespace(
    kind: str, servers: Callable[[str], Any], tmp_path: Path
) -> None:
    """One call for a set (the flow's cleanup at 10^5 records): the tenant's ids in the set,
    and benchd's ids of another namespace, are left as they were."""
    memories, _ = corpus()
    tenant = tenant_of(kind, servers(kind))
    tenant.create(memories)
    before = tenant.snapshot()
    ns, other = "benchd-bulk", "benchd-bulk-other"
    settings = shared_settings(kind, tenant)
    store = make_store(kind, servers(kind), ns, tmp_path, **settings)
    try:
        batch = records(ns, memories)
        await store.write(batch)
    finally:
        await store.aclose()
    beside = make_store(kind, servers(kind), other, tmp_path, **settings)
    try:
        await beside.write(records(other, memories[:3]))
    finally:
        await beside.aclose()
    store = make_store(kind, servers(kind), ns, tmp_path, **settings)
    try:
        theirs = [str(m["id"]) for m in memories[:5]]
        theirs += [r.store_id for r in records(other, memories[:3])]
        assert await store.delete_many(theirs + [r.store_id for r in batch[:10]]) == 10
        assert set(await listed(store)) == {r.store_id for r in batch[10:]}
        assert await store.delete_many([r.store_id for r in batch[:10]]) == 0  # gone already
    finally:
        await store.aclose()
    beside = make_store(kind, servers(kind), other, tmp_path, **settings)
    try:
        assert len(await listed(beside)) == 3
    finally:
        await beside.aclose()
    assert tenant.snapshot() == before


async def test_shared_mode_never_creates_or_resizes_a_table(
    kind: str, servers: Callable[[str], Any], tmp_path: Path
) -> None:
    memories, _ = corpus()
    tenant = tenant_of(kind, servers(kind))
    tenant.create(memories[:3])
    before = tenant.snapshot()
    store = make_store(
        kind, servers(kind), "benchd-shared", tmp_path, model="hash:64",
        **shared_settings(kind, tenant),
    )  # fmt: skip
    try:
        with pytest.raises(Exception, match="dimensions") as caught:
            await store.write(records("benchd-shared", memories[:1]))
        assert caught.value.kind == "decode"  # type: ignore[attr-defined]
    finally:
        await store.aclose()
    assert tenant.snapshot() == before


async def test_pgvector_refuses_a_bad_password_and_shows_no_secret(
    servers: Callable[[str], Any], tmp_path: Path
) -> None:
    postgres: Postgres = servers("pgvector")
    bad = postgres.dsn.replace(postgres.password, "not-the-password")
    _need("psycopg", "pgvector")
    from benchd.kinds.pgvector import PgvectorConfig, PgvectorStore

    config = PgvectorConfig(embed=EmbedConfig(model="hash:8", cache=False), dsn_env="X")
    redact.register_secret(bad)  # as config does with the DSN it reads
    store = PgvectorStore(config, bad)
    try:
        with pytest.raises(TargetAuthError) as caught:
            await store.list_page(None)
        assert "not-the-password" not in str(caught.value)
        info = await store.info()
        assert "not-the-password" not in info.endpoint
        assert info.endpoint.startswith("127.0.0.1:") and " db benchd user benchd " in info.endpoint
        assert redact.text(info.endpoint) == info.endpoint  # nothing in it looks like the DSN
    finally:
        await store.aclose()


async def test_qdrant_never_overwrites_a_foreign_point_at_benchds_point_id(
    servers: Callable[[str], Any], tmp_path: Path
) -> None:
    """Qdrant's upsert replaces a point by id whoever wrote it: benchd reads the ids first and
    refuses (ownership) when one is another tenant's, even at the UUID benchd derives."""
    from benchd.kinds.qdrant import point_id

    _need("qdrant_client", "qdrant")
    memories, _ = corpus()
    server = servers("qdrant")
    tenant = QdrantTenant(server.path, DIMS)
    tenant.create(memories)
    ns = "benchd-planted"
    batch = records(ns, memories)
    tenant.add(point_id(batch[2].store_id), "the tenant's own text at benchd's point id")
    before = tenant.snapshot()
    store = make_store("qdrant", server, ns, tmp_path, shared=True, collection=tenant.name)
    try:
        with pytest.raises(OwnershipError, match="never writes over") as caught:
            await NamespaceFlow(store).seed(memories)  # the flow reads benchd's ids first
        assert caught.value.kind == "ownership"
        assert await store.delete(batch[2].store_id) is False
        assert (await store.list_page(None)).records == []  # nothing written, no sentinel
    finally:
        await store.aclose()
    assert tenant.snapshot() == before


async def test_qdrant_local_storage_held_by_another_client_is_an_ownership_error(
    servers: Callable[[str], Any], tmp_path: Path
) -> None:
    _need("qdrant_client", "qdrant")
    from qdrant_client import QdrantClient

    path = str(tmp_path / "held")
    holder = QdrantClient(path=path)
    store = make_store("qdrant", servers("qdrant"), "benchd-held", tmp_path, path=path)
    try:
        with pytest.raises(OwnershipError, match="held by another process") as caught:
            await store.list_page(None)
        assert caught.value.kind == "ownership"
    finally:
        await store.aclose()
        holder.close()


IDLE_S = 100.0
"""Longer than Milvus Lite lets a channel ping without calls: pymilvus pings every 10 s, even
idle, and the server answered GOAWAY "too_many_pings" after ~70 s of it."""


async def test_a_milvus_channel_idle_between_cycles_draws_no_goaway(
    servers: Callable[[str], Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A daemon's channel sits idle for a whole interval; it pings only during calls, so the
    server never sends GOAWAY and gRPC writes nothing on stderr (it did, every idle minute)."""
    import anyio

    memories, _ = corpus()
    ns = "idle-milvus"
    store = make_store("milvus", servers("milvus"), ns, tmp_path)
    try:
        batch = records(ns, memories[:3])
        assert await store.write(batch) == (3, 0, 0)
        capfd.readouterr()
        await anyio.sleep(IDLE_S)  # idle, as between two cycles
        hits = await store.search(SearchQuery(q=memories[1]["content"], limit=3))
        assert hits.ids[0] == batch[1].store_id
    finally:
        await store.aclose()
    err = capfd.readouterr().err
    assert "too_many_pings" not in err and "GOAWAY" not in err, err[-2000:]


def chroma_hnsw(server: Any, name: str) -> dict[str, Any]:
    import httpx

    base = f"{server.url}/api/v2/tenants/default_tenant/databases/default_database/collections"
    got = httpx.get(f"{base}/{name}", timeout=30)
    got.raise_for_status()
    return dict(got.json()["configuration_json"]["hnsw"])


async def test_chroma_hnsw_breadths_reach_benchds_own_collection_and_ef_search_follows_the_config(
    servers: Callable[[str], Any], tmp_path: Path
) -> None:
    """Created with the configured breadths; a changed ef_search is set in place on the next
    lookup (no re-seed: the records stay), an unset one leaves Chroma's value alone."""
    memories, _ = corpus()
    server, ns = servers("chroma"), "benchd-hnsw-ef"
    name = "benchd-" + ns
    first = make_store("chroma", server, ns, tmp_path, ef_search=321, ef_construction=222)
    try:
        await first.write(records(ns, memories[:4]))
    finally:
        await first.aclose()
    hnsw = chroma_hnsw(server, name)
    assert (hnsw["ef_search"], hnsw["ef_construction"]) == (321, 222)
    second = make_store("chroma", server, ns, tmp_path, ef_search=77)
    try:
        assert len(await listed(second)) == 4
    finally:
        await second.aclose()
    hnsw = chroma_hnsw(server, name)
    assert (hnsw["ef_search"], hnsw["ef_construction"]) == (77, 222)
    third = make_store("chroma", server, ns, tmp_path)
    try:
        assert len(await listed(third)) == 4
    finally:
        await third.aclose()
    assert chroma_hnsw(server, name)["ef_search"] == 77


def test_chroma_hnsw_breadths_on_a_shared_collection_are_refused() -> None:
    from benchd.kinds.chroma import ChromaConfig

    embed = EmbedConfig(model=f"hash:{DIMS}")
    with pytest.raises(ValueError, match="own collection only"):
        ChromaConfig(url="http://127.0.0.1:1", embed=embed, shared=True, collection="x",
                     ef_search=50)  # fmt: skip
